"""Label-set rules (learned threshold, never-empty fallback), DMKNN's ranking, and the fit warnings
of the kNN classifiers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.methods.dmknn import DMKNN
from app.methods.fit_warnings import EmptyLabelSetWarning
from app.methods.label_rules import fill_empty, loo_threshold, nonempty_by_default
from app.methods.mlknn import MLkNN, lookup, neighbour_counts
from app.scoring import average_precision, micro_f1


def sparse_text_like(seed: int, m: int = 300, d: int = 40, q: int = 12):
    """Rare, weakly predictable labels, one or two per sample (every sample carries one)."""
    rng = np.random.default_rng(seed)
    Y = np.zeros((m, q), dtype=np.int64)
    Y[np.arange(m), rng.integers(0, q, size=m)] = 1
    Y[rng.random((m, q)) < 0.03] = 1
    X = (rng.random((m, d)) < 0.08).astype(float)
    X[:, :q] += 0.6 * Y * (rng.random((m, q)) < 0.5)  # a weak signal in the first q features
    return X, Y


def test_loo_threshold_maximises_micro_f1_over_every_cut():
    rng = np.random.default_rng(0)
    P = np.round(rng.random((80, 5)), 2)  # many ties
    Y = (rng.random((80, 5)) < P).astype(int)
    t = loo_threshold(P, Y)
    best = max(micro_f1(Y, (P > c).astype(int)) for c in np.r_[np.unique(P), -1.0])
    assert micro_f1(Y, (P > t).astype(int)) == pytest.approx(best, abs=1e-12)
    assert loo_threshold(P, np.zeros_like(Y)) == 0.5


def test_fill_empty_and_auto_rule():
    Yhat = np.array([[0, 0, 0], [1, 0, 0]], dtype=np.int8)
    S = np.array([[0.1, 0.3, 0.3], [0.9, 0.0, 0.95]])
    np.testing.assert_array_equal(fill_empty(Yhat, S), [[0, 1, 0], [1, 0, 0]])  # tie -> lower index
    assert nonempty_by_default(np.eye(3, dtype=int))
    assert not nonempty_by_default(np.array([[1, 0], [0, 0], [0, 1]]))


def test_mlknn_default_threshold_is_learned_on_leave_one_out_posteriors():
    X, Y = sparse_text_like(1)
    model = MLkNN(k=8).fit(X, Y)
    loo = lookup(model.posterior_table_, neighbour_counts(model.Y_fit_, model.index_.kneighbors(None, 8)))
    assert model.threshold_ == loo_threshold(loo, Y) < 0.5
    assert model.ensure_nonempty_  # every training sample carries a label
    Xte = sparse_text_like(2)[0]
    P = model.decision_function(Xte)
    Yhat = model.predict(Xte)
    assert Yhat.any(axis=1).all()
    np.testing.assert_array_equal(Yhat, fill_empty((P > model.threshold_).astype(np.int8), P))


def test_mlknn_map_rule_warns_when_most_samples_would_get_no_label():
    X, Y = sparse_text_like(3)
    with pytest.warns(EmptyLabelSetWarning, match="empty label set"):
        reference = MLkNN(k=8, threshold="map", ensure_nonempty="off").fit(X, Y)
    assert reference.threshold_ == 0.5 and reference.training_empty_share_ > 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyLabelSetWarning)
        assert MLkNN(k=8).fit(X, Y).training_empty_share_ == 0.0


def test_mlknn_auto_keeps_empty_sets_when_training_data_have_them():
    X, Y = sparse_text_like(4)
    Y[::3] = 0  # a third of the samples carry no label
    model = MLkNN(k=8).fit(X, Y)
    assert not model.ensure_nonempty_
    assert MLkNN(k=8, ensure_nonempty="on").fit(X, Y).ensure_nonempty_


def test_dmknn_posterior_ranking_equals_mlknn_average_precision():
    X, Y = sparse_text_like(5)
    Xte, Yte = sparse_text_like(6)
    dm = DMKNN(k=8).fit(X, Y)
    ml = MLkNN(k=8).fit(X, Y)
    np.testing.assert_array_equal(dm.scores(Xte)[0], ml.decision_function(Xte))  # the posteriors agree
    assert average_precision(Yte, dm.decision_function(Xte)) == average_precision(Yte, ml.decision_function(Xte))
    # Algorithm 4's sets first changes the ranking (the posterior rule's sets are a top slice of it)
    first = DMKNN(k=8, label_sets="paper", ranking="predicted_first").fit(X, Y).decision_function(Xte)
    assert average_precision(Yte, first) != average_precision(Yte, ml.decision_function(Xte))


def test_dmknn_threshold_floor_only_raises_the_beta_thresholds():
    X, Y = sparse_text_like(7)
    plain = DMKNN(k=8, label_sets="paper").fit(X, Y)
    floored = DMKNN(k=8, label_sets="paper", independence_threshold_floor=0.5).fit(X, Y)
    np.testing.assert_array_equal(floored.beta_independence_threshold_, plain.independence_threshold_)
    np.testing.assert_array_equal(floored.independence_threshold_, np.maximum(plain.independence_threshold_, 0.5))
    Xte = sparse_text_like(8)[0]
    assert floored.predict(Xte).sum() < plain.predict(Xte).sum()


def test_dmknn_warns_when_algorithm_4_leaves_most_training_samples_empty():
    X, Y = sparse_text_like(9)
    with pytest.warns(EmptyLabelSetWarning, match="dmknn"):
        DMKNN(k=8, label_sets="paper", strategy="itemset_only", ensure_nonempty=False, min_support=0.5).fit(X, Y)
