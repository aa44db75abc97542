"""AA-kNN: a label distribution is the mean of the k nearest training distributions.

Geng's "algorithm adaptation" kNN for label distribution learning (Geng, TKDE 2016): for a query
x, find its k nearest training samples (Euclidean, on features min-max scaled on the training
set by default) and predict the average of their label distributions, which is again a
distribution. Neighbours are exact and distance ties go to the lower training index (the
service's ``ExactKNN``, shared with ML-kNN), so predictions are deterministic.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from app.methods.base import InvalidParameterError, MethodEstimator, MethodParams, MethodSpec, ProgressFn
from app.methods.baseline_support import DistributionPredictorMixin, MinMaxOption
from app.methods.mlknn import ExactKNN


class AAKNNParams(MethodParams):
    k: int = Field(5, ge=1, description="Number of nearest training samples averaged (at most n).")
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set before Euclidean distances."
    )


class AAKNN(DistributionPredictorMixin, MinMaxOption, MethodEstimator):
    """Mean of the k nearest training distributions; parameters as :class:`AAKNNParams`.

    Fitted attributes: ``n_features_in_``, ``scaling_``, ``index_`` (exact neighbour index over
    the scaled training rows), ``D_fit_`` (n, c) the training distributions.
    """

    _params_model = AAKNNParams

    def __init__(self, *, k: int = 5, scale: Literal["none", "minmax"] = "minmax") -> None:
        self.k = k
        self.scale = scale

    def _check_data_params(self, X: np.ndarray, D: np.ndarray) -> None:
        if self.k > X.shape[0]:
            raise InvalidParameterError.bound(
                self, "k", f"k={self.k} exceeds the number of training samples {X.shape[0]}"
            )

    def _fit(self, Xs: np.ndarray, D: np.ndarray, progress: ProgressFn) -> None:
        progress("index", 0.0)
        self.index_ = ExactKNN(Xs)
        self.D_fit_ = D
        progress("index", 1.0)

    def _predict(self, X: np.ndarray) -> np.ndarray:
        """Distributions (n, c) for a float64 (n, d) array already validated."""
        neighbours = self.index_.kneighbors(np.ascontiguousarray(self.scaling_.transform(X)), int(self.k))
        return self.D_fit_[neighbours].mean(axis=1)


SPEC = MethodSpec(
    id="aa-knn",
    task="distribution",
    outputs=("distribution",),
    params=AAKNNParams,
    estimator=AAKNN,
    summary="AA-kNN (a baseline): the mean of the k nearest training label distributions.",
    paper="Baseline. Geng X. Label distribution learning. IEEE Transactions on Knowledge and Data "
    "Engineering 28(7):1734-1748, 2016. doi:10.1109/TKDE.2016.2545658",
    dataset_kind="distribution",
    stages=("index",),
)
