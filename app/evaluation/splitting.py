"""A train/test split of one dataset's rows (``POST /datasets/{id}/split``).

Multi-label rows are split by iterative stratification (Sechidis et al. 2011, as
``iterative-stratification`` implements it, the same as ``auto``'s folds), so that each label's
frequency is about the same in both parts even for rare labels; a random split of a small set
can leave a rare label out of the test part altogether. Distribution rows have no classes to
stratify and are shuffled. The split depends only on the label table, the fraction and the
seed, so the same request splits the same way.
"""

from __future__ import annotations

import math

import numpy as np
from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

#: each part must hold at least this many rows (a dataset needs 2 samples)
MIN_PART_ROWS = 2


def n_test_rows(n_samples: int, test_fraction: float) -> int:
    """How many of ``n_samples`` rows go to the test part (rounded up, as scikit-learn does)."""
    return math.ceil(test_fraction * n_samples)


def split_problem(n_samples: int, test_fraction: float) -> str | None:
    """Why ``n_samples`` rows cannot be split at ``test_fraction`` (None when they can)."""
    n_test = n_test_rows(n_samples, test_fraction)
    if n_test < MIN_PART_ROWS or n_samples - n_test < MIN_PART_ROWS:
        return (
            f"test_fraction={test_fraction} of {n_samples} rows leaves {n_test} test and {n_samples - n_test} "
            f"train rows; each part needs at least {MIN_PART_ROWS}"
        )
    return None


def train_test_rows(Y: np.ndarray, kind: str, test_fraction: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted row indices of the train and the test part (check ``split_problem`` first).

    ``Y`` is the 0/1 label table (``kind == "multilabel"``: stratified) or the distribution rows
    (shuffled). Indices are sorted so that each part keeps the parent's row order.
    """
    n = Y.shape[0]
    n_test = n_test_rows(n, test_fraction)
    if kind == "multilabel":
        splitter = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=n_test, random_state=random_state)
        train, test = next(splitter.split(np.zeros((n, 1)), np.asarray(Y)))
        train, test = _exact(train, test, n_test, np.random.default_rng(random_state))
    else:
        order = np.random.default_rng(random_state).permutation(n)
        test, train = order[:n_test], order[n_test:]
    return np.sort(train), np.sort(test)


def _exact(train: np.ndarray, test: np.ndarray, n_test: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Parts of exactly ``n_test`` test rows: iterative stratification balances the labels first
    and can miss the size by a row or two, which then move (chosen by the seed) to the other part."""
    if test.size > n_test:
        moved = rng.choice(test.size, test.size - n_test, replace=False)
        return np.concatenate([train, test[moved]]), np.delete(test, moved)
    if test.size < n_test:
        moved = rng.choice(train.size, n_test - test.size, replace=False)
        return np.delete(train, moved), np.concatenate([test, train[moved]])
    return train, test
