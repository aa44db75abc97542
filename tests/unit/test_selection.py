"""Cross-validated model selection on generated data: folds, candidates, grids, ranking, progress."""

from __future__ import annotations

import numpy as np
import pytest

from app import selection
from app.methods.base import JobCancelled
from tests.helpers import make_distribution, make_multilabel


def test_folds_are_stratified_partitions() -> None:
    X, Y = make_multilabel(n=120, q=3)
    Y[:6, 2] = 1  # a rarer pattern still spreads over the folds
    splits = selection.folds(Y, "multilabel", 5, 0)
    held_out = np.concatenate([te for _, te in splits])
    assert sorted(held_out) == list(range(120))
    for tr, te in splits:
        assert not set(tr) & set(te)
        share = Y[te].sum(axis=0) / Y.sum(axis=0)
        assert np.all(np.abs(share - 0.2) < 0.06)
    with pytest.raises(ValueError, match="cv"):
        selection.folds(Y, "multilabel", 1, 0)


def test_default_candidates_follow_kind_cost_and_expense() -> None:
    ml = selection.default_candidates("multilabel", 200, 10, 4, 5)
    assert {"br", "ecc", "rf", "mlknn", "dmknn"} <= set(ml)
    assert "trans-ovk" not in ml and "mi-filter" not in ml and "elcfs" not in ml
    assert set(selection.default_candidates("distribution", 200, 10, 4, 5)) == {"aa-knn", "ldlkm", "sa-maxent"}
    tight = selection.default_candidates("multilabel", 2000, 600, 30, 5, budget=10.0)
    assert tight and "ecc" not in tight and "rf" not in tight  # too dear for 10 s; the cheapest remains
    assert selection.default_candidates("multilabel", 10**6, 10**4, 100, 5, budget=0.0)  # never empty


def test_grid_is_the_product_of_the_documented_axes() -> None:
    assert selection.grid("rf") == [
        {"max_features": "sqrt", "min_samples_leaf": 1},
        {"max_features": "sqrt", "min_samples_leaf": 3},
        {"max_features": 0.3, "min_samples_leaf": 1},
        {"max_features": 0.3, "min_samples_leaf": 3},
    ]
    assert selection.grid("unknown") == [{}]


def test_select_ranks_by_the_metric_and_reports_progress() -> None:
    X, Y = make_multilabel(n=90, d=6, q=3)
    X = np.hstack([X, np.random.default_rng(1).random((90, 20))])  # noise features
    seen: list[tuple[str, float]] = []
    result = selection.select(
        X, Y, "multilabel", candidates=["br", "mlknn"], cv=3, progress=lambda s, f: seen.append((s, f))
    )
    board = result.leaderboard
    means = [e.mean("average_precision") for e in board]
    assert means == sorted(means, reverse=True)
    assert all(len(e.fold_metrics) == 3 and len(e.fit_seconds) == 3 for e in board)
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("mlknn (2/2) fold 3/3" in s for s, _ in seen)
    record = result.record()
    assert record["metric"] == "average_precision" and record["cv"] == 3
    assert [r["method"] for r in record["leaderboard"]] == [e.method for e in board]
    assert board[0].oof_scores is not None and board[0].oof_scores.shape == Y.shape


def test_lower_is_better_metrics_rank_ascending() -> None:
    X, D = make_distribution(n=80)
    result = selection.select(X, D, "distribution", candidates=["aa-knn", "sa-maxent"], cv=3)
    assert result.metric == "chebyshev"
    means = [e.mean("chebyshev") for e in result.leaderboard]
    assert means == sorted(means) and len(means) >= 2  # the two learners, and their blend if one was built


def test_tune_evaluates_every_grid_point() -> None:
    X, D = make_distribution(n=60)
    result = selection.select(X, D, "distribution", candidates=["aa-knn"], cv=2, tune=True)
    assert sorted(e.params["k"] for e in result.leaderboard if e.method == "aa-knn") == [3, 5, 10, 20]


def test_a_failing_candidate_is_ranked_last_with_its_error() -> None:
    X, Y = make_multilabel(n=30, q=2)
    results = selection.cross_validate(X, Y, "multilabel", [("mlknn", {"k": 25}), ("br", {})], cv=3)
    ranked = selection.rank(results, "average_precision")
    assert ranked[-1].method == "mlknn" and "fold 1" in (ranked[-1].error or "")
    assert ranked[0].method == "br"


def test_cancellation_stops_the_sweep() -> None:
    X, Y = make_multilabel(n=60)
    calls = []

    def cancel(stage: str, fraction: float) -> None:
        calls.append(stage)
        if len(calls) > 3:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        selection.select(X, Y, "multilabel", candidates=["br", "rf"], cv=3, progress=cancel)


def test_selectors_are_scored_downstream() -> None:
    X, Y = make_multilabel(n=90, d=10, q=3)
    entry = selection.cross_validate(X, Y, "multilabel", [("mi-filter", {"estimator": "binned"})], cv=3)[0]
    assert entry.error is None and entry.oof_scores is None
    assert set(entry.curve) == set(selection.FRACTIONS) and all(len(v) == 3 for v in entry.curve.values())
    assert 0 < entry.mean("average_precision") <= 1


def test_repeated_folds_are_fresh_stratified_partitions() -> None:
    X, Y = make_multilabel(n=120, q=3)
    splits = selection.folds(Y, "multilabel", 4, 0, repeats=3)
    assert len(splits) == 12
    repeats = [np.concatenate([te for _, te in splits[r * 4 : (r + 1) * 4]]) for r in range(3)]
    assert all(sorted(held) == list(range(120)) for held in repeats)
    assert not np.array_equal(splits[0][1], splits[4][1])  # each repeat shuffles anew
    _, D = make_distribution(n=30)
    assert len(selection.folds(D, "distribution", 3, 0, repeats=2)) == 6
    with pytest.raises(ValueError, match="repeats"):
        selection.folds(Y, "multilabel", 4, 0, repeats=0)


def test_resampling_is_thorough_on_small_sets_within_the_budget() -> None:
    assert selection.resampling(300, 1.0) == (10, 3)
    assert selection.resampling(300, 6.0) == (10, 2)  # 10 x 3 x 6 s is above a quarter of 600 s
    assert selection.resampling(300, 100.0) == (5, 1)  # the extra folds never cost a candidate
    assert selection.resampling(5000, 0.01) == (5, 1)


def test_select_defaults_to_the_resampling_and_records_it() -> None:
    X, Y = make_multilabel(n=60, d=5, q=3)
    result = selection.select(X, Y, "multilabel", candidates=["br", "rf"])
    assert (result.cv, result.repeats) == (10, 3)
    assert all(len(e.fold_metrics) == 30 for e in result.leaderboard)
    record = result.record()
    assert (record["cv"], record["repeats"]) == (10, 3)
    named = selection.select(X, Y, "multilabel", candidates=["br"], cv=4)
    assert (named.cv, named.repeats) == (4, 1)
