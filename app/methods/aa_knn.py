"""AA-kNN: a label distribution is the (weighted) mean of the k nearest training distributions.

Geng's "algorithm adaptation" kNN for label distribution learning (Geng, TKDE 2016): for a query
x, find its k nearest training samples (Euclidean, on scaled features) and predict the average of
their label distributions, which is again a distribution. Neighbours are exact and distance ties
go to the lower training index (the service's ``ExactKNN``, shared with ML-kNN), so predictions
are deterministic.

Departures from the literal method (``LITERAL_DEFAULTS``), chosen on training folds
(docs/methods/aa-knn.md): inverse-distance weights, and ``k`` and a **shrinkage** towards the
training mean, ``(1 - lambda) * kNN + lambda * mean``, chosen at fit time (from ``K_GRID`` and
``SHRINKAGE_GRID``) by the leave-one-out Chebyshev distance of at most ``LOO_MAX_ROWS`` training
rows. ``lambda = 1`` is the training mean itself, so on the training rows the rule is never worse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from app.methods.base import (
    MAX_NEIGHBOURS,
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
)
from app.methods.baseline_support import DistributionPredictorMixin
from app.methods.mlknn import ExactKNN
from app.methods.numerics import FeatureScaling

#: the neighbour counts ``k="loo"`` chooses from (``auto``'s grid of aa-knn)
K_GRID = (3, 5, 10, 20)
#: the weights on the training mean that ``shrinkage="loo"`` chooses from
SHRINKAGE_GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)
#: training rows whose leave-one-out predictions choose (k, shrinkage): a seeded sample above
#: this, so the choice costs at most this many queries (a full leave-one-out pass is an n x n search)
LOO_MAX_ROWS = 1000
#: query rows whose neighbour distances are gathered at once (bounds the (rows, k, d) temporary)
_BLOCK = 256
#: literal defaults of the method (Geng 2016)
LITERAL_DEFAULTS: dict[str, Any] = {"k": 5, "weights": "uniform", "scale": "minmax", "shrinkage": 0.0}


class AAKNNParams(MethodParams):
    k: Literal["loo"] | Annotated[int, Field(ge=1, le=MAX_NEIGHBOURS)] = Field(
        "loo",
        description="Number of nearest training samples averaged (at most n; n - 1 with shrinkage 'loo'), or 'loo': "
        "the value of auto's grid 3, 5, 10, 20 with the lowest leave-one-out Chebyshev distance on the training rows "
        "(with the shrinkage).",
    )
    weights: Literal["uniform", "distance"] = Field(
        "distance", description="'uniform' mean of the neighbours, or 'distance': weighted by 1 / distance."
    )
    scale: Literal["none", "minmax", "zscore"] = Field(
        "minmax", description="Feature scaling fitted on the training set before Euclidean distances."
    )
    shrinkage: Literal["loo"] | Annotated[float, Field(ge=0, le=1)] = Field(
        "loo",
        description="Weight of the training mean in the prediction: 'loo' = the value in 0, 0.05, ..., 1 with the "
        "lowest leave-one-out Chebyshev distance on the training rows; 0 = the kNN mean alone (the literal method).",
    )


class AAKNN(DistributionPredictorMixin, MethodEstimator):
    """Weighted mean of the k nearest training distributions, shrunk towards the training mean;
    parameters as :class:`AAKNNParams`.

    Fitted attributes: ``n_features_in_``, ``scaling_``, ``index_`` (exact neighbour index over
    the scaled training rows), ``D_fit_`` (n, c) the training distributions, ``mean_`` (c,) their
    mean, ``k_`` the neighbour count and ``shrinkage_`` the weight of ``mean_`` in use.
    """

    _params_model = AAKNNParams
    recorded_attributes = ("k_", "shrinkage_")

    def __init__(
        self,
        *,
        k: int | str = "loo",
        weights: Literal["uniform", "distance"] = "distance",
        scale: Literal["none", "minmax", "zscore"] = "minmax",
        shrinkage: float | str = "loo",
    ) -> None:
        self.k = k
        self.weights = weights
        self.scale = scale
        self.shrinkage = shrinkage

    @classmethod
    def sample_bounds(cls, params: Mapping[str, Any]) -> dict[str, int]:
        """A given ``k`` neighbours of a query: at most n, the query not being a training row;
        at most n - 1 with ``shrinkage="loo"``, whose choice predicts each training row from its
        k neighbours other than itself."""
        if params["k"] == "loo":
            return {}
        return {"k": 1 if params["shrinkage"] == "loo" else 0}

    def _fit_scaling(self, X: np.ndarray) -> FeatureScaling:
        if self.scale == "minmax":
            return FeatureScaling.minmax(X, constant="zero")
        if self.scale == "zscore":
            return FeatureScaling.zscore(X, constant="zero")
        return FeatureScaling.identity(X.shape[1])

    def _fit(self, Xs: np.ndarray, D: np.ndarray, progress: ProgressFn) -> None:
        progress("index", 0.0)
        self.index_ = ExactKNN(Xs)
        self.D_fit_ = D
        self.mean_ = D.mean(axis=0)
        n = Xs.shape[0]
        ks = [k for k in K_GRID if k <= n - 1] if self.k == "loo" else [int(self.k)]
        lams = SHRINKAGE_GRID if self.shrinkage == "loo" else np.array([float(self.shrinkage)])
        self.k_ = ks[0] if ks else min(n, K_GRID[0])
        self.shrinkage_ = float(lams[0])
        if len(ks) * len(lams) > 1:
            progress("leave-one-out", 0.5)
            self.k_, self.shrinkage_ = self._loo_choice(Xs, D, ks, lams)
        progress("index", 1.0)

    def _loo_choice(self, Xs: np.ndarray, D: np.ndarray, ks: list[int], lams: np.ndarray) -> tuple[int, float]:
        """The (k, weight of the mean) whose leave-one-out predictions of the training rows have
        the lowest mean Chebyshev distance (ties: the smaller k, then the smaller weight): one
        search for the largest k, whose nearest-first prefixes are the smaller ones."""
        n, kmax = Xs.shape[0], max(ks)
        rows = np.arange(n)
        if n > LOO_MAX_ROWS:
            rows = np.sort(np.random.default_rng(0).choice(n, LOO_MAX_ROWS, replace=False))
        neighbours = self._others(Xs[rows], rows, kmax)
        best, choice = np.inf, (ks[0], float(lams[0]))
        for k in ks:
            knn = self._neighbour_mean(Xs[rows], neighbours[:, :k])
            gap = knn - self.mean_[None, :]
            for lam in lams:
                cheb = float(np.abs(knn - lam * gap - D[rows]).max(axis=1).mean())
                if cheb < best - 1e-12:
                    best, choice = cheb, (k, float(lam))
        return choice

    def _others(self, Qs: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
        """The k nearest training rows of training rows ``rows`` (scaled ``Qs``), each row itself
        excluded by index (its duplicates stay eligible), nearest first: leave-one-out neighbours."""
        if rows.size == self.index_.n_samples:
            return self.index_.kneighbors(None, k)
        found = self.index_.kneighbors(Qs, k + 1)
        other = found != rows[:, None]
        order = np.argsort(~other, axis=1, kind="stable")  # the others first, in distance order
        return np.take_along_axis(found, order, axis=1)[:, :k]

    def _neighbour_mean(self, Qs: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
        """The (weighted) mean distribution of each query's neighbours (n, c); queries scaled."""
        if self.weights == "uniform":
            return np.asarray(self.D_fit_[neighbours].mean(axis=1))
        out = np.empty((Qs.shape[0], self.D_fit_.shape[1]))
        X = self.index_.X
        for start in range(0, Qs.shape[0], _BLOCK):
            rows = neighbours[start : start + _BLOCK]
            dist = np.sqrt(((X[rows] - Qs[start : start + _BLOCK, None, :]) ** 2).sum(axis=2))
            exact = dist <= 1e-12
            # a neighbour at distance 0 takes all the weight (scikit-learn's rule), shared equally
            w = np.where(exact.any(axis=1, keepdims=True), exact.astype(np.float64), 1.0 / np.maximum(dist, 1e-300))
            w /= w.sum(axis=1, keepdims=True)
            out[start : start + _BLOCK] = np.einsum("nk,nkc->nc", w, self.D_fit_[rows])
        return out

    def _predict(self, X: np.ndarray) -> np.ndarray:
        """Distributions (n, c) for a float64 (n, d) array already validated."""
        Qs = np.ascontiguousarray(self.scaling_.transform(X))
        P = self._neighbour_mean(Qs, self.index_.kneighbors(Qs, int(self.k_)))
        lam = float(self.shrinkage_)
        return (1.0 - lam) * P + lam * self.mean_[None, :] if lam else P

    def __setstate__(self, state: dict[str, Any]) -> None:
        """0.1.x artifacts predate the weights and the shrinkage: uniform, none."""
        state = {"weights": "uniform", "shrinkage": 0.0, **state}
        if "D_fit_" in state:
            mean = np.asarray(state["D_fit_"]).mean(axis=0)
            state = {"shrinkage_": 0.0, "mean_": mean, "k_": state["k"], **state}
        super().__setstate__(state)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The default (the model is the scaled training set and distributions), plus the
        leave-one-out pass: the neighbour indices and two (n, c) prediction arrays."""
        base = super().memory_estimate(shape, params)
        k = max(K_GRID) if params.get("k", "loo") == "loo" else int(params["k"])
        extra = 8 * shape.n * k + 2 * shape.label_bytes + 8 * _BLOCK * k * shape.d
        return MemoryEstimate(base.train_peak_bytes + extra, base.model_bytes)


SPEC = MethodSpec(
    id="aa-knn",
    task="distribution",
    outputs=("distribution",),
    params=AAKNNParams,
    estimator=AAKNN,
    summary="AA-kNN (a baseline): the distance-weighted mean of the k nearest training label distributions, "
    "shrunk towards the training mean by a leave-one-out choice.",
    paper="Baseline. Geng X. Label distribution learning. IEEE Transactions on Knowledge and Data "
    "Engineering 28(7):1734-1748, 2016. doi:10.1109/TKDE.2016.2545658",
    dataset_kind="distribution",
    stages=("index", "leave-one-out"),
)
