"""Pieces shared by the baseline methods (``br``, ``ecc``, ``rf``, ``mi-filter``, ``aa-knn``, ``sa-maxent``).

The baselines are thin wrappers around scikit-learn and SciPy. What they add is what the service
needs from every method: parameters declared once (a pydantic model, checked in ``fit``), a
feature scaling that is part of the model, labels that are constant in the training data handled
without failing the fit, and a prediction path without per-call validation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_array

from app.methods.base import MethodParams
from app.methods.numerics import FeatureScaling


def check_params(estimator: Any, params_model: type[MethodParams]) -> MethodParams:
    """The estimator's constructor arguments checked against its declaration.

    ``fit`` calls this, so ``set_params`` / ``clone`` with a bad value fails where scikit-learn
    expects it (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    return params_model.model_validate(estimator.get_params(deep=False))


def check_distributions(X: Any, D: Any) -> tuple[np.ndarray, np.ndarray]:
    """``fit``'s input checks for label distribution learners: finite X (n, d), rows of D summing to 1."""
    X = check_array(X, dtype=np.float64, order="C")
    D = check_array(D, dtype=np.float64, ensure_2d=True)
    if D.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but D has {D.shape[0]}")
    if X.shape[0] < 2:
        raise ValueError("need at least 2 samples")
    if (D < 0).any() or not np.allclose(D.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("every row of D must be a distribution (non-negative, summing to 1)")
    return X, D


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


def check_input(X: Any, n_features: int) -> np.ndarray:
    """Validation of the public predict methods: finite float64 (n, d) with the training width."""
    X = check_array(X, dtype=np.float64, order="C")
    if X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model was fitted with {n_features}")
    return X
