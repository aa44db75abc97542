"""ELCFS: multi-label feature selection with cluster-enhanced label-correlation learning.

Teng Shaohua, Lu Jianlei, Teng Luyao, Zhang Wei, "Multi-label feature selection method with
enhanced learning of label correlations" (增强学习标签相关性的多标签特征选择方法), Application
Research of Computers 41(7):2079-2086, 2024. The source text lost its display equations; the model
below is a reconstruction from the prose and equation (15), explained in docs/methods/elcfs.md.

With K-means cluster representatives stacked in H (mean features) and T (mean label vectors),
ELCFS solves over W >= 0 (d x q, features onto labels) and Z >= 0 (q x q, label correlations)

    min ||XW - YZ||^2 + l1 ||HW - TZ||^2 + l2 (||YZ - Y||^2 + ||TZ - T||^2)
        + l3 ||Z||_{2,1} + l4 ||W||_{2,1}

by the paper's multiplicative updates (re-weighted l2,1 norms, Gram matrices computed once, so an
iteration's cost does not depend on n), and ranks features by the l2 norms of the rows of W.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import Field
from sklearn.cluster import KMeans

from app.methods.base import (
    InvalidParameterError,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    RankedSelectorMixin,
)
from app.methods.fit_warnings import ConvergenceWarning, warn_if_constant
from app.methods.numerics import FeatureScaling

_DELTA = 1e-12  # guards zero denominators of the multiplicative updates (not in the paper)


class ELCFSParams(MethodParams):
    """Hyperparameters of ELCFS. The paper tunes l1..l4 in {0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}."""

    lambda1: float = Field(0.1, ge=0, description="Weight of the cluster-centre regression ||HW - TZ||^2.")
    lambda2: float = Field(0.1, ge=0, description="Weight of both label self-representation terms.")
    lambda3: float = Field(0.1, ge=0, description="l2,1 row sparsity of the label-correlation matrix Z.")
    lambda4: float = Field(0.1, ge=0, description="l2,1 row sparsity of the projection W (feature selection).")
    n_clusters: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="K-means clusters; None = number of labels q (the paper writes 'q clusters').",
    )
    zero_diag_z: bool = Field(
        False,
        description="Start Z with a zero diagonal (kept at 0 by the multiplicative updates) so a label "
        "is represented only by the other labels and Z = I is excluded (off = literal objective).",
    )
    cluster_terms: bool = Field(
        True, description="False drops ||HW - TZ|| and ||TZ - T||: the paper's ablation, eq. (22)."
    )
    scale: bool = Field(
        True,
        description="Min-max scale features to [0, 1] on the training data (the updates need X >= 0).",
    )
    ratio: float = Field(
        0.2,
        gt=0,
        le=1,
        description="Fraction of features kept by transform / get_support() (paper: top 20%).",
    )
    max_iter: int = Field(
        300,
        ge=1,
        le=1_000_000,
        description="Iteration cap (each iteration a few products of the n x d and n x q data).",
    )
    tol: float = Field(1e-5, ge=0, description="Stop when the objective's relative change falls below tol.")
    eps: float = Field(1e-8, gt=0, description="Smoothing in the l2,1 re-weighting sqrt(||row||^2 + eps).")
    kmeans_n_init: int = Field(10, ge=1, le=100, description="K-means++ restarts.")
    random_state: int | None = Field(0, description="Seed of K-means and of the uniform(0,1) initial W, Z.")


class ELCFS(RankedSelectorMixin, MethodEstimator):
    """Embedded multi-label feature selector with cluster-enhanced label correlations.

    Parameters
    ----------
    lambda1 : float, default=0.1
        Weight of the cluster-centre regression ||HW - TZ||^2.
    lambda2 : float, default=0.1
        Weight of both label self-representation terms.
    lambda3 : float, default=0.1
        l2,1 row sparsity of the label-correlation matrix Z.
    lambda4 : float, default=0.1
        l2,1 row sparsity of the projection W (the feature selection term).
    n_clusters : int or None, default=None
        K-means clusters; None = the number of labels q (the paper writes "q clusters").
    zero_diag_z : bool, default=False
        Start Z with a zero diagonal (kept at 0 by the multiplicative updates) so a label is
        represented only by the other labels and the trivial Z = I is excluded; off is the
        objective as written.
    cluster_terms : bool, default=True
        False drops ||HW - TZ|| and ||TZ - T||: the paper's ablation, eq. (22).
    scale : bool, default=True
        Min-max scale features to [0, 1] on the training data (the multiplicative updates
        need X >= 0; constant features map to 0).
    ratio : float, default=0.2
        Fraction of features kept by ``transform`` / ``get_support()`` (paper: top 20%).
    max_iter : int, default=300
        Iteration cap.
    tol : float, default=1e-5
        Stop when the objective's relative change falls below tol.
    eps : float, default=1e-8
        Smoothing in the l2,1 re-weighting sqrt(||row||^2 + eps).
    kmeans_n_init : int, default=10
        K-means++ restarts.
    random_state : int or None, default=0
        Seed of K-means and of the uniform(0, 1) initial W, Z.

    Attributes
    ----------
    feature_scores_ : ndarray of shape (d,)
        Row norms of W.
    ranking_ : ndarray of shape (d,)
        Feature indices best first (ties by lower index).
    W_ : ndarray of shape (d, q)
        The projection.
    Z_ : ndarray of shape (q, q)
        The label self-representation.
    cluster_centers_ : ndarray of shape (k, d)
        H, on the scaled features.
    cluster_labels_ : ndarray of shape (k, q)
        T, the clusters' mean label vectors.
    cluster_assignment_ : ndarray of shape (n,)
        Cluster of each training sample.
    objective_ : ndarray
        Monitored objective before the first and after every iteration (non-increasing).
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether ``tol`` was reached before ``max_iter``.
    scaling_ : FeatureScaling
        The min-max scaling of the training features.
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from app.methods.elcfs import ELCFS
    >>> rng = np.random.default_rng(0)
    >>> Y = rng.integers(0, 2, size=(30, 2))
    >>> X = np.hstack([Y + 0.1 * rng.random((30, 2)), rng.random((30, 3))])
    >>> selector = ELCFS(ratio=0.4, max_iter=50).fit(X, Y)
    >>> sorted(selector.top_features().tolist())
    [0, 1]
    >>> selector.transform(X).shape
    (30, 2)
    """

    _params_model = ELCFSParams

    def __init__(
        self,
        lambda1: float = 0.1,
        *,
        lambda2: float = 0.1,
        lambda3: float = 0.1,
        lambda4: float = 0.1,
        n_clusters: int | None = None,
        zero_diag_z: bool = False,
        cluster_terms: bool = True,
        scale: bool = True,
        ratio: float = 0.2,
        max_iter: int = 300,
        tol: float = 1e-5,
        eps: float = 1e-8,
        kmeans_n_init: int = 10,
        random_state: int | None = 0,
    ) -> None:
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.lambda3 = lambda3
        self.lambda4 = lambda4
        self.n_clusters = n_clusters
        self.zero_diag_z = zero_diag_z
        self.cluster_terms = cluster_terms
        self.scale = scale
        self.ratio = ratio
        self.max_iter = max_iter
        self.tol = tol
        self.eps = eps
        self.kmeans_n_init = kmeans_n_init
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    @classmethod
    def sample_bounds(cls, params: Mapping[str, Any]) -> dict[str, int]:
        """A given ``n_clusters``: at most n (one a training row is k-means' limiting case)."""
        return {} if params["n_clusters"] is None else {"n_clusters": 0}

    def _check_data_params(self, X: np.ndarray, Y: np.ndarray) -> None:
        if self.n_clusters is None and Y.shape[1] > X.shape[0]:
            raise InvalidParameterError.bound(
                type(self), "n_clusters", f"None is q = {Y.shape[1]} clusters, more than the {X.shape[0]} samples"
            )
        if not self.scale and (X < 0).any():
            raise ValueError("X has negative entries; the multiplicative updates need X >= 0 (use scale=True)")

    def _fit_scaling(self, X: np.ndarray) -> FeatureScaling:
        # constant features carry no information: they map to 0
        return FeatureScaling.minmax(X, constant="zero") if self.scale else FeatureScaling.identity(X.shape[1])

    def _fit(self, Xs: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        """Cluster, then run the multiplicative updates until ``tol`` or ``max_iter``."""
        n, d = Xs.shape
        q = Y.shape[1]

        progress("clustering", 0.0)
        H, T, assign = self._cluster(Xs, Y)
        self.cluster_centers_, self.cluster_labels_, self.cluster_assignment_ = H, T, assign

        grams = self._grams(Xs, Y, H, T)
        rng = np.random.default_rng(self.random_state)
        W = rng.uniform(size=(d, q))
        Z = rng.uniform(size=(q, q))
        if self.zero_diag_z:
            np.fill_diagonal(Z, 0.0)

        progress("iterations", 0.0)
        objective, GW, BZ = self._objective(grams, W, Z)
        history = [objective]
        self.converged_ = False
        it = 0
        for it in range(1, self.max_iter + 1):
            W = self._update_w(W, GW, BZ)
            Z = self._update_z(grams, W, Z)
            objective, GW, BZ = self._objective(grams, W, Z)
            history.append(objective)
            progress("iterations", it / self.max_iter)
            prev = history[-2]
            if abs(prev - objective) / max(abs(prev), 1e-12) < self.tol:
                self.converged_ = True
                break
        progress("iterations", 1.0)
        if not self.converged_:
            warnings.warn(
                f"elcfs: stopped at max_iter={self.max_iter} with the objective still changing by more than "
                f"tol={self.tol:g} per iteration (raise max_iter or tol)",
                ConvergenceWarning,
                stacklevel=3,
            )

        self.W_, self.Z_ = W, Z
        self.objective_ = np.asarray(history)
        self.n_iter_ = it
        self.feature_scores_ = np.sqrt((W * W).sum(axis=1))
        warn_if_constant(self.feature_scores_, "elcfs", "feature score (row norm of W)", stacklevel=4)
        self.ranking_ = np.argsort(-self.feature_scores_, kind="stable")

    def _cluster(self, Xs: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """K-means on the scaled features; centres' features and labels are member means."""
        n = Xs.shape[0]
        k = Y.shape[1] if self.n_clusters is None else self.n_clusters
        km = KMeans(n_clusters=k, init="k-means++", n_init=self.kmeans_n_init, random_state=self.random_state)
        assign = km.fit_predict(Xs)
        # Member means (eqs. (1), (2)); clusters that ended empty are dropped.
        used, assign = np.unique(assign, return_inverse=True)
        counts = np.bincount(assign, minlength=used.size).astype(np.float64)
        onehot = np.zeros((n, used.size))
        onehot[np.arange(n), assign] = 1.0
        H = (onehot.T @ Xs) / counts[:, None]
        T = (onehot.T @ Y) / counts[:, None]
        return H, T, assign

    def _grams(self, Xs: np.ndarray, Y: np.ndarray, H: np.ndarray, T: np.ndarray) -> dict[str, np.ndarray | float]:
        """G_X = X'X + l1 H'H, B = X'Y + l1 H'T, G_Y = (1+l2) Y'Y + (l1+l2) T'T, C = l2 (Y'Y + T'T).

        With ``cluster_terms=False`` every H/T product is dropped (eq. (22)).
        """
        l1, l2 = float(self.lambda1), float(self.lambda2)
        YY = Y.T @ Y
        if self.cluster_terms:
            TT = T.T @ T
            GX = Xs.T @ Xs + l1 * (H.T @ H)
            B = Xs.T @ Y + l1 * (H.T @ T)
        else:
            TT = np.zeros_like(YY)
            l1 = 0.0
            GX = Xs.T @ Xs
            B = Xs.T @ Y
        return {
            "GX": GX,
            "B": B,
            "GY": (1.0 + l2) * YY + (l1 + l2) * TT,
            "C": l2 * (YY + TT),
            "const": l2 * (np.trace(YY) + np.trace(TT)),
        }

    def _reweight(self, M: np.ndarray) -> np.ndarray:
        """Diagonal of the l2,1 re-weighting matrix: 1 / (2 sqrt(||row||^2 + eps))."""
        return 0.5 / np.sqrt((M * M).sum(axis=1) + self.eps)

    def _w_terms(self, W: np.ndarray, GW: np.ndarray, BZ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Numerator and denominator of eq. (16): X'YZ + l1 H'TZ and X'XW + l1 H'HW + 2 l4 U W.

        ``GW`` = G_X W and ``BZ`` = B Z for the current W, Z (left over from the objective
        evaluation, so the d x d product is formed once per iteration). den - num is half the
        gradient of the monitored objective with respect to W.
        """
        return BZ, GW + (2.0 * self.lambda4) * self._reweight(W)[:, None] * W

    def _z_terms(self, g: dict, W: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Numerator and denominator of eq. (21): Y'XW + l1 T'HW + l2 Y'Y + l2 T'T and G_Y Z + 2 l3 V Z."""
        num = g["B"].T @ W + g["C"]
        return num, g["GY"] @ Z + (2.0 * self.lambda3) * self._reweight(Z)[:, None] * Z

    def _update_w(self, W: np.ndarray, GW: np.ndarray, BZ: np.ndarray) -> np.ndarray:
        """Multiplicative W step, eq. (16)."""
        num, den = self._w_terms(W, GW, BZ)
        return W * (num / (den + _DELTA))

    def _update_z(self, g: dict, W: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Multiplicative Z step, eq. (21) (a zero entry, e.g. the diagonal with zero_diag_z, stays zero)."""
        num, den = self._z_terms(g, W, Z)
        return Z * (num / (den + _DELTA))

    def _objective(self, g: dict, W: np.ndarray, Z: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Monitored objective (the one the updates decrease) in Gram form; also returns G_X W and B Z."""
        GW = g["GX"] @ W
        BZ = g["B"] @ Z
        data = np.vdot(W, GW) - 2.0 * np.vdot(W, BZ) + np.vdot(Z, g["GY"] @ Z) - 2.0 * np.vdot(Z, g["C"]) + g["const"]
        reg = 2.0 * self.lambda3 * np.sqrt((Z * Z).sum(axis=1) + self.eps).sum()
        reg += 2.0 * self.lambda4 * np.sqrt((W * W).sum(axis=1) + self.eps).sum()
        return float(data + reg), GW, BZ

    # ------------------------------------------------------------------ selection
    def _default_count(self, d: int) -> int:
        """Features kept by default: max(1, round(ratio * d))."""
        return max(1, int(round(self.ratio * d)))


SPEC = MethodSpec(
    id="elcfs",
    task="selection",
    outputs=("features",),
    params=ELCFSParams,
    estimator=ELCFS,
    summary="Multi-label feature selection with K-means-enhanced label-correlation learning "
    "(non-negative l2,1-sparse projection onto a self-represented label space; "
    "features ranked by row norms of W).",
    paper="Teng S., Lu J., Teng L., Zhang W. Multi-label feature selection method with enhanced learning of "
    "label correlations. Application Research of Computers 41(7):2079-2086, 2024. "
    "doi:10.19734/j.issn.1001-3695.2023.11.0550",
    stages=("clustering", "iterations"),
)
