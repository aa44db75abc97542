"""Cross-validated model selection on generated data: folds, candidates, grids, ranking, progress."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation import choice, cross_validation, pool, pricing, racing
from app.methods.base import JobCancelled
from tests.helpers import make_distribution, make_multilabel


def test_folds_are_stratified_partitions() -> None:
    X, Y = make_multilabel(n=120, q=3)
    Y[:6, 2] = 1  # a rarer pattern still spreads over the folds
    splits = cross_validation.folds(Y, "multilabel", 5, 0)
    held_out = np.concatenate([te for _, te in splits])
    assert sorted(held_out) == list(range(120))
    for tr, te in splits:
        assert not set(tr) & set(te)
        share = Y[te].sum(axis=0) / Y.sum(axis=0)
        assert np.all(np.abs(share - 0.2) < 0.06)
    with pytest.raises(ValueError, match="cv"):
        cross_validation.folds(Y, "multilabel", 1, 0)


def test_candidate_pool_follows_kind_and_expense() -> None:
    ml = pool.candidate_pool("multilabel")
    assert {"br", "ecc", "rf", "mlknn", "dmknn"} <= set(ml)
    assert "trans-ovk" not in ml and "mi-filter" not in ml and "elcfs" not in ml
    assert set(pool.candidate_pool("distribution")) == {"aa-knn", "ldlkm", "sa-maxent"}
    assert "mi-filter" in pool.candidate_pool("multilabel", ("multilabel", "selection"))


def test_within_budget_takes_the_cheapest_first_and_never_none() -> None:
    costs = {"br": 5.0, "rf": 500.0, "mlknn": 50.0, "ecc": 90.0}
    assert pricing.within_budget(costs, 150.0) == ["br", "ecc", "mlknn"]
    assert pricing.within_budget(costs, 100.0) == ["br", "mlknn"]  # ecc no longer fits after them
    assert pricing.within_budget({"rf": 90.0, "br": 20.0}, 100.0) == ["br"]  # br never displaced
    assert pricing.within_budget(costs, 0.0) == ["br"]  # the cheapest always runs


def test_a_cost_extrapolates_its_pilot_with_the_growth_exponent() -> None:
    cost = pricing.Cost("br", pilot_rows=100, pilot_seconds=1.0, growth=2.0)
    assert cost.fold_seconds(400) == pytest.approx(16.0)
    assert cost.fold_seconds(50) == pytest.approx(1.0)  # never below the pilot itself
    assert cost.seconds(500, 5) == pytest.approx(5 * 16.0)  # 5 folds of 400 training rows
    assert cost.seconds(500, 5, repeats=2) == pytest.approx(10 * 16.0)
    stopped = pricing.Cost("rf", pilot_rows=100, pilot_seconds=1.0, growth=1.0, fraction=0.25)
    assert stopped.fold_seconds(100) == pytest.approx(4.0)  # a quarter of the pilot took 1 s


def test_pilot_split_takes_a_share_of_a_fold_in_the_folds_proportion() -> None:
    tr, te = pricing.pilot_split(10_000, 5, 0)
    assert (tr.size, te.size) == (1600, 400) and not set(tr) & set(te)
    tr, te = pricing.pilot_split(300, 5, 0)  # small: the pilot is a whole fold
    assert (tr.size, te.size) == (240, 60)


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_plan_leaves_out_what_its_pilot_prices_over_the_budget() -> None:
    X, Y = make_multilabel(n=300, d=8, q=3)
    # a forest of 300 trees costs about 40 times the logistic regressions (its pilot about 2 s)
    entries = [("br", {}), ("rf", {"random_state": 0, "n_estimators": 300})]
    chosen = pricing.plan(X, Y, entries, named=False, cv=5, budget=0.5)
    assert [m for m, _ in chosen.entries] == ["br"]  # the cheaper pilot; the cheapest always runs
    assert set(chosen.left_out) == {"rf"} and chosen.left_out["rf"] > 0.5
    assert chosen.costs["rf"].fraction < 1.0  # stopped once past the budget, not fitted to the end
    named = pricing.plan(X, Y, entries, named=True, cv=5, budget=0.5)
    assert [m for m, _ in named.entries] == ["br", "rf"] and not named.left_out
    assert named.costs["rf"].fraction == 1.0 and named.costs["rf"].pilot_rows == 240


def test_dmknn_is_evaluated_once_as_its_ranking_twin_for_a_ranking_metric() -> None:
    X, Y = make_multilabel(n=120, d=6, q=4)
    both = cross_validation.cross_validate(X, Y, "multilabel", [("mlknn", {}), ("dmknn", {})], cv=3)
    for metric in pool.RANKING_METRICS:  # the twins' rankings are the same, so are these
        assert both[0].mean(metric) == both[1].mean(metric)
    assert pool.ranking_twin(("dmknn", {}), [("mlknn", {})]) == ("mlknn", {})
    assert pool.ranking_twin(("dmknn", {"k": 5}), [("mlknn", {})]) is None
    assert pool.ranking_twin(("dmknn", {"ranking": "predicted_first"}), [("mlknn", {})]) is None
    for rule in ("paper", "auto", "posterior"):  # the label-set rule never changes the ranking
        assert pool.ranking_twin(("dmknn", {"label_sets": rule}), [("mlknn", {})]) == ("mlknn", {})
    result = choice.select(X, Y, "multilabel", candidates=["mlknn", "dmknn"], cv=3)
    rows = {row["method"]: row for row in result.record()["leaderboard"]}
    assert rows["dmknn"]["same_ranking_as"] == "mlknn" and rows["dmknn"]["measured_seconds"] is None
    assert rows["dmknn"]["mean"] == rows["mlknn"]["mean"] == both[0].mean("average_precision")
    by_labels = choice.select(X, Y, "multilabel", candidates=["mlknn", "dmknn"], metric="micro_f1", cv=3)
    assert all(e.same_ranking_as is None and e.fold_seconds for e in by_labels.leaderboard if e.method != "blend")


def test_the_record_has_predicted_and_measured_seconds_and_what_was_left_out() -> None:
    X, Y = make_multilabel(n=150, d=6, q=3)
    record = choice.select(X, Y, "multilabel", cv=3, budget=1e-6).record()
    rows = [row for row in record["leaderboard"] if "same_ranking_as" not in row]  # mlknn may bring dmknn
    assert len(rows) == 1 and rows[0]["predicted_seconds"] > 0 and rows[0]["measured_seconds"] > 0
    assert record["left_out"] and all(row["predicted_seconds"] > 0 for row in record["left_out"])
    assert {row["method"] for row in record["left_out"]} | {rows[0]["method"]} >= {"br", "rf", "ecc", "mlknn"}
    assert record["pilot_seconds"] > 0


def test_grid_is_the_product_of_the_documented_axes() -> None:
    assert pool.grid("rf") == [
        {"max_features": "sqrt", "min_samples_leaf": 1},
        {"max_features": "sqrt", "min_samples_leaf": 3},
        {"max_features": 0.3, "min_samples_leaf": 1},
        {"max_features": 0.3, "min_samples_leaf": 3},
    ]
    assert pool.grid("unknown") == [{}]


def test_select_ranks_by_the_metric_and_reports_progress() -> None:
    X, Y = make_multilabel(n=90, d=6, q=3)
    X = np.hstack([X, np.random.default_rng(1).random((90, 20))])  # noise features
    seen: list[tuple[str, float]] = []
    result = choice.select(
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
    result = choice.select(X, D, "distribution", candidates=["aa-knn", "sa-maxent"], cv=3)
    assert result.metric == "chebyshev"
    means = [e.mean("chebyshev") for e in result.leaderboard]
    assert means == sorted(means) and len(means) >= 2  # the two learners, and their blend if one was built


def test_tune_evaluates_every_grid_point() -> None:
    X, D = make_distribution(n=60)
    result = choice.select(X, D, "distribution", candidates=["aa-knn"], cv=2, tune=True)
    assert sorted(e.params["k"] for e in result.leaderboard if e.method == "aa-knn") == [3, 5, 10, 20]


def test_a_failing_candidate_is_ranked_last_with_its_error() -> None:
    X, Y = make_multilabel(n=30, q=2)
    results = cross_validation.cross_validate(X, Y, "multilabel", [("mlknn", {"k": 25}), ("br", {})], cv=3)
    ranked = cross_validation.rank(results, "average_precision")
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
        choice.select(X, Y, "multilabel", candidates=["br", "rf"], cv=3, progress=cancel)


def test_selectors_are_scored_downstream() -> None:
    X, Y = make_multilabel(n=90, d=10, q=3)
    entry = cross_validation.cross_validate(X, Y, "multilabel", [("mi-filter", {"estimator": "binned"})], cv=3)[0]
    assert entry.error is None and entry.oof_scores is None
    assert set(entry.curve) == set(cross_validation.FRACTIONS) and all(len(v) == 3 for v in entry.curve.values())
    assert 0 < entry.mean("average_precision") <= 1


def test_repeated_folds_are_fresh_stratified_partitions() -> None:
    X, Y = make_multilabel(n=120, q=3)
    splits = cross_validation.folds(Y, "multilabel", 4, 0, repeats=3)
    assert len(splits) == 12
    repeats = [np.concatenate([te for _, te in splits[r * 4 : (r + 1) * 4]]) for r in range(3)]
    assert all(sorted(held) == list(range(120)) for held in repeats)
    assert not np.array_equal(splits[0][1], splits[4][1])  # each repeat shuffles anew
    _, D = make_distribution(n=30)
    assert len(cross_validation.folds(D, "distribution", 3, 0, repeats=2)) == 6
    with pytest.raises(ValueError, match="repeats"):
        cross_validation.folds(Y, "multilabel", 4, 0, repeats=0)


def test_resampling_is_thorough_on_small_sets_within_the_budget() -> None:
    assert pricing.resampling(300, 1.0) == (10, 3)
    assert pricing.resampling(300, 6.0) == (10, 2)  # 10 x 3 x 6 s is above a quarter of 600 s
    assert pricing.resampling(300, 100.0) == (5, 1)  # the extra folds never cost a candidate
    assert pricing.resampling(5000, 0.01) == (5, 1)


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_select_defaults_to_the_resampling_and_records_it() -> None:
    X, Y = make_multilabel(n=60, d=5, q=3)
    result = choice.select(X, Y, "multilabel", candidates=["br", "rf"], race=False)
    assert (result.cv, result.repeats) == (10, 3)
    assert all(len(e.fold_metrics) == 30 for e in result.leaderboard)
    record = result.record()
    assert (record["cv"], record["repeats"], record["planned_repeats"]) == (10, 3, 3)
    raced = choice.select(X, Y, "multilabel", candidates=["br", "rf"]).record()  # the race may stop repeats
    assert (raced["cv"], raced["planned_repeats"]) == (10, 3) and 1 <= raced["repeats"] <= 3
    named = choice.select(X, Y, "multilabel", candidates=["br"], cv=4)
    assert (named.cv, named.repeats) == (4, 1)


def test_a_default_grid_that_does_not_fit_keeps_its_default_entry(monkeypatch) -> None:
    """sa-maxent's alpha grid is searched without tune (DEFAULT_GRIDS), its defaults first; when
    the grid does not fit the budget the defaults alone are cross-validated, if they fit."""
    from tests.helpers import make_distribution

    X, D = make_distribution(n=60)
    entries = pool.default_entries("sa-maxent")
    assert entries[0] == {} and len(entries) == len(pool.DEFAULT_GRIDS["sa-maxent"]["alpha"])
    assert all(e.get("alpha") != 1e-3 for e in entries[1:])  # the default once
    priced = pricing.Cost("sa-maxent", 40, 1.0, 1.0)
    cheap = pricing.Cost("aa-knn", 40, 0.01, 1.0)  # the cheapest candidate always runs: not this one
    monkeypatch.setattr(pricing, "pilot_costs", lambda *a, **k: {"sa-maxent": priced, "aa-knn": cheap})
    monkeypatch.setattr(pricing.time, "perf_counter", lambda: 0.0)  # no pilot seconds
    candidates = [("aa-knn", {})] + [("sa-maxent", e) for e in entries]
    plan = pricing.plan(X, D, candidates, named=False, cv=5, budget=10.0)
    one = priced.seconds(60, 5) + priced.fold_seconds(60)
    assert one <= 10.0 - cheap.seconds(60, 5) - cheap.fold_seconds(60)
    assert 10.0 < len(entries) * priced.seconds(60, 5) + priced.fold_seconds(60)
    assert plan.entries == [("aa-knn", {}), ("sa-maxent", {})] and plan.left_out == {}


def _entry(method: str, values: list[float], metric: str = "average_precision") -> cross_validation.Entry:
    entry = cross_validation.Entry(method=method, params={})
    entry.fold_metrics = [{metric: v} for v in values]
    return entry


def test_a_blend_within_the_folds_noise_gives_way_to_its_best_single_method() -> None:
    # gains +0.01, -0.01, +0.002, 0.0: mean 0.0005, standard error 0.0043
    blend, br = _entry("blend", [0.81, 0.79, 0.802, 0.80]), _entry("br", [0.80, 0.80, 0.80, 0.80])
    ranked, margin = choice.simplest_within_noise(
        cross_validation.rank([br, blend], "average_precision"), "average_precision"
    )
    assert [e.method for e in ranked] == ["br", "blend"]
    assert margin is not None and margin["single"] == "br" and not margin["blend_kept"]
    assert margin["gain"] == pytest.approx(0.0005)


def test_a_blend_ahead_on_every_fold_stays_first() -> None:
    blend, rf, br = (
        _entry("blend", [0.82, 0.81, 0.83]),
        _entry("rf", [0.80, 0.80, 0.81]),
        _entry("br", [0.70, 0.70, 0.70]),
    )
    ranked, margin = choice.simplest_within_noise(
        cross_validation.rank([br, rf, blend], "average_precision"), "average_precision"
    )
    assert [e.method for e in ranked] == ["blend", "rf", "br"]
    assert margin is not None and margin["blend_kept"] and margin["single"] == "rf"


def test_lower_is_better_metrics_count_the_gain_the_other_way() -> None:
    blend, aa = _entry("blend-ldl", [0.10, 0.11, 0.09], "chebyshev"), _entry("aa-knn", [0.12, 0.13, 0.11], "chebyshev")
    ranked, margin = choice.simplest_within_noise(cross_validation.rank([aa, blend], "chebyshev"), "chebyshev")
    assert ranked[0].method == "blend-ldl" and margin is not None and margin["gain"] == pytest.approx(0.02)
    tied = _entry("blend-ldl", [0.119, 0.131, 0.109], "chebyshev")
    ranked, margin = choice.simplest_within_noise(cross_validation.rank([aa, tied], "chebyshev"), "chebyshev")
    assert ranked[0].method == "aa-knn" and margin is not None and not margin["blend_kept"]


def test_no_blend_in_the_lead_changes_nothing() -> None:
    ranked = cross_validation.rank([_entry("br", [0.8, 0.8]), _entry("blend", [0.7, 0.7])], "average_precision")
    assert choice.simplest_within_noise(ranked, "average_precision") == (ranked, None)


def _one_clear_leader(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Labels linear in 3 of 40 features: br reads them, ML-kNN's neighbours drown in the noise."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 40))
    W = np.zeros((40, 4))
    W[:3] = 3 * rng.normal(size=(3, 4))
    return X, (X @ W + rng.normal(size=(n, 4)) > 0.5).astype(int)


def test_a_clearly_worse_candidate_is_stopped_early_and_recorded() -> None:
    X, Y = _one_clear_leader()
    result = choice.select(X, Y, "multilabel", candidates=["br", "mlknn"], random_state=0)
    br, knn = (next(e for e in result.leaderboard if e.method == m) for m in ("br", "mlknn"))
    assert result.cv == 10 and br.stopped is None and len(br.fold_metrics) == 10 * result.repeats
    assert knn.stopped is not None and knn.stopped["behind"] == "br"
    assert knn.stopped["after_folds"] == len(knn.fold_metrics) == 5  # half of the first repeat
    assert knn.stopped["gap"] > max(racing.STOP_SE * knn.stopped["standard_error"], racing.MIN_GAP)
    assert not any(e.method == "blend" for e in result.leaderboard)  # a stopped candidate is no member
    row = next(r for r in result.record()["leaderboard"] if r["method"] == "mlknn")
    assert row["stopped"] == knn.stopped and row["measured_seconds"] is not None
    # the leader's lead is beyond the partition noise: no more repeats than the first
    assert (result.repeats, result.planned_repeats) == (1, 3)
    assert result.best.method == "br"


def test_racing_rungs_and_paired_gaps() -> None:
    assert racing.rungs(10, 3) == [5, 10, 20, 30]
    assert racing.rungs(5, 1) == [3, 5]
    assert racing.rungs(3, 1) == [2, 3]
    assert racing.rungs(2, 2) == [2, 4]
    lead, behind = cross_validation.Entry("a", {}), cross_validation.Entry("b", {})
    lead.fold_metrics = [{"average_precision": v} for v in (0.9, 0.8, 0.85)]
    behind.fold_metrics = [{"average_precision": v} for v in (0.7, 0.7)]
    gap, se = racing.paired_gap(behind, lead, "average_precision")  # on the two folds both ran
    assert gap == pytest.approx(0.15) and se == pytest.approx(0.05)  # sd 0.0707 over 2 folds
    gap, _ = racing.paired_gap(lead, behind, "average_precision")
    assert gap == pytest.approx(-0.15)


def test_a_repeat_runs_only_while_it_could_move_the_choice() -> None:
    Y = np.zeros((20, 2))

    def entry(method: str, values: list[float]) -> cross_validation.Entry:
        return cross_validation.Entry(method, {}, fold_metrics=[{"average_precision": v} for v in values])

    noisy = [0.80, 0.70, 0.82, 0.71, 0.79, 0.72, 0.81, 0.70, 0.80, 0.69]
    close = [v + d for v, d in zip(noisy, [-0.05, 0.06, -0.04, 0.05, -0.05, 0.05, -0.06, 0.04, -0.05, 0.04])]
    a, b = entry("br", noisy), entry("rf", close)  # a leads b by 0.001, well within the noise
    run = [(np.arange(20), np.arange(20))] * 10
    assert racing.worth_repeating([a, b], Y, "multilabel", "average_precision", run, 10)  # first repeat: unsettled
    a2 = entry("br", noisy + [v + 0.01 for v in noisy])  # the second repeat picks br again
    b2 = entry("rf", close + close)
    assert not racing.worth_repeating([a2, b2], Y, "multilabel", "average_precision", run * 2, 10)
    b3 = entry("rf", close + [v + 0.0105 for v in noisy])  # the second repeat alone picks rf: repeat
    assert a2.mean("average_precision") > b3.mean("average_precision")
    assert racing.worth_repeating([a2, b3], Y, "multilabel", "average_precision", run * 2, 10)
    far = entry("rf", [v - 0.05 for v in noisy])  # a lead beyond the folds' noise stands at once
    assert not racing.worth_repeating([a, far], Y, "multilabel", "average_precision", run, 10)
