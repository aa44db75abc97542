"""LDLKM: label distribution learning based on k-means.

SHAO Dongheng, YANG Wenyuan, ZHAO Hong, "Label distribution learning based on k-means
algorithm" (应用k-means算法实现标记分布学习), CAAI Transactions on Intelligent Systems 2017,
12(3): 325-332, DOI 10.11992/tis.201704024.

A prototype method. Batch (Lloyd) k-means with Euclidean distance splits the training features
into ``k`` clusters (eqs. 2-5); each cluster keeps its feature mean mu_i and the mean u_i of its
members' label distributions. A test sample x is predicted as
``P(x) = sum_b softmax_b(1 / ||x - mu_b||_p) * u_b`` (eqs. 6-9): nearer prototypes weigh more,
and P is a convex combination of distributions, hence one itself. The paper (k = 5,
max_iter = 20, p = 5) applies eq. (8) to raw features, so their scale alone sets how sharp the
weights are; ``standardize`` and ``temperature`` are opt-in extensions whose defaults (off, 1.0)
are the paper's method exactly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from app.methods.base import (
    DistributionLearnerMixin,
    InvalidParameterError,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    check_features,
)
from app.methods.fit_warnings import ConvergenceWarning
from app.methods.numerics import FeatureScaling

#: Rows of D whose sums differ from 1 by more than this are renormalised (rounding in data files).
_ROW_SUM_TOL = 1e-9
#: the smallest normal double: at or above it, 1 / T cannot overflow
_TINY = float(np.finfo(np.float64).tiny)


def _order(p: float | str) -> float:
    """The Minkowski order as a float (``math.inf`` for ``"inf"``), validated."""
    if isinstance(p, str):
        if p.strip().lower() != "inf":
            raise ValueError(f"p must be a number >= 1 or 'inf', got {p!r}")
        return math.inf
    value = float(p)
    if not value >= 1.0:  # also rejects NaN
        raise ValueError(f"p must be >= 1 or 'inf', got {p!r}")
    return value


def _power_inplace(a: np.ndarray, p: float) -> np.ndarray:
    """``a ** p`` for a >= 0, overwriting ``a``. An integer p (the paper's p = 5) uses binary
    exponentiation, a few multiplications instead of one ``pow`` call per element (about 8x
    faster; the same value up to a few ulp)."""
    if p.is_integer() and p <= 64:
        n = int(p)
        base = a.copy()
        n -= 1
        while n:
            if n & 1:
                a *= base
            n >>= 1
            if n:
                base *= base
        return a
    return np.power(a, p, out=a)


# Up to this many (sample, center, feature) differences, distances are computed in one
# broadcast: a prediction of a few rows then costs a handful of NumPy calls instead of several
# per center. Larger inputs loop over the centers, so memory stays one (n, d) array.
_BROADCAST_ELEMENTS = 1 << 16


def minkowski_to_centers(X: np.ndarray, centers: np.ndarray, p: float) -> np.ndarray:
    """Minkowski distances of order ``p`` from every row of X to every center, shape (n, k).

    Vectorised over samples; for large inputs the Python loop runs over the k centers only, so
    the largest temporary is one (n, d) array (an (n, k, d) broadcast only below
    ``_BROADCAST_ELEMENTS``; both give the same values). For 1 < p < inf each difference vector
    is scaled by its largest absolute difference before raising to the power p, so large p and
    large coordinates cannot overflow; the result is the same distance up to rounding, and an
    exact 0 stays an exact 0.
    """
    n, k = X.shape[0], centers.shape[0]
    if n * k * X.shape[1] <= _BROADCAST_ELEMENTS:
        diff = X[:, None, :] - centers[None, :, :]
        return _minkowski(np.abs(diff, out=diff), p)
    T = np.empty((n, k))
    for b in range(k):
        T[:, b] = _minkowski(np.abs(X - centers[b]), p)
    return T


def _minkowski(diff: np.ndarray, p: float) -> np.ndarray:
    """The order-``p`` norms of absolute differences along the last axis (``diff`` is overwritten)."""
    if p == 1.0:
        return diff.sum(axis=-1)
    scale = diff.max(axis=-1)
    if p == math.inf:
        return scale
    # (the test of the minimum first: one reduction is cheaper than building the guarded divisor)
    diff /= scale[..., None] if scale.min() > 0.0 else np.where(scale > 0.0, scale, 1.0)[..., None]
    if p == 2.0:
        norm = np.sqrt(np.einsum("...j,...j->...", diff, diff))
    else:
        norm = np.power(_power_inplace(diff, p).sum(axis=-1), 1.0 / p)
    return norm * scale


def reciprocal_softmax(T: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``1 / T / temperature`` (eqs. 7-8), numerically stable.

    The row maximum of 1/T is subtracted before dividing by the temperature and
    exponentiating, which is exactly eq. (8) and cannot overflow. Where a row
    has a distance of exactly 0 (or so small that 1/T overflows), the limit of eq. (8) as those
    distances go to 0+ is used: the clusters at zero distance share the weight equally and the
    others get 0. No epsilon clamping.
    """
    if T.min() >= _TINY:  # the usual case: every 1/T is finite (no errstate, no limit rows)
        return _softmax_rows(1.0 / T, temperature)
    with np.errstate(divide="ignore", over="ignore"):
        Tp = 1.0 / T
    hit = np.isinf(Tp)
    if not hit.any():  # the usual case: no distance at 0
        return _softmax_rows(Tp, temperature)
    W = np.empty_like(Tp)
    limit_rows = hit.any(axis=1)
    h = hit[limit_rows].astype(float)
    W[limit_rows] = h / h.sum(axis=1, keepdims=True)
    regular = ~limit_rows
    if regular.any():
        W[regular] = _softmax_rows(Tp[regular], temperature)
    return W


def _softmax_rows(Z: np.ndarray, temperature: float) -> np.ndarray:
    """Row softmax of ``Z / temperature``; ``Z`` is overwritten (callers pass a temporary)."""
    Z -= Z.max(axis=1, keepdims=True)
    if temperature != 1.0:
        Z /= temperature
    E = np.exp(Z, out=Z)
    E /= E.sum(axis=1, keepdims=True)
    return E


def _sq_euclidean(Xc: np.ndarray, x_sq: np.ndarray, centers_c: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances (m, k) by the expansion |x|^2 - 2 x.mu + |mu|^2 (eq. 3).

    Callers pass data centred on the training mean, which keeps the expansion accurate.
    """
    D2 = x_sq[:, None] - 2.0 * (Xc @ centers_c.T) + np.einsum("ij,ij->i", centers_c, centers_c)
    np.maximum(D2, 0.0, out=D2)
    return D2


def _has_k_distinct_rows(X: np.ndarray, k: int) -> bool:
    """Whether X has at least k distinct rows.

    Rows with distinct projections on a fixed direction are distinct, so counting distinct
    projections (O(m d)) settles the usual case; only when that count falls short is the exact
    but costlier row-wise ``np.unique`` (a lexicographic sort) needed.
    """
    direction = np.random.default_rng(0).standard_normal(X.shape[1])
    if len(np.unique(X @ direction)) >= k:
        return True
    return len(np.unique(X, axis=0)) >= k


class LDLKMParams(MethodParams):
    k: int = Field(5, ge=1, le=1000, description="Number of clusters (paper: 5).")
    max_iter: int = Field(20, ge=1, le=10_000, description="Maximum k-means iterations (paper: 20).")
    p: Annotated[float, Field(ge=1)] | Literal["inf"] = Field(
        5.0, description="Minkowski order at prediction (paper: 5): a number >= 1 or 'inf'."
    )
    random_state: int | None = Field(
        None, ge=0, lt=2**32, description="Seed for the initial cluster means; null = random."
    )
    standardize: bool = Field(False, description="Extension (not in the paper): z-score features on the training data.")
    temperature: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Extension: softmax temperature on 1/distance; 1.0 is the paper's eq. (8).",
    )

    @field_validator("p", mode="before")
    @classmethod
    def _inf_as_string(cls, value: Any) -> Any:
        """Keep infinity as the JSON-safe string "inf"; reject NaN."""
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("p must be >= 1 or 'inf'")
        if isinstance(value, float) and math.isinf(value) and value > 0:
            return "inf"
        if isinstance(value, str) and value.strip().lower() in {"inf", "infinity"}:
            return "inf"
        return value


class LDLKM(DistributionLearnerMixin, MethodEstimator):
    """Label distribution learning based on k-means (Shao, Yang, Zhao 2017).

    Parameters
    ----------
    k : int, default=5
        Number of clusters (paper: 5). Must not exceed the number of distinct training rows.
    max_iter : int, default=20
        Maximum number of k-means iterations, one assignment plus one update each (paper: 20).
    p : float or "inf", default=5.0
        Minkowski order used at prediction only (paper: 5); a float >= 1 or ``"inf"``
        (Chebyshev). Clustering always uses the Euclidean distance (eq. 3).
    random_state : int or None, default=None
        Seed for the initial choice of k distinct training samples (one initialisation, no
        restarts, as in the paper). ``None`` is not reproducible.
    standardize : bool, default=False
        Extension, off in the paper: z-score the features with the training mean and standard
        deviation (a constant feature gets scale 1) before clustering and prediction.
    temperature : float, default=1.0
        Extension; 1.0 is the paper's eq. (8). Weights are ``softmax(1 / (temperature * T))``:
        below 1 sharpens them towards the nearest prototype, above 1 flattens them towards the
        unweighted mean of the u_b.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (k, d)
        Feature means mu_i, in the (possibly standardized) feature space.
    label_means_ : ndarray of shape (k, c)
        Matrix U of the clusters' mean label distributions.
    labels_ : ndarray of shape (m,)
        Cluster index of each training sample (the final partition).
    cluster_sizes_ : ndarray of shape (k,)
        Members per cluster, all >= 1.
    n_iter_ : int
        Assignment steps run (<= max_iter); when converged, the last one only confirmed that
        nothing moved.
    objective_history_ : ndarray
        Eq. (2) objective E after each update step, in the clustering feature space; never
        increases.
    converged_ : bool
        Whether the assignments stopped changing before max_iter was reached.
    n_empty_fixes_ : int
        How many times the empty-cluster rule moved a sample.
    scaling_ : FeatureScaling
        The standardization (the identity when standardize=False).
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from app.methods.ldlkm import LDLKM
    >>> X = np.array([[0.0], [0.2], [3.0], [3.2]])
    >>> D = np.array([[0.9, 0.1], [0.7, 0.3], [0.2, 0.8], [0.0, 1.0]])
    >>> model = LDLKM(2, random_state=0).fit(X, D)
    >>> model.label_means_[np.argsort(model.cluster_centers_[:, 0])]
    array([[0.8, 0.2],
           [0.1, 0.9]])
    >>> model.predict(np.array([[0.1]])).round(3)
    array([[0.8, 0.2]])
    """

    _params_model = LDLKMParams

    def __init__(
        self,
        k: int = 5,
        *,
        max_iter: int = 20,
        p: float | str = 5.0,
        random_state: int | None = None,
        standardize: bool = False,
        temperature: float = 1.0,
    ) -> None:
        self.k = k
        self.max_iter = max_iter
        self.p = p
        self.random_state = random_state
        self.standardize = standardize
        self.temperature = temperature

    # ------------------------------------------------------------------ fit
    @classmethod
    def sample_bounds(cls, params: Mapping[str, Any]) -> dict[str, int]:
        """At most n clusters (one a training row is k-means' limiting case)."""
        return {"k": 0}

    def _check_data_params(self, X: np.ndarray, D: np.ndarray) -> None:
        k = int(self.k)
        if k > 1 and not _has_k_distinct_rows(X, k):
            raise InvalidParameterError.bound(
                type(self),
                "k",
                f"k={k} exceeds the number of distinct training rows (n_samples = {X.shape[0]}); "
                "empty clusters could not be avoided",
            )

    def _fit_scaling(self, X: np.ndarray) -> FeatureScaling:
        return FeatureScaling.zscore(X, constant="keep") if self.standardize else FeatureScaling.identity(X.shape[1])

    def _fit(self, H: np.ndarray, D: np.ndarray, report: ProgressFn) -> None:
        """Cluster X by batch k-means and store the cluster feature and label means.

        ``D`` is the (m, c) matrix of training label distributions.
        """
        k, max_iter = int(self.k), int(self.max_iter)
        m = H.shape[0]
        report("kmeans", 0.0)
        rng = check_random_state(self.random_state)
        init = rng.choice(m, size=k, replace=False)
        labels, centers = self._lloyd(H, H[init].copy(), max_iter, report)
        if not self.converged_:
            warnings.warn(
                f"ldlkm: k-means stopped at max_iter={max_iter} before its assignments settled; the prototypes are "
                "those of the last iteration (raise max_iter)",
                ConvergenceWarning,
                stacklevel=3,
            )

        self.labels_ = labels
        self.cluster_centers_ = centers
        self.cluster_sizes_ = np.bincount(labels, minlength=k)
        self.label_means_ = self._group_means(D, labels, self.cluster_sizes_)
        report("kmeans", 1.0)

    def _lloyd(
        self, H: np.ndarray, centers: np.ndarray, max_iter: int, report: ProgressFn
    ) -> tuple[np.ndarray, np.ndarray]:
        """Batch k-means from the given initial means (Algorithm steps 2-5).

        Each iteration assigns every sample to its nearest mean (Euclidean, ties to the lowest
        index), repairs empty clusters, and recomputes all means from the new partition. It
        stops when an assignment equals the previous one (then the means would not change:
        the paper's "mean vectors not updated", tested without a tolerance) or after max_iter
        iterations. The returned means are always the means of the returned partition.
        """
        k = centers.shape[0]
        offset = H.mean(axis=0)
        Hc = H - offset
        h_sq = np.einsum("ij,ij->i", Hc, Hc)
        prev: np.ndarray | None = None
        history: list[float] = []
        self.n_empty_fixes_ = 0
        self.converged_ = False
        self.n_iter_ = 0
        for it in range(max_iter):
            self.n_iter_ = it + 1
            D2 = _sq_euclidean(Hc, h_sq, centers - offset)
            labels = self._fix_empty(np.argmin(D2, axis=1), D2, k)
            if prev is not None and np.array_equal(labels, prev):
                self.converged_ = True
                break
            sizes = np.bincount(labels, minlength=k)
            centers = self._group_means(H, labels, sizes)
            # eq. (2) for the new means, by sum |h - mu|^2 = sum |h|^2 - sum_i |C_i| |mu_i|^2
            # on the centred data (no (m, d) temporary)
            mc = centers - offset
            history.append(float(h_sq.sum() - sizes @ np.einsum("ij,ij->i", mc, mc)))
            prev = labels
            report("kmeans", (it + 1) / max_iter)
        self.objective_history_ = np.asarray(history)
        assert prev is not None  # max_iter >= 1: the loop ran at least once
        return prev, centers

    def _fix_empty(self, labels: np.ndarray, D2: np.ndarray, k: int) -> np.ndarray:
        """Singleton rule: refill each empty cluster with the sample farthest from
        its assigned mean, taken from a cluster that keeps at least one member."""
        counts = np.bincount(labels, minlength=k)
        empty = np.flatnonzero(counts == 0)
        if empty.size == 0:
            return labels
        labels = labels.copy()
        far = D2[np.arange(len(labels)), labels].copy()
        for j in empty:
            far_eligible = np.where(counts[labels] > 1, far, -1.0)
            i = int(np.argmax(far_eligible))
            counts[labels[i]] -= 1
            labels[i] = j
            counts[j] = 1
            far[i] = -1.0  # a moved sample is never moved again
            self.n_empty_fixes_ += 1
        return labels

    @staticmethod
    def _group_means(A: np.ndarray, labels: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Per-cluster arithmetic means of the rows of A, as one (k, m) x (m, d) product."""
        member = np.zeros((len(sizes), len(labels)))
        member[labels, np.arange(len(labels))] = 1.0
        return (member @ A) / sizes[:, None]

    def _check_fit_data(self, X: Any, D: Any) -> tuple[np.ndarray, np.ndarray]:
        """Shapes, finiteness, and valid label distributions.

        A row of D that is non-negative but does not sum to 1 (rounding in a data file) is
        renormalised rather than rejected; a row summing to 0 has no distribution and is an
        error.
        """
        X, D = validate_data(self, X, D, multi_output=True, dtype=np.float64, order="C", y_numeric=True)
        D = np.ascontiguousarray(D, dtype=np.float64)
        if D.ndim != 2 or D.shape[1] < 1:
            raise ValueError(f"D must be a 2-D (m, c) matrix of label distributions, got shape {D.shape}")
        if (D < 0).any():
            raise ValueError("label distributions must be non-negative")
        sums = D.sum(axis=1)
        if (sums <= 0).any():
            raise ValueError(f"label distribution row {int(np.argmin(sums))} sums to 0")
        off = np.abs(sums - 1.0) > _ROW_SUM_TOL
        if off.any():
            D = D.copy()
            D[off] /= sums[off, None]
        return X, D

    # -------------------------------------------------------------- predict
    def distances(self, X: Any) -> np.ndarray:
        """Matrix T (n, k) of Minkowski-p distances to the cluster means (eq. 6)."""
        return self._distances(check_features(self, X))

    def _distances(self, X: np.ndarray) -> np.ndarray:
        H = self.scaling_.transform(X) if self.standardize else X
        return minkowski_to_centers(H, self.cluster_centers_, _order(self.p))

    def weights(self, X: Any) -> np.ndarray:
        """Weight matrix W (n, k) of eqs. (7)-(8); rows sum to 1."""
        return self._weights(check_features(self, X))

    def _weights(self, X: np.ndarray) -> np.ndarray:
        return reciprocal_softmax(self._distances(X), float(self.temperature))

    def predict(self, X: Any) -> np.ndarray:
        """Predicted label distributions P = W U (eq. 9), shape (n, c); rows sum to 1."""
        return self._predict(check_features(self, X))

    def _predict(self, X: np.ndarray) -> np.ndarray:
        return self._weights(X) @ self.label_means_


SPEC = MethodSpec(
    id="ldlkm",
    task="distribution",
    outputs=("distribution",),
    params=LDLKMParams,
    estimator=LDLKM,
    summary=(
        "Label distribution learning based on k-means: batch k-means on the features; a test "
        "sample's distribution is the softmax(1/Minkowski distance)-weighted mean of the "
        "clusters' mean label distributions."
    ),
    paper=(
        "SHAO Dongheng, YANG Wenyuan, ZHAO Hong. Label distribution learning based on k-means "
        "algorithm. CAAI Transactions on Intelligent Systems, 2017, 12(3): 325-332. "
        "DOI 10.11992/tis.201704024"
    ),
    dataset_kind="distribution",
    stages=("kmeans",),
)
