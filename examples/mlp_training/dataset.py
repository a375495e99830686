"""The training data: scikit-learn's bundled handwritten digits (8x8, offline), or MNIST from IDX
files the user has. Both come out as float32 features scaled to [0, 1] and int64 labels, split
into a training set and a held-out set for the accuracy in the summary.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idx import read_idx


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def features(self) -> int:
        return self.x_train.shape[1]


def _split(name: str, x: np.ndarray, y: np.ndarray, held_out: float, seed: int) -> Dataset:
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * held_out))
    test, train = order[:n_test], order[n_test:]
    return Dataset(name, x[train], y[train], x[test], y[test])


def digits(held_out: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 1797 8x8 digits (pixel values 0..16), shuffled and split."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    return _split("scikit-learn digits (8x8)", x, bunch.target.astype(np.int64), held_out, seed)


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).exists():
            return directory / name
    return None


def mnist(directory: str | Path, held_out: float = 0.2, seed: int = 0) -> Dataset:
    """MNIST from ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (optionally .gz) in
    `directory`; the ``t10k-*`` files, when present, are the held-out set, otherwise a split."""
    directory = Path(directory)

    def load(kind: str) -> tuple[np.ndarray, np.ndarray] | None:
        images, labels = _find(directory, f"{kind}-images-idx3-ubyte"), _find(directory, f"{kind}-labels-idx1-ubyte")
        if images is None or labels is None:
            return None
        x, y = read_idx(images), read_idx(labels)
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(f"{images}, {labels}: expected N images and N labels, got {x.shape} and {y.shape}")
        return (x.reshape(len(x), -1).astype(np.float32) / 255.0), y.astype(np.int64)

    train = load("train")
    if train is None:
        raise FileNotFoundError(f"{directory}: no train-images-idx3-ubyte / train-labels-idx1-ubyte (.gz) files")
    side = int(np.sqrt(train[0].shape[1]))
    test = load("t10k")
    if test is None:
        return _split(f"MNIST ({side}x{side}, {directory})", *train, held_out, seed)
    return Dataset(f"MNIST ({side}x{side}, {directory})", *train, *test)


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """One epoch of shuffled full batches (the last partial one dropped: every step then has one
    shape, so the emulator compiles one graph)."""
    order = np.random.default_rng(seed).permutation(len(x))
    n = len(x) // batch_size
    return [(x[order[k * batch_size:(k + 1) * batch_size]], y[order[k * batch_size:(k + 1) * batch_size]])
            for k in range(n)]
