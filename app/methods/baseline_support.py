"""Pieces shared by the baseline methods (``br``, ``ecc``, ``rf``, ``mi-filter``, ``aa-knn``, ``sa-maxent``).

The baselines are thin wrappers around scikit-learn and SciPy. What they need from the service
(parameters declared once, the input checks, a feature scaling that is part of the model,
labels constant in the training data handled without failing the fit) is the template ``fit`` of
:class:`~app.methods.base.MethodEstimator`; what is left here is their prediction side and the
``scale`` option several of them share.

The public prediction methods are the same for every baseline of a task, so they live here
once: :class:`ProbabilityClassifierMixin` (``br``, ``ecc``, ``rf``, the blend: scores are
probabilities, the label set is every label above a threshold) and
:class:`DistributionPredictorMixin` (``aa-knn``, ``sa-maxent``). Each validates its input as
scikit-learn does and delegates to the estimator's private twin, which the service calls
directly on input it validated once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.methods.base import DistributionLearnerMixin, MultiLabelClassifierMixin, check_features
from app.methods.numerics import FeatureScaling


class MinMaxOption:
    """The ``scale: "none" | "minmax"`` parameter: min-max scaling fitted on the training rows.

    Constant features map to 0 for training and test rows alike; test values outside the
    training range are not clipped.
    """

    scale: str

    def _fit_scaling(self, X: np.ndarray) -> FeatureScaling:
        if self.scale == "minmax":
            return FeatureScaling.minmax(X, constant="zero")
        return FeatureScaling.identity(X.shape[1])


class Scaling:
    """The ``scaling_`` of 0.1.x artifacts of the baselines (fitted before the template ``fit``:
    a ``FeatureScaling`` inside a wrapper); kept so that they still load and predict."""

    scaling: FeatureScaling

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.scaling.transform(X)


class ProbabilityClassifierMixin(MultiLabelClassifierMixin):
    """Public prediction methods of a multi-label baseline whose scores are probabilities.

    The estimator implements ``_predict_scores`` (scores (n, q) of a float64 (n, d) array
    already validated); the columns of labels constant in training are then set to their
    constant when the estimator ``predicts_constant_labels``. The label set is every label with
    probability above a threshold, 0.5 unless the caller names another.
    """

    def _predict_scores(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _decision_function(self, X: np.ndarray) -> np.ndarray:
        P = self._predict_scores(X)
        if self.predicts_constant_labels:
            P[:, self.constant_] = self.constant_value_[self.constant_]
        return P

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
