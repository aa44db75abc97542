"""Metrics on hand-computed cases (worked out in the comments) and their edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import (
    coverage_error,
    label_ranking_average_precision_score,
    label_ranking_loss,
)

from app import scoring as m

# Two samples, q = 4 labels.
# Row 1: relevant {0, 2}; scores 0.9, 0.8, 0.3, 0.1 -> ranks l0=1, l1=2, l2=3, l3=4.
# Row 2: relevant {1};    scores 0.2, 0.4, 0.6, 0.1 -> ranks l2=1, l1=2, l0=3, l3=4.
Y = np.array([[1, 0, 1, 0], [0, 1, 0, 0]], dtype=float)
S = np.array([[0.9, 0.8, 0.3, 0.1], [0.2, 0.4, 0.6, 0.1]])
YHAT = np.array([[1, 1, 0, 0], [0, 1, 0, 0]], dtype=float)


def test_ranking_loss_hand_computed():
    # row 1 pairs (rel, irrel): (0,1) ok, (0,3) ok, (2,1) 0.3 <= 0.8 wrong, (2,3) ok -> 1/4
    # row 2 pairs: (1,0) ok, (1,2) 0.4 <= 0.6 wrong, (1,3) ok -> 1/3
    # mean = (1/4 + 1/3) / 2 = 7/24
    assert m.ranking_loss(Y, S) == pytest.approx(7 / 24)


def test_one_error_hand_computed():
    # row 1 top = l0 (relevant) -> 0; row 2 top = l2 (irrelevant) -> 1; mean 1/2
    assert m.one_error(Y, S) == pytest.approx(0.5)


def test_coverage_hand_computed_and_sklearn_offset():
    # row 1: deepest relevant label l2 at rank 3 -> 2; row 2: l1 at rank 2 -> 1; mean 1.5
    assert m.coverage(Y, S) == pytest.approx(1.5)
    assert m.coverage(Y, S) == pytest.approx(coverage_error(Y, S) - 1)


def test_average_precision_hand_computed():
    # row 1: l0 rank 1, 1 relevant at or above -> 1/1; l2 rank 3, 2 relevant -> 2/3; mean 5/6
    # row 2: l1 rank 2, 1 relevant -> 1/2
    # mean = (5/6 + 1/2) / 2 = 2/3
    assert m.average_precision(Y, S) == pytest.approx(2 / 3)


def test_label_set_metrics_hand_computed():
    # Yhat row 1 = {0, 1} vs Y {0, 2}: l1 and l2 wrong; row 2 exact.
    # Hamming: 2 wrong of 8 = 0.25; subset accuracy: 1 of 2 rows exact = 0.5
    assert m.hamming_loss(Y, YHAT) == pytest.approx(0.25)
    assert m.subset_accuracy(Y, YHAT) == pytest.approx(0.5)
    # pooled TP = 2 (r1 l0, r2 l1), FP = 1 (r1 l1), FN = 1 (r1 l2): 2*2 / (4 + 1 + 1) = 2/3
    assert m.micro_f1(Y, YHAT) == pytest.approx(2 / 3)
    # per label: l0 TP1 -> 1; l1 TP1 FP1 -> 2/3; l2 FN1 -> 0; l3 nothing -> 0/0 := 0
    # macro = (1 + 2/3 + 0 + 0) / 4 = 5/12 ; with zero_division=1: (1 + 2/3 + 0 + 1) / 4 = 2/3
    assert m.macro_f1(Y, YHAT) == pytest.approx(5 / 12)
    assert m.macro_f1(Y, YHAT, zero_division=1.0) == pytest.approx(2 / 3)
    # per sample: row 1 2*1/(2+2) = 1/2; row 2 2*1/(1+1) = 1; mean 3/4
    assert m.example_f1(Y, YHAT) == pytest.approx(0.75)


def test_multilabel_metrics_dict_matches_functions():
    out = m.multilabel_metrics(Y, YHAT, S)
    assert tuple(out) == m.MULTILABEL_METRICS
    assert out["ranking_loss"] == pytest.approx(7 / 24)
    assert out["coverage"] == pytest.approx(1.5)
    assert out["macro_f1"] == pytest.approx(5 / 12)
    without_scores = m.multilabel_metrics(Y, YHAT, None)
    assert "ranking_loss" not in without_scores and "hamming_loss" in without_scores


@pytest.mark.parametrize("seed", range(6))
def test_multilabel_metrics_equal_each_function_exactly(seed):
    # computed together (one set of counts, one ranking), the values are the functions' own to the
    # last bit: on random sets with empty and full rows, tied scores, all-empty predictions
    rng = np.random.default_rng(seed)
    for trial in range(40):
        n, q = int(rng.integers(1, 40)), int(rng.integers(2, 9))
        Yr = rng.random((n, q)) < rng.random()
        Pr = rng.random((n, q)) < rng.random() * (trial % 5 != 0)
        Sr = rng.integers(0, 3, size=(n, q)).astype(float) if trial % 2 else rng.normal(size=(n, q))
        together = m.multilabel_metrics(Yr, Pr, Sr)
        alone = {
            "hamming_loss": m.hamming_loss(Yr, Pr),
            "ranking_loss": m.ranking_loss(Yr, Sr),
            "one_error": m.one_error(Yr, Sr),
            "coverage": m.coverage(Yr, Sr),
            "average_precision": m.average_precision(Yr, Sr),
            "subset_accuracy": m.subset_accuracy(Yr, Pr),
            "micro_f1": m.micro_f1(Yr, Pr),
            "macro_f1": m.macro_f1(Yr, Pr),
            "example_f1": m.example_f1(Yr, Pr),
        }
        assert list(together) == list(alone)
        for name, value in alone.items():
            assert together[name] == value or (math.isnan(value) and math.isnan(together[name])), (name, trial)


def test_degenerate_rows_are_skipped_by_ranking_metrics():
    # add an empty row and a full row with arbitrary scores
    y = np.vstack([Y, [0, 0, 0, 0], [1, 1, 1, 1]])
    s = np.vstack([S, [0.1, 0.9, 0.5, 0.3], [0.4, 0.3, 0.2, 0.1]])
    assert m.ranking_loss(y, s) == pytest.approx(7 / 24)
    assert m.one_error(y, s) == pytest.approx(0.5)
    assert m.average_precision(y, s) == pytest.approx(2 / 3)
    # coverage skips only the empty row; the full row costs q - 1 = 3: (2 + 1 + 3) / 3 = 2
    assert m.coverage(y, s) == pytest.approx(2.0)
    # Hamming uses every row: 2 wrong of 16 when predicting the truth elsewhere
    yhat = np.vstack([YHAT, [0, 0, 0, 0], [1, 1, 1, 1]])
    assert m.hamming_loss(y, yhat) == pytest.approx(2 / 16)


def test_all_rows_degenerate_gives_nan():
    y = np.array([[0, 0, 0], [1, 1, 1]], dtype=float)
    s = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    assert math.isnan(m.ranking_loss(y, s))
    assert math.isnan(m.one_error(y, s))
    assert math.isnan(m.average_precision(y, s))
    assert m.coverage(y, s) == pytest.approx(2.0)  # the full row is kept: q - 1
    assert math.isnan(m.coverage(np.zeros((2, 3)), s))


def test_ties_are_pessimistic_except_one_error():
    y = np.array([[1, 0, 0]], dtype=float)
    s = np.array([[0.5, 0.5, 0.1]])
    # the tied irrelevant label counts as ranked above: 1 wrong pair of 2
    assert m.ranking_loss(y, s) == pytest.approx(0.5)
    # rank(l0) = #{scores >= 0.5} = 2 -> coverage 1, precision 1/2
    assert m.coverage(y, s) == pytest.approx(1.0)
    assert m.average_precision(y, s) == pytest.approx(0.5)
    # one-error: a relevant label among the tied top labels counts as correct
    assert m.one_error(y, s) == 0.0
    assert m.one_error(np.array([[0, 0, 1]]), s) == 1.0


def test_perfect_scores():
    rng = np.random.default_rng(0)
    y = (rng.random((50, 7)) < 0.3).astype(float)
    y[:, 0] = 1 - y[:, 1]  # no empty row
    s = y + 0.01 * rng.random(y.shape)  # every relevant label above every irrelevant one
    assert m.ranking_loss(y, s) == 0.0
    assert m.one_error(y, s) == 0.0
    assert m.average_precision(y, s) == pytest.approx(1.0)
    assert m.coverage(y, s) == pytest.approx(np.mean(y.sum(axis=1) - 1))
    assert m.hamming_loss(y, y) == 0.0
    assert m.micro_f1(y, y) == m.example_f1(y, y) == 1.0


def test_ranking_metrics_equal_sklearn_on_kept_rows():
    rng = np.random.default_rng(1)
    y = (rng.random((300, 9)) < 0.3).astype(float)
    s = np.round(rng.random((300, 9)), 1)  # many ties
    n_pos = y.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < 9)
    assert m.ranking_loss(y, s) == pytest.approx(label_ranking_loss(y[keep], s[keep]))
    assert m.average_precision(y, s) == pytest.approx(label_ranking_average_precision_score(y[keep], s[keep]))
    assert m.coverage(y, s) == pytest.approx(coverage_error(y[n_pos > 0], s[n_pos > 0]) - 1)


def test_f1_zero_division_cases():
    empty = np.zeros((2, 3))
    # nothing true, nothing predicted: every F1 is 0/0 -> zero_division
    assert m.micro_f1(empty, empty) == 0.0
    assert m.micro_f1(empty, empty, zero_division=1.0) == 1.0
    assert m.example_f1(empty, empty) == 0.0
    assert m.example_f1(empty, empty, zero_division=1.0) == 1.0


def test_minus_one_plus_one_labels_are_accepted():
    assert m.hamming_loss(2 * Y - 1, 2 * YHAT - 1) == pytest.approx(0.25)
    assert m.ranking_loss(2 * Y - 1, S) == pytest.approx(7 / 24)


def test_input_checks():
    with pytest.raises(ValueError, match="shape"):
        m.hamming_loss(Y, YHAT[:, :3])
    with pytest.raises(ValueError, match="shape"):
        m.ranking_loss(Y, S[:1])
    with pytest.raises(ValueError, match="non-finite"):
        m.one_error(Y, np.where(S > 0.5, np.nan, S))
    with pytest.raises(ValueError, match="2-D"):
        m.coverage(Y[0], S[0])
    with pytest.raises(ValueError, match="empty"):
        m.ldl_metrics(np.zeros((0, 3)), np.zeros((0, 3)))


# LDL: d = (0.5, 0.5, 0), d̂ = (0.25, 0.5, 0.25)
D1 = np.array([[0.5, 0.5, 0.0]])
H1 = np.array([[0.25, 0.5, 0.25]])


def test_ldl_metrics_hand_computed():
    # Chebyshev: max(0.25, 0, 0.25) = 0.25
    assert m.chebyshev(D1, H1) == pytest.approx(0.25)
    # Clark: sqrt(0.25²/0.75² + 0 + 0.25²/0.25²) = sqrt(1/9 + 1) = sqrt(10/9)
    assert m.clark(D1, H1) == pytest.approx(math.sqrt(10 / 9))
    # Canberra: 0.25/0.75 + 0 + 0.25/0.25 = 4/3
    assert m.canberra(D1, H1) == pytest.approx(4 / 3)
    # KL: 0.5 ln(0.5/0.25) + 0.5 ln 1 + (d = 0 term) 0 = 0.5 ln 2
    assert m.kl_divergence(D1, H1) == pytest.approx(0.5 * math.log(2))
    # Cosine: 0.375 / (sqrt(0.5) sqrt(0.375)) = sqrt(0.75)
    assert m.cosine(D1, H1) == pytest.approx(math.sqrt(0.75))
    # Intersection: 0.25 + 0.5 + 0 = 0.75
    assert m.intersection(D1, H1) == pytest.approx(0.75)


def test_ldl_metrics_average_over_samples():
    d = np.vstack([D1, [[1 / 3, 1 / 3, 1 / 3]]])
    h = np.vstack([H1, [[1 / 3, 1 / 3, 1 / 3]]])  # second row exact
    out = m.ldl_metrics(d, h)
    assert tuple(out) == m.LDL_METRICS
    assert out["chebyshev"] == pytest.approx(0.125)
    assert out["canberra"] == pytest.approx(2 / 3)
    assert out["intersection"] == pytest.approx(0.875)
    assert out["cosine"] == pytest.approx((math.sqrt(0.75) + 1) / 2)


def test_ldl_zero_terms():
    d = np.array([[0.0, 1.0, 0.0], [0.2, 0.8, 0.0]])
    # identical distributions with zeros: 0/0 terms are 0, nothing is nan
    out = m.ldl_metrics(d, d)
    assert out == pytest.approx(
        {"chebyshev": 0, "clark": 0, "canberra": 0, "kl_divergence": 0, "cosine": 1, "intersection": 1}
    )
    # a zero prediction where the truth is positive: KL stays finite, uses eps
    h = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    kl = m.kl_divergence(d, h)
    expected = (1.0 * math.log(1 / 0.5) + 0.2 * math.log(0.2 / m.KL_EPS) + 0.8 * math.log(0.8)) / 2
    assert math.isfinite(kl) and kl == pytest.approx(expected)
    # Canberra: row 1 = 0.5/0.5 + 0.5/1.5 = 4/3 ; row 2 = 0.2/0.2 + 0.2/1.8 = 10/9
    assert m.canberra(d, h) == pytest.approx((4 / 3 + 10 / 9) / 2)


def test_ldl_metric_ranges_on_random_distributions():
    rng = np.random.default_rng(2)
    d = rng.dirichlet(np.ones(6), size=40)
    h = rng.dirichlet(np.ones(6), size=40)
    out = m.ldl_metrics(d, h)
    assert 0 <= out["chebyshev"] <= 1
    assert 0 <= out["clark"] <= math.sqrt(6)
    assert 0 <= out["canberra"] <= 6
    assert out["kl_divergence"] >= 0
    assert 0 <= out["cosine"] <= 1 and 0 <= out["intersection"] <= 1
    # intersection = 1 - half the L1 distance for distributions
    assert out["intersection"] == pytest.approx(1 - 0.5 * np.abs(d - h).sum(axis=1).mean())


@pytest.mark.parametrize("levels", [None, 3])
def test_ranking_metrics_equal_the_full_rankdata_formulas(monkeypatch, levels):
    """Average precision and ranking loss count ranks at the relevant entries only (in blocks);
    their values are bit for bit those of the formulas over scipy's pessimistic ranks of the
    whole matrix, ties included (``levels``: scores drawn from 3 values, ties everywhere)."""
    from scipy.stats import rankdata

    monkeypatch.setattr(m, "_COMPARE_ENTRIES", 64)  # many blocks
    rng = np.random.default_rng(7)
    Y = (rng.random((300, 17)) < 0.2).astype(int)
    S = rng.random((300, 17)) if levels is None else rng.integers(0, levels, (300, 17)) / levels
    n_pos = Y.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < Y.shape[1])
    y, s, n_pos = Y[keep] > 0, S[keep], n_pos[keep]
    rank = rankdata(-s, method="max", axis=1)
    relrank = rankdata(np.where(y, -s, np.inf), method="max", axis=1)
    ap = float((np.where(y, relrank / rank, 0.0).sum(axis=1) / n_pos).mean())
    wrong = np.where(y, rank - relrank, 0.0).sum(axis=1)
    rl = float(np.mean(wrong / (n_pos * (y.shape[1] - n_pos))))
    assert m.average_precision(Y, S) == ap
    assert m.ranking_loss(Y, S) == rl
