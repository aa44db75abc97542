"""Pieces shared by the baseline methods (``br``, ``ecc``, ``rf``, ``mi-filter``, ``aa-knn``, ``sa-maxent``).

The baselines are thin wrappers around scikit-learn and SciPy. What they add is what the service
needs from every method: parameters declared once (a pydantic model, checked in ``fit``), a
feature scaling that is part of the model, labels that are constant in the training data handled
without failing the fit, and a prediction path without per-call validation.

The public prediction methods are the same for every baseline of a task, so they live here
once: :class:`ProbabilityClassifierMixin` (``br``, ``ecc``, ``rf``: scores are probabilities,
the label set is every label above a threshold) and :class:`DistributionPredictorMixin`
(``aa-knn``, ``sa-maxent``). Each validates its input as scikit-learn does and delegates to the
estimator's private twin, which the service calls directly on input it validated once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import validate_data

from app.methods.base import DistributionLearnerMixin, MethodParams, MultiLabelClassifierMixin, check_features
from app.methods.numerics import FeatureScaling


def check_params(estimator: Any, params_model: type[MethodParams]) -> MethodParams:
    """The estimator's constructor arguments checked against its declaration.

    ``fit`` calls this, so ``set_params`` / ``clone`` with a bad value fails where scikit-learn
    expects it (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    return params_model.model_validate(estimator.get_params(deep=False))


def check_distributions(estimator: Any, X: Any, D: Any) -> tuple[np.ndarray, np.ndarray]:
    """``fit``'s input checks for label distribution learners: finite X (n, d), D (n, c) non-negative.

    Runs scikit-learn's ``validate_data`` (which sets ``n_features_in_``). A row of D that does
    not sum to 1 (rounding in a data file) is renormalised, as ``ldlkm`` does; a row summing to 0
    has no distribution and is an error.
    """
    X, D = validate_data(
        estimator, X, D, multi_output=True, dtype=np.float64, order="C", y_numeric=True, ensure_min_samples=2
    )
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[1] < 1:
        raise ValueError(f"D must be a 2-D (n, c) matrix of label distributions, got shape {D.shape}")
    if (D < 0).any():
        raise ValueError("every row of D must be a distribution: D has negative entries")
    sums = D.sum(axis=1, keepdims=True)
    if (sums <= 0).any():
        raise ValueError("every row of D must be a distribution: some rows sum to 0")
    return X, D / sums


class Scaling:
    """Per-feature min-max scaling fitted on the training rows (or the identity), kept in the model.

    Constant features map to 0 for training and test rows alike; test values outside the
    training range are not clipped.
    """

    def __init__(self, X: np.ndarray, mode: str) -> None:
        if mode == "minmax":
            self.scaling = FeatureScaling.minmax(X, constant="zero")
        else:
            self.scaling = FeatureScaling.identity(X.shape[1])

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.scaling.transform(X)


def constant_labels(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(varying, value)``: which label columns take both values in ``Y``, and the 0/1 value of the others."""
    frac = Y.mean(axis=0)
    varying = (frac > 0) & (frac < 1)
    return varying, (frac >= 1).astype(np.float64)


class ProbabilityClassifierMixin(MultiLabelClassifierMixin):
    """Public prediction methods of a multi-label baseline whose scores are probabilities.

    The estimator implements ``_decision_function`` (scores (n, q) of a float64 (n, d) array
    already validated); the label set is every label with probability above a threshold, 0.5
    unless the caller names another. ``fit`` must call ``check_multilabel`` (which sets
    ``n_features_in_``) and ``_set_classes``.
    """

    def _decision_function(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _default_threshold(self) -> float:
        """The threshold when the caller names none (a blend has a fitted one)."""
        return 0.5

    def _predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        t = self._default_threshold() if threshold is None else float(threshold)
        return (self._decision_function(X) > t).astype(np.int64)

    def decision_function(self, X: Any) -> np.ndarray:
        """Probability of each label (n, q); higher = more relevant."""
        return self._decision_function(check_features(self, X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Same as ``decision_function``: the scores are probabilities."""
        return self.decision_function(X)

    def predict(self, X: Any, threshold: float | None = None) -> np.ndarray:
        """0/1 label sets (n, q): probability > ``threshold`` (default 0.5, a blend's fitted one)."""
        return self._predict(check_features(self, X), threshold)


class DistributionPredictorMixin(DistributionLearnerMixin):
    """Public ``predict`` of a label distribution baseline; the estimator implements ``_predict``
    (distributions (n, c) of a float64 (n, d) array already validated)."""

    def _predict(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(self, X: Any) -> np.ndarray:
        """Predicted label distributions (n, c), rows summing to 1."""
        return self._predict(check_features(self, X))
