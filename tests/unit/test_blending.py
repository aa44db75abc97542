"""Ensemble selection (app.evaluation.blending), the blend estimators (app.methods.blend) and ``auto`` with a
blend (app.evaluation.choice), on generated data."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from pydantic import ValidationError

from app import scoring
from app.evaluation import auto_request, blending, choice, cross_validation, pool
from app.methods.base import JobCancelled
from app.methods.blend import Blend, BlendLDL
from app.methods.catalog import get_method
from app.methods.thresholds import THRESHOLDS, label_sets, micro_f1_threshold
from tests.helpers import make_distribution, make_mixed_multilabel

mixed = make_mixed_multilabel


# --------------------------------------------------------------------------- ensemble selection
def test_greedy_weights_keep_a_good_candidate_alone_and_mix_complementary_ones() -> None:
    rng = np.random.default_rng(0)
    Y = (rng.random((200, 4)) > 0.5).astype(float)
    good = np.clip(Y * 0.6 + 0.2 + 0.1 * rng.standard_normal(Y.shape), 0, 1)
    noise = rng.random(Y.shape)
    counts = blending.greedy_weights([noise, good], Y, "average_precision")
    assert counts[0] == 0 and counts[1] >= 1  # the best prefix is the good candidate alone
    # each candidate knows half the labels; the other half is noise
    left, right = good.copy(), good.copy()
    left[:, 2:], right[:, :2] = noise[:, 2:], noise[:, :2]
    counts = blending.greedy_weights([left, right], Y, "average_precision")
    assert counts.min() >= 1
    mixed_ap = scoring.average_precision(Y, blending.blend([left, right], counts))
    assert mixed_ap > max(scoring.average_precision(Y, left), scoring.average_precision(Y, right))


def test_lower_is_better_metrics_are_minimised() -> None:
    rng = np.random.default_rng(1)
    D = rng.dirichlet(np.ones(4), size=100)
    counts = blending.greedy_weights([rng.dirichlet(np.ones(4), size=100), 0.9 * D + 0.025], D, "chebyshev")
    assert counts[0] == 0 and counts[1] > 0


def test_threshold_maximises_micro_f1_on_the_grid() -> None:
    Y = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=float)
    S = np.array([[0.32, 0.1], [0.31, 0.2], [0.2, 0.33], [0.1, 0.15]])
    assert micro_f1_threshold(Y, S) == pytest.approx(0.3)  # every relevant label and nothing else
    assert micro_f1_threshold(Y, np.full((4, 2), 0.5)) == 0.45  # ties: nearest 0.5


def test_fold_scores_never_see_the_fold() -> None:
    """Candidate A is perfect on the first half and wrong on the second, B the reverse; the folds are
    the halves. Chosen on each fold itself, the blend would be perfect; cross-fitted, every fold gets
    the candidate that was right on the other half, and is scored badly."""
    n, q = 40, 3
    rng = np.random.default_rng(2)
    Y = np.zeros((n, q))
    Y[np.arange(n), rng.integers(0, q, n)] = 1
    wrong = np.roll(Y, 1, axis=1)
    A = np.vstack([Y[:20], wrong[20:]])[None]
    B = np.vstack([wrong[:20], Y[20:]])[None]
    halves = [(np.arange(20, 40), np.arange(20)), (np.arange(20), np.arange(20, 40))]
    scores = blending.fold_scores([A, B], Y, halves, 2, "average_precision", "multilabel", bags=0)
    assert [s["average_precision"] for s in scores] == pytest.approx([1 / 3, 1 / 3])  # the relevant label tied last
    in_sample = blending.choose([A, B], Y, "average_precision", "multilabel", rows=np.arange(20), bags=0)
    assert in_sample.counts[0] > 0 and in_sample.counts[1] == 0  # on the first half itself: A


def test_bagged_choice_is_deterministic_and_drops_small_shares() -> None:
    X, Y = mixed(n=60)
    rng = np.random.default_rng(3)
    oof = [np.clip(Y + 0.4 * rng.standard_normal(Y.shape), 0, 1)[None] for _ in range(3)]
    one = blending.choose(oof, Y, "average_precision", "multilabel")
    two = blending.choose(oof, Y, "average_precision", "multilabel")
    np.testing.assert_array_equal(one.counts, two.counts)
    kept = one.counts[one.counts > 0]
    assert kept.min() >= blending.MIN_SHARE * one.counts.sum()
    assert one.threshold in THRESHOLDS


def test_the_blend_fills_empty_sets_only_where_that_raised_micro_f1() -> None:
    """Every row carries one label and the scores are low (a mean of probabilities rarely clears
    0.5): giving an empty row its top label raises micro-F1, so the rule is learned on; where half
    the rows are truly empty, filling them adds false positives and it stays off."""
    rng = np.random.default_rng(4)
    n, q = 300, 5
    Y = np.zeros((n, q))
    Y[np.arange(n), rng.integers(0, q, n)] = 1
    S = np.clip(0.1 + 0.25 * Y + 0.08 * rng.standard_normal(Y.shape), 0, 1)
    choice = blending.choose([S[None], S[None] * 0.9], Y, "average_precision", "multilabel", bags=0)
    assert choice.fill_empty
    Yhat = label_sets(blending.blend([S, 0.9 * S], choice.counts), choice.threshold, True)
    assert Yhat.any(axis=1).all()
    half = Y.copy()
    half[: n // 2] = 0
    S_half = np.clip(0.1 + 0.25 * half + 0.08 * rng.standard_normal(Y.shape), 0, 1)
    assert not blending.choose([S_half[None], S_half[None]], half, "average_precision", "multilabel").fill_empty


# ------------------------------------------------------------------------------- the estimators
def test_blend_is_the_weighted_mean_of_its_members() -> None:
    X, Y = mixed()
    members = [
        {"method": "br", "params": {"C": 2.0}, "weight": 1.0},
        {"method": "rf", "params": {"n_estimators": 20}, "weight": 3.0},
    ]
    model = Blend(members, threshold=0.4).fit(X, Y)
    br = get_method("br").build({"C": 2.0}).fit(X, Y)  # type: ignore[union-attr]
    rf = get_method("rf").build({"n_estimators": 20}).fit(X, Y)  # type: ignore[union-attr]
    expected = 0.25 * br.decision_function(X) + 0.75 * rf.decision_function(X)
    np.testing.assert_allclose(model.decision_function(X), expected)
    np.testing.assert_array_equal(model.predict(X), (expected > 0.4).astype(int))
    np.testing.assert_array_equal(model.predict(X, threshold=0.7), (expected > 0.7).astype(int))
    np.testing.assert_allclose(model.weights_, [0.25, 0.75])
    assert model.methods_ == ["br", "rf"] and model.members == members  # parameters stored unchanged
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.decision_function(X[:3]), model.decision_function(X[:3]))


def test_a_filling_blend_never_predicts_an_empty_set_unless_the_caller_names_a_threshold() -> None:
    X, Y = mixed()
    model = Blend(threshold=0.95, fill_empty=True).fit(X, Y)
    S = model.decision_function(X)
    P = model.predict(X)
    assert P.any(axis=1).all()
    np.testing.assert_array_equal(P, label_sets(S, 0.95, True))
    np.testing.assert_array_equal(model.predict(X, threshold=0.95), (S > 0.95).astype(int))  # the plain rule


def test_blends_pickled_before_fill_empty_keep_the_plain_rule() -> None:
    X, Y = mixed()
    model = Blend(threshold=0.95).fit(X, Y)
    state = model.__getstate__()
    del state["fill_empty"]
    old = Blend.__new__(Blend)
    old.__setstate__(state)
    assert old.fill_empty is False
    np.testing.assert_array_equal(old.predict(X), (model.decision_function(X) > 0.95).astype(int))


def test_ldl_blend_predicts_distributions() -> None:
    X, D = make_distribution(n=60)
    model = BlendLDL([{"method": "aa-knn", "params": {"k": 3}, "weight": 2}, {"method": "sa-maxent"}]).fit(X, D)
    aa = get_method("aa-knn").build({"k": 3}).fit(X, D)  # type: ignore[union-attr]
    sa = get_method("sa-maxent").build({}).fit(X, D)  # type: ignore[union-attr]
    P = model.predict(X)
    np.testing.assert_allclose(P, (2 * aa.predict(X) + sa.predict(X)) / 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("method", "members", "message"),
    [
        ("blend", [{"method": "trans-ovk"}], "probability scores"),
        ("blend", [{"method": "dmknn", "params": {"ranking": "predicted_first"}}], "probability scores"),
        ("blend", [{"method": "blend"}], "probability scores"),
        ("blend", [{"method": "sa-maxent"}], "probability scores"),
        ("blend", [{"method": "rf", "params": {"n_estimators": 0}}], "n_estimators"),
        ("blend", [{"method": "br", "weight": 0}], "greater than 0"),
        ("blend", [], "at least 1"),
        ("blend-ldl", [{"method": "br"}], "label distribution learner"),
        ("blend-ldl", [{"method": "nope"}], "label distribution learner"),
    ],
)
def test_members_are_checked_by_the_declaration_and_in_fit(method: str, members: list, message: str) -> None:
    spec = get_method(method)
    assert spec is not None
    with pytest.raises(ValidationError, match=message):
        spec.params.model_validate({"members": members})
    X, Y = mixed(n=20) if method == "blend" else make_distribution(n=20)
    with pytest.raises(ValueError, match=message):
        spec.estimator(members).fit(X, Y)


def test_fit_reports_members_and_can_be_cancelled() -> None:
    X, Y = mixed(n=40)
    seen: list[str] = []
    Blend().fit(X, Y, progress=lambda stage, fraction: seen.append(stage))
    assert any(s.startswith("member 1/2 br") for s in seen) and any(s.startswith("member 2/2 rf: trees") for s in seen)

    def cancel(stage: str, fraction: float) -> None:
        if stage.startswith("member 2/2"):
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        Blend().fit(X, Y, progress=cancel)


# ---------------------------------------------------------------------------- auto with a blend
@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_auto_blends_complementary_candidates() -> None:
    X, Y = mixed()
    result = choice.select(X, Y, "multilabel", candidates=["br", "rf"], cv=5, random_state=0)
    board = {e.method: e for e in result.leaderboard}
    assert set(board) == {"br", "rf", "blend"}
    best = result.best
    assert best.method == "blend", [(e.method, e.mean("average_precision")) for e in result.leaderboard]
    assert best.mean("average_precision") > max(
        board["br"].mean("average_precision"), board["rf"].mean("average_precision")
    )
    assert len(best.fold_metrics) == 5 and len(best.fit_seconds) == 5
    assert {m["method"] for m in best.params["members"]} == {"br", "rf"}
    rf = next(m for m in best.params["members"] if m["method"] == "rf")
    assert rf["params"] == {"random_state": 0, "threshold": 0.5}  # seeds recorded; scores only: no inner threshold
    row = result.record()["leaderboard"][0]
    assert row["method"] == "blend" and row["params"] == best.params and row["mean"] is not None
    model = get_method("blend").build(best.params).fit(X, Y)  # type: ignore[union-attr]
    labels = model.predict(X)
    assert labels.any(axis=1).mean() > 0.9 and scoring.macro_f1(Y, labels) > 0.6


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_auto_keeps_a_single_method_when_no_blend_is_better_or_possible() -> None:
    X, Y = mixed(n=90)
    by_labels = choice.select(X, Y, "multilabel", candidates=["br", "rf"], metric="hamming_loss", cv=3)
    assert {e.method for e in by_labels.leaderboard} == {"br", "rf"}  # a label-set metric is not blended
    alone = choice.select(X, Y, "multilabel", candidates=["rf"], cv=3)
    assert [e.method for e in alone.leaderboard] == ["rf"]
    not_blendable = choice.select(X, Y, "multilabel", candidates=["rf", "trans-ovk"], cv=3)
    assert "blend" not in {e.method for e in not_blendable.leaderboard}


def test_auto_on_distributions_may_blend() -> None:
    rng = np.random.default_rng(1)  # smooth and bumpy parts: neither learner fits both
    X = rng.random((90, 4))
    logits = 2 * X @ rng.standard_normal((4, 3)) + 2.5 * np.sin(7 * X[:, :3])
    D = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    result = choice.select(X, D, "distribution", candidates=["aa-knn", "sa-maxent"], cv=3, random_state=0)
    methods = [e.method for e in result.leaderboard]
    assert "blend-ldl" in methods and methods.count("aa-knn") == 1
    assert methods.count("sa-maxent") == len(pool.DEFAULT_GRIDS["sa-maxent"]["alpha"])  # its penalty grid
    entry = next(e for e in result.leaderboard if e.method == "blend-ldl")
    assert "threshold" not in entry.params and entry.oof_scores is not None
    np.testing.assert_allclose(entry.oof_scores.sum(axis=1), 1.0)


def test_blends_are_neither_default_nor_named_candidates() -> None:
    assert not {"blend", "blend-ldl"} & set(pool.candidate_pool("multilabel"))
    assert not {"blend", "blend-ldl"} & set(pool.candidate_pool("distribution"))
    problems = auto_request.check_auto(auto_request.AutoParams(candidates=["blend", "br"]), "multilabel")
    assert problems and "built by auto" in problems[0]


def test_ldl_learners_never_better_than_the_training_mean_are_not_blend_members() -> None:
    X, D = make_distribution(n=60)
    splits = cross_validation.folds(D, "distribution", 3, 0)
    mean_cheb = [
        scoring.ldl_metrics(D[te], np.tile(D[tr].mean(axis=0), (len(te), 1)))["chebyshev"] for tr, te in splits
    ]
    worse = cross_validation.Entry("ldlkm", {}, fold_metrics=[{"chebyshev": c + 0.01} for c in mean_cheb])
    once = cross_validation.Entry(
        "aa-knn", {}, fold_metrics=[{"chebyshev": c + (-0.01 if i == 1 else 0.01)} for i, c in enumerate(mean_cheb)]
    )
    assert not blending.beats_the_mean(worse, D, splits, "chebyshev")
    assert blending.beats_the_mean(once, D, splits, "chebyshev")
    higher = cross_validation.Entry("sa-maxent", {}, fold_metrics=[{"cosine": 1.0}] * 3)  # a higher-is-better metric
    assert blending.beats_the_mean(higher, D, splits, "cosine")
