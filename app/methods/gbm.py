"""GBM: one-vs-rest gradient boosting with LightGBM (a catalog baseline).

Label j is predicted by a LightGBM booster (binary log loss, histogram trees grown leaf-wise)
fitted on (X, Y[:, j]) alone, the booster ``OneVsRestClassifier(LGBMClassifier())`` would fit
with the same arguments; a label's score is its booster's probability, a label constant in the
training data is predicted with that constant. The label set is every label above one threshold
learned on out-of-fold scores: by default (``threshold="oof"``) those of short inner boosters
(``SHORT_SHARE`` of the rounds at a learning rate as much larger, ``short_params``) fitted on 3
inner folds beside each label's booster; ``threshold="cv"`` keeps the former rule, three inner
copies of the whole model (``app.methods.thresholds``). Each thread bins the features once
(a LightGBM ``Dataset``, and its subsets for the inner folds) and relabels it for each label.
LightGBM rather than scikit-learn's ``HistGradientBoostingClassifier``: the same accuracy, much
cheaper on sparse features; the defaults were chosen on training parts only
(``LIBRARY_DEFAULTS`` are LightGBM's own). Both comparisons, with ``benchmarks/gbm_choice.py``,
are in docs/methods/gbm.md.

``n_jobs`` threads fit the labels side by side, each booster with one thread (LightGBM releases
the GIL), so results do not depend on ``n_jobs``; progress is reported, and a cancellation stops
the fit, after each finished label. Every booster is seeded with ``random_state``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from joblib import Parallel, delayed
from pydantic import Field
from sklearn.model_selection import KFold

from app.methods.base import (
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    draw_seed,
)
from app.methods.baseline_support import ProbabilityClassifierMixin
from app.methods.numerics import effective_jobs
from app.methods.thresholds import INNER_FOLDS, MIN_ROWS, LearnedThresholdMixin, choose_rule

#: LightGBM's own defaults of the parameters ``gbm`` declares (docs/methods/gbm.md sets them beside ours)
LIBRARY_DEFAULTS: dict[str, Any] = {
    "n_estimators": 100,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "min_child_samples": 20,
    "colsample_bytree": 1.0,
}
#: the inner boosters of ``threshold="oof"`` have this share of the rounds (``short_params``):
#: their threshold is within 0.002 micro-F1 of full inner models' on the Yahoo sets and medical, at
#: a fraction of their cost (docs/methods/gbm.md, ``benchmarks/gbm_threshold.py``)
SHORT_SHARE = 0.125
#: ``gbm``'s label-set rule: "oof", "cv" (the former default) or a fixed threshold
GBMThreshold = Literal["oof", "cv"] | Annotated[float, Field(gt=0, lt=1)]
THRESHOLD_DOC = (
    "Label-set rule: 'oof' (default) learns one threshold maximising micro-F1 on out-of-fold scores of short "
    "inner boosters (3 folds, an eighth of the rounds at 8x the learning rate, fitted beside each label's "
    "booster), and fills an empty set with the top label where that raised micro-F1 there; 'cv' the same on "
    "inner 3-fold copies of the whole model (the former default, about 2x the cost); a number in (0, 1) "
    "keeps the plain rule score > threshold."
)


class GBMParams(MethodParams):
    n_estimators: int = Field(200, ge=1, le=10_000, description="Boosting rounds (trees) per label.")
    learning_rate: float = Field(0.05, gt=0, le=1, description="Shrinkage of each tree's contribution.")
    num_leaves: int = Field(7, ge=2, le=4096, description="Most leaves of one tree (trees grow leaf-wise).")
    min_child_samples: int = Field(5, ge=1, description="Fewest training samples in a leaf.")
    colsample_bytree: float = Field(
        0.5, gt=0, le=1, description="Share of the features each tree is grown on (drawn per tree, seeded)."
    )
    n_jobs: int | None = Field(
        None, description="Threads fitting labels side by side (None = 1, -1 = all cores); results do not depend on it."
    )
    random_state: int | None = Field(0, description="Seed of every booster's feature draws.")
    threshold: GBMThreshold = Field("oof", description=THRESHOLD_DOC)


class GradientBoosting(LearnedThresholdMixin, ProbabilityClassifierMixin, MethodEstimator):
    """One LightGBM booster per label; parameters as :class:`GBMParams`.

    Fitted attributes: ``n_features_in_``, ``boosters_`` (q,) the ``lightgbm.Booster`` of each
    label (``None`` for a constant label), ``constant_`` (q,) bool, ``constant_value_`` (q,).
    """

    _params_model = GBMParams
    predicts_constant_labels = True
    accepts_sparse = True  # LightGBM bins CSR as it is

    def __init__(
        self,
        *,
        n_estimators: int = 200,
        learning_rate: float = 0.05,
        num_leaves: int = 7,
        min_child_samples: int = 5,
        colsample_bytree: float = 0.5,
        n_jobs: int | None = None,
        random_state: int | None = 0,
        threshold: float | str = "oof",
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.colsample_bytree = colsample_bytree
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.threshold = threshold

    def library_params(self, seed: int) -> dict[str, Any]:
        """The ``lightgbm.train`` parameters of one label's fit: ``LGBMClassifier``'s binary
        objective with ours (one thread, quiet, seeded)."""
        return {
            "objective": "binary",
            "num_iterations": self.n_estimators,
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "min_data_in_leaf": self.min_child_samples,
            "feature_fraction": self.colsample_bytree,
            "seed": seed,
            "num_threads": 1,
            "verbose": -1,
        }

    def _fit(self, X: Any, Y: np.ndarray, progress: ProgressFn) -> None:
        seed = self.random_state if self.random_state is not None else draw_seed()
        varying = np.flatnonzero(~self.constant_)
        params = self.library_params(seed)
        short = self.threshold == "oof" and Y.shape[0] >= MIN_ROWS
        splits = list(KFold(INNER_FOLDS, shuffle=True, random_state=seed).split(np.zeros((Y.shape[0], 1))))
        progress("labels", 0.0)
        fitted = _fit_labels(
            X,
            [Y[:, j] for j in varying],
            params,
            splits if short else [],
            self.n_jobs,
            report=lambda fraction: progress("labels", fraction),
        )
        boosters: list[Any] = [None] * Y.shape[1]
        S = np.tile(self.constant_value_.astype(np.float64), (Y.shape[0], 1))
        for j, (booster, oof) in zip(varying, fitted):
            boosters[j] = booster
            if oof is not None:
                S[:, j] = oof
        self.boosters_ = boosters
        if self.threshold == "oof":
            self.threshold_, self.fill_empty_ = choose_rule(Y, S) if short else (0.5, False)
        else:
            self._learn_threshold(X, Y, progress, seed)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model is q x rounds trees; a tree of L leaves is kept (and pickled) as LightGBM's
        text model, about 2L - 1 nodes of some 80 characters each plus a 600-byte header. The fit
        holds the input, the targets and, per thread, LightGBM's binned copy of the features
        (one byte per stored value; 255 bins at most per feature) and its histogram cache: a
        (bins, 2) float64 histogram of every feature per leaf; with ``threshold="oof"`` each
        thread also keeps the three inner folds' rows (two thirds of the input each) and their
        binned copies."""
        rounds = int(params.get("n_estimators", 200))
        leaves = int(params.get("num_leaves", 7))
        tree = (2 * leaves - 1) * 80 + 600
        model = shape.q * rounds * tree + 4096
        stored = shape.n * shape.d if shape.nnz is None else shape.nnz
        bins = min(255, max(2, shape.n))
        per_fit = stored + 4 * shape.n * 8 + leaves * shape.d * bins * 16
        if params.get("threshold", "oof") == "oof":
            per_fit += 2 * (shape.feature_bytes(True) + stored)
        jobs = min(max(1, shape.q), effective_jobs(params.get("n_jobs") or 1))
        peak = shape.feature_bytes(True) + shape.label_bytes + model + jobs * per_fit
        return MemoryEstimate(peak, model)

    # ----------------------------------------------------------------------- prediction
    def _predict_scores(self, X: Any) -> np.ndarray:
        """Per-label probabilities (n, q) of a float64 (n, d) array (or CSR matrix) already validated."""
        S = np.zeros((X.shape[0], len(self.boosters_)))
        if X.shape[0] == 0:
            return S
        for j, booster in enumerate(self.boosters_):
            if booster is not None:
                S[:, j] = booster.predict(X, num_threads=1)
        return S


