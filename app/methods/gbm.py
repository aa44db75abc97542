"""GBM: one-vs-rest gradient boosting with LightGBM (a catalog baseline).

Label j is predicted by a LightGBM ``LGBMClassifier`` (binary log loss, histogram trees grown
leaf-wise) fitted on (X, Y[:, j]) alone, as ``OneVsRestClassifier(LGBMClassifier())`` would; a
label's score is its booster's probability, a label constant in the training data is predicted
with that constant, and the label set is every label above one threshold learned on inner
out-of-fold scores (``threshold="cv"``, ``app.methods.thresholds``). LightGBM rather than
scikit-learn's ``HistGradientBoostingClassifier``: the same accuracy, much cheaper on sparse
features; the defaults were chosen on training parts only (``LIBRARY_DEFAULTS`` are LightGBM's
own). Both comparisons, with ``benchmarks/gbm_choice.py``, are in docs/methods/gbm.md.

``n_jobs`` threads fit the labels side by side, each booster with one thread (LightGBM releases
the GIL), so results do not depend on ``n_jobs``; progress is reported, and a cancellation stops
the fit, after each finished label. Every booster is seeded with ``random_state``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from pydantic import Field

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
from app.methods.thresholds import THRESHOLD_DOC, LearnedThresholdMixin, ThresholdParam

#: LightGBM's own defaults of the parameters ``gbm`` declares (docs/methods/gbm.md sets them beside ours)
LIBRARY_DEFAULTS: dict[str, Any] = {
    "n_estimators": 100,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "min_child_samples": 20,
    "colsample_bytree": 1.0,
}


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
    threshold: ThresholdParam = Field("cv", description=THRESHOLD_DOC)


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
        threshold: float | str = "cv",
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
        """The ``LGBMClassifier`` arguments of one label's fit (one thread, quiet, seeded)."""
        return {
            "n_estimators": self.n_estimators,
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "min_child_samples": self.min_child_samples,
            "colsample_bytree": self.colsample_bytree,
            "random_state": seed,
            "n_jobs": 1,
            "verbose": -1,
        }

    def _fit(self, X: Any, Y: np.ndarray, progress: ProgressFn) -> None:
        seed = self.random_state if self.random_state is not None else draw_seed()
        varying = np.flatnonzero(~self.constant_)
        params = self.library_params(seed)
        progress("labels", 0.0)
        fitted = _fit_labels(
            X,
            [Y[:, j] for j in varying],
            params,
            self.n_jobs,
            report=lambda fraction: progress("labels", fraction),
        )
        boosters: list[Any] = [None] * Y.shape[1]
        for j, booster in zip(varying, fitted):
            boosters[j] = booster
        self.boosters_ = boosters
        self._learn_threshold(X, Y, progress, seed)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model is q x rounds trees; a tree of L leaves is kept (and pickled) as LightGBM's
        text model, about 2L - 1 nodes of some 80 characters each plus a 600-byte header. The fit
        holds the input, the targets and, per thread, LightGBM's binned copy of the features
        (one byte per stored value; 255 bins at most per feature) and its histogram cache: a
        (bins, 2) float64 histogram of every feature per leaf."""
        rounds = int(params.get("n_estimators", 200))
        leaves = int(params.get("num_leaves", 7))
        tree = (2 * leaves - 1) * 80 + 600
        model = shape.q * rounds * tree + 4096
        stored = shape.n * shape.d if shape.nnz is None else shape.nnz
        bins = min(255, max(2, shape.n))
        per_fit = stored + 4 * shape.n * 8 + leaves * shape.d * bins * 16
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


def _fit_one(X: Any, y: np.ndarray, params: dict[str, Any]) -> Any:
    from lightgbm import LGBMClassifier  # imported on use: its native library costs start-up time

    return LGBMClassifier(**params).fit(X, y.astype(np.int64)).booster_


def _fit_labels(
    X: Any, targets: Sequence[np.ndarray], params: dict[str, Any], n_jobs: int | None, report: Callable[[float], None]
) -> list[Any]:
    """One booster per target, in order; ``report(fraction done)`` after each (calling thread)."""
    jobs = min(effective_jobs(n_jobs or 1), max(1, len(targets)))
    out: list[Any] = []
    if jobs == 1:
        for y in targets:
            out.append(_fit_one(X, y, params))
            report(len(out) / len(targets))
        return out
    with Parallel(n_jobs=jobs, prefer="threads", return_as="generator") as parallel:
        for booster in parallel(delayed(_fit_one)(X, y, params) for y in targets):
            out.append(booster)
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
