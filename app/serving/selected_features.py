"""A classifier trained on the features a selector model chose.

Users predict with full feature vectors (the training dataset's feature order); the stored
model applies the selection itself, so clients never need to know which columns were kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SelectedFeatures:
    """Wraps a fitted estimator so that it sees only ``feature_indices`` of each input."""

    def __init__(self, estimator: Any, feature_indices: np.ndarray, selector_ref: str) -> None:
        self.estimator = estimator
        self.feature_indices = np.asarray(feature_indices, dtype=np.intp)
        self.selector_ref = selector_ref

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return self.estimator.decision_function(self._columns(X))

    def predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        return self.estimator.predict(self._columns(X), threshold=threshold)

    # The service's fast path: X already validated at the API boundary (see app.methods.base).
    def _decision_function(self, X: np.ndarray) -> np.ndarray:
        return self.estimator._decision_function(self._columns(X))

    def _predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        return self.estimator._predict(self._columns(X), threshold=threshold)

    def derived_nbytes(self) -> int:
        """The wrapped model's (what the model cache adds to the artifact's size)."""
        return int(self.estimator.derived_nbytes())

    def _columns(self, X: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(X)[:, self.feature_indices])

    def __getattr__(self, name: str) -> Any:
        # Optional capabilities (predict_details and its fast path) are looked up on the wrapped
        # estimator, with the column selection applied to their first argument.
        if name in ("predict_details", "_predict_details"):
            inner = getattr(self.__dict__.get("estimator"), name, None)
            if inner is not None:
                return lambda X, threshold=None: inner(self._columns(X), threshold=threshold)
        raise AttributeError(name)


def top_features(selector: Any, top_k: int | None, top_fraction: float | None) -> np.ndarray:
    """The selector's best ``top_k`` features (or ``top_fraction`` of them, at least one)."""
    ranking = np.asarray(selector.ranking_, dtype=np.intp)
    if top_k is None:
        top_k = max(1, int(round((top_fraction or 1.0) * ranking.size)))
    return ranking[: min(top_k, ranking.size)]