def short_params(params: dict[str, Any]) -> dict[str, Any]:
    """The boosting of the inner boosters of ``threshold="oof"``: ``1 / SHORT_SHARE`` of the rounds
    (at least one) at a learning rate as much larger (at most 1), so they take about the same
    steps as the registered booster in a fraction of its trees."""
    rounds = max(1, math.ceil(params["num_iterations"] * SHORT_SHARE))
    rate = min(1.0, params["learning_rate"] * params["num_iterations"] / rounds)
    return {**params, "num_iterations": rounds, "learning_rate": rate}


class _Binned(threading.local):
    """Each thread's binned copies (LightGBM ``Dataset``) of the training rows and of each inner
    fold's training rows, built on the first label the thread fits and relabelled for the next:
    the features are binned once per thread, not once per label (bins do not depend on the label,
    so the boosters are those of ``LGBMClassifier`` on the same rows)."""

    full: Any = None
    folds: list[Any]


def _dataset(X: Any, y: np.ndarray, params: dict[str, Any]) -> Any:
    """LightGBM's binned copy of ``X`` as ``LGBMClassifier`` makes it, kept to be relabelled
    (``set_label``; a subset of a larger ``Dataset`` is not: relabelled, it trains differently)."""
    import lightgbm

    kept = {k: params[k] for k in ("min_data_in_leaf", "seed", "verbose")}
    return lightgbm.Dataset(X, label=y, params=kept, free_raw_data=False).construct()


