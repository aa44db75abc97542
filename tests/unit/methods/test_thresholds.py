"""The learned label-set rule of br, ecc, rf and gbm (``threshold="cv"``, app.methods.thresholds)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.model_selection import KFold

from app.methods.catalog import get_method
from app.methods.thresholds import INNER_FOLDS, choose_rule, label_sets, micro_f1, micro_f1_threshold

THRESHOLDED = ["br", "ecc", "rf", "gbm"]
SMALL = {"br": {}, "ecc": {"n_chains": 2}, "rf": {"n_estimators": 25}, "gbm": {"n_estimators": 20, "threshold": "cv"}}


def rare_labels(n: int = 300, d: int = 10, q: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rare, noisy labels (5-15% positive) that every row has at least one of: at 0.5 most rows
    would get an empty set."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Z = X @ rng.normal(size=(d, q)) + rng.normal(scale=2.0, size=(n, q))
    Y = (Z > np.quantile(Z, 0.9, axis=0)).astype(int)
    Y[np.arange(n), np.argmax(Z, axis=1)] = 1  # never empty
    return X, Y


def test_rule_is_the_blends_and_fills_only_where_it_helps() -> None:
    Y = np.array([[1, 0], [0, 1], [1, 0], [0, 1]])
    S = np.array([[0.3, 0.1], [0.1, 0.2], [0.6, 0.1], [0.2, 0.4]])
    t = micro_f1_threshold(Y, S)
    assert choose_rule(Y, S) == (t, micro_f1(Y, label_sets(S, t, True)) > micro_f1(Y, label_sets(S, t, False)))
    np.testing.assert_array_equal(label_sets(S, 0.5, True), [[1, 0], [0, 1], [1, 0], [0, 1]])
    assert choose_rule(np.zeros((4, 2)), S)[1] is False  # empty truth: filling only adds false positives


@pytest.mark.parametrize("method", THRESHOLDED)
def test_cv_threshold_is_chosen_on_inner_out_of_fold_scores(method: str) -> None:
    X, Y = rare_labels()
    spec = get_method(method)
    model = spec.build({**SMALL[method]}).fit(X, Y)
    # the same rule on the same inner folds, recomputed here from copies at 0.5
    S = np.zeros(Y.shape)
    for tr, te in KFold(INNER_FOLDS, shuffle=True, random_state=0).split(X):  # seed: random_state (br: 0)
        S[te] = spec.build({**SMALL[method], "threshold": 0.5}).fit(X[tr], Y[tr]).decision_function(X[te])
    assert (model.threshold_, model.fill_empty_) == choose_rule(Y, S)
    assert model.threshold_ < 0.5  # rare labels
    P = model.predict(X)
    if model.fill_empty_:
        assert P.any(axis=1).all()  # never empty
    np.testing.assert_array_equal(P, label_sets(model.decision_function(X), model.threshold_, model.fill_empty_))
    plain = spec.build({**SMALL[method], "threshold": 0.5}).fit(X, Y)
    assert (plain.threshold_, plain.fill_empty_) == (0.5, False)
    np.testing.assert_array_equal(plain.predict(X), plain.decision_function(X) > 0.5)
    np.testing.assert_array_equal(model.predict(X, threshold=0.5), model.decision_function(X) > 0.5)  # named: plain


def _counting_trains(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch ``lightgbm.train`` to record the rounds of every booster fitted."""
    import lightgbm

    rounds: list[int] = []
    train = lightgbm.train

    def counted(params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        rounds.append(int(params["num_iterations"]))
        return train(params, *args, **kwargs)

    monkeypatch.setattr(lightgbm, "train", counted)
    return rounds


def test_gbm_oof_threshold_fits_one_whole_model_per_label(monkeypatch: pytest.MonkeyPatch) -> None:
    """gbm's default rule: one booster of all the rounds per label and three short inner ones, and
    the threshold chosen on those short boosters' out-of-fold scores."""
    import lightgbm

    from app.methods.gbm import GradientBoosting, short_params

    X, Y = rare_labels()
    rounds = _counting_trains(monkeypatch)
    model = GradientBoosting(n_estimators=40, random_state=3).fit(X, Y)
    q = Y.shape[1]
    assert sorted(rounds) == [5] * (INNER_FOLDS * q) + [40] * q  # an eighth of the rounds inside
    inner = short_params(model.library_params(3))
    assert (inner["num_iterations"], inner["learning_rate"]) == (5, 0.4)
    # out-of-fold scores of short boosters, as LGBMClassifier fits them on each inner fold's rows
    S = np.zeros(Y.shape)
    short = {"n_estimators": 5, "learning_rate": 0.4, "num_leaves": 7, "min_child_samples": 5}
    for tr, te in KFold(INNER_FOLDS, shuffle=True, random_state=3).split(X):
        for j in range(q):
            ref = lightgbm.LGBMClassifier(**short, colsample_bytree=0.5, random_state=3, n_jobs=1, verbose=-1)
            S[te, j] = ref.fit(X[tr], Y[tr, j]).predict_proba(X[te])[:, 1]
    assert (model.threshold_, model.fill_empty_) == choose_rule(Y, S)
    assert model.threshold_ < 0.5  # rare labels
    rounds.clear()
    GradientBoosting(n_estimators=40, random_state=3, threshold="cv").fit(X, Y)
    assert sorted(rounds) == [40] * ((1 + INNER_FOLDS) * q)  # the former rule: three whole inner models
    rounds.clear()
    GradientBoosting(n_estimators=40, random_state=3, threshold=0.5).fit(X, Y)
    assert rounds == [40] * q


def test_often_empty_truth_keeps_empty_sets() -> None:
    X, Y = rare_labels(seed=3)
    Y[X[:, 0] < 0.5] = 0  # about 70% of the rows have no label, which the features tell
    model = get_method("br").build({}).fit(X, Y)
    assert not model.fill_empty_


def test_too_few_rows_keep_one_half() -> None:
    X, Y = rare_labels(n=5)
    model = get_method("br").build({}).fit(X, Y)
    assert (model.threshold_, model.fill_empty_) == (0.5, False)
