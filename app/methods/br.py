"""BR: binary relevance with one logistic regression per label.

The baseline every multi-label toolkit has (MEKA's ``BR``, Mulan's ``BinaryRelevance``,
scikit-learn's ``OneVsRestClassifier``): label j is predicted by a scikit-learn
``LogisticRegression`` fitted on (X, Y[:, j]) alone, ignoring the other labels. Scores are the
per-label probabilities; the label set is every label above one threshold learned on inner
out-of-fold scores (``threshold="cv"``, ``app.methods.thresholds``; a float keeps ``p > threshold``).

The fitted coefficients are stacked into one (q, d) matrix, so prediction is one matrix product
and a sigmoid whatever q is. The per-label fits are independent: ``n_jobs`` worker processes fit
them side by side, on a CSR copy of the features when they are sparse (``app.methods.per_label``).
Each fit uses one BLAS thread: each problem is too small to gain from more, and BLAS threads
competing for the cores of a busy machine made them far slower (docs/methods/br.md). A label
constant in the training data has no logistic regression; it is predicted with that constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy.special import expit

from app.methods.base import (
    MAX_LBFGS_ITER,
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
)
from app.methods.baseline_support import MinMaxOption, ProbabilityClassifierMixin
from app.methods.per_label import Problem, design_matrix, fit_logistic
from app.methods.thresholds import THRESHOLD_DOC, LearnedThresholdMixin, ThresholdParam


class BRParams(MethodParams):
    C: float = Field(1.0, gt=0, description="Inverse L2 regularisation strength of each logistic regression.")
    max_iter: int = Field(1000, ge=1, le=MAX_LBFGS_ITER, description="L-BFGS iteration cap per label.")
    class_weight: Literal["balanced"] | None = Field(
        None, description="'balanced' weights each label's classes inversely to their frequency."
    )
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set first (part of the model)."
    )
    n_jobs: int | None = Field(
        None,
        description="Worker processes fitting labels side by side (None = 1, -1 = all cores); results do not depend on it.",
    )
    threshold: ThresholdParam = Field("cv", description=THRESHOLD_DOC)


class BinaryRelevance(LearnedThresholdMixin, ProbabilityClassifierMixin, MinMaxOption, MethodEstimator):
    """One ``LogisticRegression`` per label; parameters as :class:`BRParams`.

    Fitted attributes: ``n_features_in_``, ``scaling_``, ``coef_`` (q, d) and ``intercept_`` (q,)
    on the scaled features (zero for constant labels), ``constant_`` (q,) bool, ``constant_value_``
    (q,) the value of a constant label, ``n_iter_`` the largest L-BFGS iteration count of the
    per-label fits (``max_iter`` reached means one did not converge).
    """

    _params_model = BRParams
    predicts_constant_labels = True
    accepts_sparse = True  # LogisticRegression takes CSR; min-max scaling of non-negative data keeps it

    def __init__(
        self,
        *,
        C: float = 1.0,
        max_iter: int = 1000,
        class_weight: Literal["balanced"] | None = None,
        scale: Literal["none", "minmax"] = "minmax",
        n_jobs: int | None = None,
        threshold: float | str = "cv",
    ) -> None:
        self.C = C
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.scale = scale
        self.n_jobs = n_jobs
        self.threshold = threshold

    def _fit(self, Xs: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        q = Y.shape[1]
        varying = np.flatnonzero(~self.constant_)
        design = design_matrix(Xs)
        progress("labels", 0.0)
        fitted = fit_logistic(
            [Problem(design, Xs.shape[1], Y[:, j]) for j in varying],
            C=self.C,
            max_iter=self.max_iter,
            class_weight=self.class_weight,
            n_jobs=self.n_jobs,
            report=lambda fraction: progress("labels", fraction),
        )
        self.coef_, self.intercept_ = np.zeros((q, Xs.shape[1])), np.zeros(q)
        for j, fit in zip(varying, fitted):
            self.coef_[j], self.intercept_[j] = fit.coef, fit.intercept
        self.n_iter_ = max([0] + [fit.n_iter for fit in fitted])
        self._learn_threshold(Xs, Y, progress, seed=0)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model is the (q, d) coefficients; the fit holds the input, its scaled copy, the
        targets, the coefficients and one logistic regression's temporaries (a few vectors of
        n and d, and L-BFGS's history of 10 pairs of d-vectors)."""
        model = 8 * shape.q * (shape.d + 2) + 8 * shape.d * 3
        x = shape.feature_bytes(True)
        peak = 2 * x + shape.label_bytes + model + 8 * (8 * shape.n + 30 * shape.d)
        return MemoryEstimate(peak, model)

    # ----------------------------------------------------------------------- prediction
    def _predict_scores(self, X: Any) -> np.ndarray:
        """Per-label probabilities (n, q) of a float64 (n, d) array (or CSR matrix) already validated."""
        return expit(self.scaling_.transform(X) @ self.coef_.T + self.intercept_)


SPEC = MethodSpec(
    id="br",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=BRParams,
    estimator=BinaryRelevance,
    summary="Binary relevance: one scikit-learn LogisticRegression per label (a baseline); "
    "labels above one threshold learned on inner out-of-fold scores.",
    paper="Baseline (binary relevance). Tsoumakas G., Katakis I., Vlahavas I. Mining multi-label data. "
    "Data Mining and Knowledge Discovery Handbook, Springer, 2010, pp. 667-685.",
    stages=("labels", "threshold"),
)