def _fit_one(
    X: Any, y: np.ndarray, params: dict[str, Any], splits: Sequence[tuple[np.ndarray, np.ndarray]], binned: _Binned
) -> tuple[Any, np.ndarray | None]:
    """One label's booster and, with ``splits``, its out-of-fold scores from short inner boosters."""
    import lightgbm  # imported on use: its native library costs start-up time

    target = y.astype(np.float64)
    if binned.full is None:
        binned.full = _dataset(X, target, params)
        binned.folds = [_dataset(X[tr], target[tr], params) for tr, _ in splits]
    binned.full.set_label(target)
    booster = lightgbm.train(params, binned.full, num_boost_round=params["num_iterations"])
    if not splits:
        return booster, None
    oof = np.empty(y.shape[0])
    inner = short_params(params)
    for (tr, te), part in zip(splits, binned.folds):
        inner_y = target[tr]
        if inner_y.min() == inner_y.max():  # constant on this fold: predicted with that constant
            oof[te] = inner_y[0]
            continue
        part.set_label(inner_y)
        oof[te] = lightgbm.train(inner, part, num_boost_round=inner["num_iterations"]).predict(X[te], num_threads=1)
    return booster, oof


def _fit_labels(
    X: Any,
    targets: Sequence[np.ndarray],
    params: dict[str, Any],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    n_jobs: int | None,
    report: Callable[[float], None],
) -> list[tuple[Any, np.ndarray | None]]:
    """One booster (and out-of-fold scores, with ``splits``) per target, in order; ``report(fraction
    done)`` after each (calling thread)."""
    jobs = min(effective_jobs(n_jobs or 1), max(1, len(targets)))
    out: list[tuple[Any, np.ndarray | None]] = []
    binned = _Binned()
    if jobs == 1:
        for y in targets:
            out.append(_fit_one(X, y, params, splits, binned))
            report(len(out) / len(targets))
        return out
    with Parallel(n_jobs=jobs, prefer="threads", return_as="generator") as parallel:
        for fitted in parallel(delayed(_fit_one)(X, y, params, splits, binned) for y in targets):
            out.append(fitted)
            report(len(out) / len(targets))
    return out


SPEC = MethodSpec(
    id="gbm",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=GBMParams,
    estimator=GradientBoosting,
    summary="Gradient boosting (a baseline): one LightGBM LGBMClassifier per label; labels above one "
    "threshold learned on inner out-of-fold scores.",
    paper="Baseline. Ke G., Meng Q., Finley T., Wang T., Chen W., Ma W., Ye Q., Liu T.-Y. LightGBM: a highly "
    "efficient gradient boosting decision tree. NeurIPS 30, 2017, pp. 3146-3154.",
    stages=("labels", "threshold"),
)
