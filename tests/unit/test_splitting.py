"""The train/test rows of a split (``app/evaluation/splitting.py``), on generated label tables."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.splitting import split_problem, train_test_rows
from tests.helpers import make_distribution, make_multilabel


@pytest.mark.parametrize(("n", "fraction"), [(50, 0.2), (37, 0.3), (200, 0.1), (11, 0.5)])
def test_parts_partition_the_rows_with_the_asked_size(n, fraction):
    _, Y = make_multilabel(n=n, q=4, seed=n)
    train, test = train_test_rows(Y, "multilabel", fraction, 0)
    assert test.size == int(np.ceil(fraction * n))
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)  # the parent's order


def test_a_rare_label_reaches_both_parts():
    rng = np.random.default_rng(0)
    Y = (rng.random((100, 5)) < 0.3).astype(float)
    Y[:, 4] = 0
    Y[rng.choice(100, 4, replace=False), 4] = 1  # 4 rows of a rare label
    for seed in range(5):
        train, test = train_test_rows(Y, "multilabel", 0.25, seed)
        assert Y[test, 4].sum() >= 1 and Y[train, 4].sum() >= 1


def test_the_seed_decides_the_split():
    _, Y = make_multilabel(n=60)
    first = train_test_rows(Y, "multilabel", 0.2, 1)[1]
    assert np.array_equal(first, train_test_rows(Y, "multilabel", 0.2, 1)[1])
    assert not np.array_equal(first, train_test_rows(Y, "multilabel", 0.2, 2)[1])


def test_distributions_are_shuffled():
    _, D = make_distribution(n=40)
    train, test = train_test_rows(D, "distribution", 0.25, 0)
    assert test.size == 10 and not np.array_equal(test, np.arange(10))
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(40))


def test_too_small_parts_are_refused():
    assert split_problem(5, 0.1) is not None  # 1 test row
    assert split_problem(5, 0.9) is not None  # 0 train rows left after 5 test ones
    assert split_problem(10, 0.2) is None
