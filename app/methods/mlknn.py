"""ML-kNN: multi-label k-nearest neighbours (Zhang & Zhou 2007).

M.-L. Zhang, Z.-H. Zhou, "ML-KNN: A lazy learning approach to multi-label learning", Pattern
Recognition 40(7):2038-2048, 2007; also DMKNN's per-label score model (docs/methods/mlknn.md).

For every label l_j fit learns the prior ``p(l_j)`` and the likelihoods ``p(C | l_j)`` and
``p(C | not l_j)`` of C = 0..K, how many of a training sample's K nearest *other* training
samples have l_j (leave-one-out: a sample is never its own neighbour; its duplicates are). A
query's score is the posterior ``p(l_j | C_j(x))``, which depends on x only through C, so fit
stores a (q, K+1) table and prediction is one neighbour search plus a look-up.

Neighbours are deterministic, **distance ties to the lower training index** (ties at the K-th
neighbour are the norm on binary or sparse data): by default exact up to ``EXACT_MAX_N`` training
rows and above it an approximate index whose sampled recall the fit records (``neighbors``,
``app.methods.neighbours``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy import sparse

from app.methods.base import (
    MAX_NEIGHBOURS,
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    MultiLabelClassifierMixin,
    ProgressFn,
    check_features,
    no_progress,
)
from app.methods.baseline_support import MinMaxOption
from app.methods.fit_warnings import warn_if_constant, warn_if_mostly_empty
from app.methods.label_rules import fill_empty, loo_threshold, nonempty_by_default
from app.methods.neighbours import EXACT_MAX_N, ExactKNN, NeighborSearch, training_graph
from app.methods.numerics import FeatureScaling

#: inner products of one block of the exact neighbour search (``app.methods.neighbours``), for the estimate
_PRODUCT_BLOCK = 1 << 22

__all__ = ["SPEC", "ExactKNN", "MLkNN", "MLkNNParams", "lookup", "neighbour_counts", "posterior_table"]

#: Up to this many (row, neighbour, label) entries, counts are one gather-and-sum.
_GATHER_MAX_ENTRIES = 1 << 16


# ---------------------------------------------------------------------------- ML-kNN tables
def neighbour_counts(Y: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """C (n, q): how many of each row's neighbours carry each label."""
    if neighbours.size * Y.shape[1] <= _GATHER_MAX_ENTRIES:
        return Y[neighbours].sum(axis=1, dtype=np.int64)
    C = np.zeros((neighbours.shape[0], Y.shape[1]), dtype=np.int64)
    for t in range(neighbours.shape[1]):  # loop over the K neighbour ranks, not over samples
        C += Y[neighbours[:, t]]
    return C


def posterior_table(
    indicator: np.ndarray, counts: np.ndarray, k: int, s: float, prior_denominator: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ML-kNN's Bayesian tables for q binary targets (labels, or DMKNN's itemsets).

    ``indicator`` (m, q) is 0/1 whether each training sample is a positive of each target,
    ``counts`` (m, q) its leave-one-out neighbour count C in 0..k. Returns ``(prior, kappa,
    kappa_bar, table)``: prior (q,) = (s + #pos) / prior_denominator; kappa / kappa_bar (q, k+1)
    the frequency vectors of C among positives / negatives; table (q, k+1) the posterior
    p(target | C = c). With s > 0 every entry is finite and strictly inside (0, 1), also for
    targets that are never or always positive.
    """
    m, q = indicator.shape
    width = k + 1
    flat = counts + (np.arange(q) * width)[None, :]
    kappa = np.bincount(flat[indicator.astype(bool)], minlength=q * width).reshape(q, width)
    kappa_bar = np.bincount(flat.ravel(), minlength=q * width).reshape(q, width) - kappa
    prior = (s + kappa.sum(axis=1)) / prior_denominator
    like_pos = (s + kappa) / (s * width + kappa.sum(axis=1))[:, None]
    like_neg = (s + kappa_bar) / (s * width + kappa_bar.sum(axis=1))[:, None]
    p1 = prior[:, None] * like_pos
    p0 = (1.0 - prior)[:, None] * like_neg
    return prior, kappa, kappa_bar, p1 / (p1 + p0)


def lookup(table: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Scores (n, q) = table[j, counts[:, j]], one gather."""
    width = table.shape[1]
    return table.ravel()[counts + (np.arange(table.shape[0]) * width)[None, :]]


# -------------------------------------------------------------------------------- estimator
class MLkNNParams(MethodParams):
    k: int = Field(10, ge=1, le=MAX_NEIGHBOURS, description="Number of nearest neighbours K (at most m - 1).")
    s: float = Field(1.0, gt=0, description="Laplace smoothing of the prior and count likelihoods.")
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set before Euclidean distances."
    )
    threshold: Literal["map", "loo"] = Field(
        "loo",
        description="Label sets: 'map' = posterior > 0.5 (ML-kNN as published); 'loo' = one posterior threshold "
        "maximising micro-F1 of the leave-one-out training predictions.",
    )
    ensure_nonempty: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Give a sample whose label set would be empty its top-scoring label: always, never, or "
        "'auto' = when at most 1% of the training samples have an empty label set.",
    )
    neighbors: NeighborSearch = Field(
        "auto",
        description=f"Neighbour search: 'exact'; 'approximate' (a faiss inverted-file index, its recall measured at fit); 'auto' = "
        f"exact up to {EXACT_MAX_N} training samples, approximate above.",
    )


class MLkNN(MultiLabelClassifierMixin, MinMaxOption, MethodEstimator):
    """ML-kNN (Zhang & Zhou 2007), vectorised, with deterministic neighbours.

    Takes CSR features as they are: min-max scaling of non-negative data keeps them CSR and
    both neighbour searches take CSR (exact search by sparse products), so no dense (n, d)
    copy is made; features with negative values are densified by the scaling.

    Parameters
    ----------
    k : int, default=10
        Number of neighbours K, 1 <= K <= m - 1 for m training samples.
    s : float, default=1.0
        Laplace smoothing, > 0 (1 = Laplace, the paper's setting).
    scale : {"minmax", "none"}, default="minmax"
        ``"minmax"`` scales each feature to [0, 1] on the training set before the Euclidean
        distance (constant features map to 0; test values are not clipped); ``"none"`` uses X
        as given. kNN is scale-sensitive (emotions average precision 0.694 raw vs 0.797
        scaled) and DMKNN, which brings ML-kNN into this service, normalises features before
        its Euclidean neighbourhoods. Zhang & Zhou's reference code does not scale; use
        ``"none"`` on data already in [0, 1] to match it bit for bit.
    threshold : {"loo", "map"}, default="loo"
        How ``predict`` turns posteriors into label sets. ``"map"`` is ML-kNN's own rule,
        posterior > 0.5. ``"loo"`` is one threshold learned on the training set: the one
        maximising the micro-F1 of the leave-one-out training posteriors (docs/methods/mlknn.md).
    ensure_nonempty : {"auto", "on", "off"}, default="auto"
        ``"on"``: a sample whose set would be empty gets its top-scoring label; ``"off"``: never;
        ``"auto"``: on when at most 1% of the training samples have an empty label set.
        ``threshold="map", ensure_nonempty="off"`` is ML-kNN exactly as published.
    neighbors : {"auto", "exact", "approximate"}, default="auto"
        ``"exact"``: exact neighbours (the only search before this option existed, bit for
        bit); ``"approximate"``: an inverted-file index (faiss k-means cells; a row is compared
        with the rows of its nearest cells only) whose candidates are re-ranked by exact
        distance, for fits that grow far slower than m^2 and one-row queries that do not scan
        the training matrix; ``"auto"``: exact up to ``EXACT_MAX_N`` training
        samples, approximate above (the size chosen by measurement, docs/neighbours.md).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    classes_ : list of ndarray
        ``[array([0, 1])] * q``, one per label.
    scaling_ : FeatureScaling
        The feature scaling fitted on the training rows.
    index_ : ExactKNN or ApproximateKNN
        The neighbour index over the scaled training rows.
    neighbour_search_ : {"exact", "approximate"}
        The search ``neighbors`` resolved to for this training set.
    neighbour_recall_ : float or None
        Approximate search: the share of the leave-one-out neighbours of a sample of training
        rows that are true K nearest neighbours (ties count); None for exact search.
    neighbour_query_recall_ : float or None
        Approximate search: the same share for queries of new rows (the index's per-row probes),
        measured on those training rows; None for exact search.
    Y_fit_ : ndarray of shape (m, q), uint8
        Training label sets.
    prior_ : ndarray of shape (q,)
        Smoothed label priors.
    kappa_, kappa_bar_ : ndarray of shape (q, K + 1)
        Frequency vectors of the neighbour count C among positives / negatives.
    posterior_table_ : ndarray of shape (q, K + 1)
        p(l_j | C = c), the whole model at prediction time.
    threshold_ : float
        The posterior threshold in use; ``ensure_nonempty_`` (bool) the fallback in use.
    training_empty_share_ : float
        Share of the labelled training samples whose leave-one-out prediction is empty under
        that rule (above one half the fit warns).

    Examples
    --------
    >>> import numpy as np
    >>> from app.methods.mlknn import MLkNN
    >>> X = np.r_[np.linspace(0, 0.9, 10), np.linspace(2, 2.9, 10)][:, None]
    >>> Y = np.array([[1, 0]] * 10 + [[0, 1]] * 10)
    >>> model = MLkNN(3).fit(X, Y)
    >>> model.predict(np.array([[0.45], [2.45]]))
    array([[1, 0],
           [0, 1]])
    >>> model.decision_function(np.array([[0.45]])).round(3)
    array([[0.917, 0.083]])
    """

    _params_model = MLkNNParams
    accepts_sparse = True
    recorded_attributes = ("neighbour_search_", "neighbour_recall_", "neighbour_query_recall_")

    def __init__(
        self,
        k: int = 10,
        *,
        s: float = 1.0,
        scale: Literal["none", "minmax"] = "minmax",
        threshold: Literal["map", "loo"] = "loo",
        ensure_nonempty: Literal["auto", "on", "off"] = "auto",
        neighbors: NeighborSearch = "auto",
    ) -> None:
        self.k = k
        self.s = s
        self.scale = scale
        self.threshold = threshold
        self.ensure_nonempty = ensure_nonempty
        self.neighbors = neighbors

    def __setstate__(self, state: dict[str, Any]) -> None:
        """0.1.x artifacts predate ``neighbors``: they searched exactly, and load as such."""
        if "neighbors" not in state:
            state = {**state, "neighbors": "exact"}
            if "scaling_" in state:
                state |= {"neighbour_search_": "exact", "neighbour_recall_": None, "neighbour_query_recall_": None}
        super().__setstate__(state)

    # ----------------------------------------------------------------- fitting
    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model keeps the scaled training rows (CSR for sparse features, which min-max
        scaling of non-negative data keeps sparse; else dense float64) and their label sets
        (and, searched approximately, a float32 copy in the index, or a CSR copy of sparse
        rows); the fit also holds the input, the leave-one-out neighbours (n, k) and neighbour
        counts (n, q), a block of at most 2^22 (and n^2) inner products (from sparse features
        also, at once, its partition and the near-ties' two dense blocks of rows of as many
        values, measured on bibtex: 32 bytes per entry), and, searched approximately, the
        cell-ordered float32 rows of the leave-one-out pass (n (d + 1))."""
        k = int(params.get("k", 10))
        features = shape.feature_bytes(cls.accepts_sparse)
        model = features + 8 * shape.n + shape.n * shape.q + 8 * 4 * shape.q * (k + 1)
        search = params.get("neighbors", "auto")
        approximate = search == "approximate" or (search == "auto" and shape.n > EXACT_MAX_N)
        if approximate:
            model += features if shape.nnz is not None else 4 * shape.n * shape.d
        block = min(_PRODUCT_BLOCK, shape.n * shape.n)
        peak = (
            2 * features  # the input and its validated copy
            + shape.label_bytes
            + model
            + 8 * shape.n * (k + shape.q)
            + (8 if shape.nnz is None else 32) * block
            + (4 * shape.n * (shape.d + 1) if approximate else 0)
        )
        return MemoryEstimate(peak, model)

    @classmethod
    def sample_bounds(cls, params: Mapping[str, Any]) -> dict[str, int]:
        """K <= m - 1: a training sample is never its own neighbour."""
        return {"k": 1}

    def _fit(self, Xs: np.ndarray, Yf: np.ndarray, progress: ProgressFn) -> None:
        """Learn the priors, count likelihoods and label-set rule."""
        Y = Yf.astype(np.uint8)
        progress("neighbours", 0.0)
        neighbours = self._fit_tables(Xs, Y, progress)
        self._fit_rule(Y, lookup(self.posterior_table_, neighbour_counts(self.Y_fit_, neighbours)))
        progress("counts", 1.0)

    def _fit_rule(self, Y: np.ndarray, loo_scores: np.ndarray) -> None:
        """The label-set rule from the leave-one-out training posteriors, and the fit's warnings."""
        self.threshold_ = loo_threshold(loo_scores, Y) if self.threshold == "loo" else 0.5
        self.ensure_nonempty_ = self.ensure_nonempty == "on" or (
            self.ensure_nonempty == "auto" and nonempty_by_default(Y)
        )
        loo_sets = self._label_sets(loo_scores, self.threshold_)
        what = f"the rule posterior > {self.threshold_:.3g}"
        self.training_empty_share_ = warn_if_mostly_empty(Y, loo_sets, "mlknn", what, stacklevel=5)
        warn_if_constant(loo_scores, "mlknn", "label posterior of the training samples", stacklevel=5)

    def _label_sets(self, scores: np.ndarray, threshold: float) -> np.ndarray:
        Yhat = (scores > threshold).astype(np.int64)
        return fill_empty(Yhat, scores) if self.ensure_nonempty_ else Yhat

    def fit_scaled(self, Xs: np.ndarray, Y: np.ndarray, include_self: bool = False) -> np.ndarray:
        """Fit the tables on features the caller has already scaled; returns the training
        neighbours (m, K).

        DMKNN calls this so that its label model and its itemset model share one neighbourhood
        graph. ``Xs`` is dense or CSR (kept CSR). ``Y`` must already be 0/1. ``include_self=True`` makes each training sample its
        own first neighbour followed by its K-1 nearest others (what scikit-multilearn does by
        default; one of DMKNN's readings); ML-kNN proper (the default) leaves it out.
        """
        self.check_sample_counts(self._validated_params().model_dump(), Xs.shape[0])
        self.scaling_ = FeatureScaling.identity(Xs.shape[1])
        self.n_features_in_ = Xs.shape[1]
        rows = (
            sparse.csr_matrix(Xs, dtype=np.float64)
            if sparse.issparse(Xs)
            else np.ascontiguousarray(Xs, dtype=np.float64)
        )
        return self._fit_tables(rows, Y, no_progress, include_self)

    def _fit_tables(
        self, Xs: np.ndarray, Y: np.ndarray, progress: ProgressFn, include_self: bool = False
    ) -> np.ndarray:
        k = int(self.k)
        m = Xs.shape[0]
        # include_self: each row is its own first neighbour, then its k - 1 nearest others
        graph = training_graph(
            Xs, max(1, k - 1) if include_self else k, self.neighbors, lambda f: progress("neighbours", 0.9 * f)
        )
        self.index_ = graph.index
        self.neighbour_search_ = graph.search
        self.neighbour_recall_ = graph.recall
        self.neighbour_query_recall_ = graph.query_recall
        self.Y_fit_ = np.ascontiguousarray(Y, dtype=np.uint8)
        self._set_classes(Y.shape[1])
        if include_self:
            own = np.arange(m)[:, None]
            neighbours = np.hstack([own, graph.neighbours]) if k > 1 else own
        else:
            neighbours = graph.neighbours
        progress("counts", 0.9)
        counts = neighbour_counts(self.Y_fit_, neighbours)
        self.prior_, self.kappa_, self.kappa_bar_, self.posterior_table_ = posterior_table(
            self.Y_fit_, counts, k, float(self.s), 2.0 * self.s + m
        )
        return neighbours

    # -------------------------------------------------------------- prediction
    def kneighbors(self, X: np.ndarray) -> np.ndarray:
        """The K nearest training rows of each row of (unscaled) X, ties by lower index."""
        return self._kneighbors(check_features(self, X))

    def _kneighbors(self, X: np.ndarray) -> np.ndarray:
        return self.index_.kneighbors(self.scaling_.transform(X), int(self.k))

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Posteriors p(l_j | C_j(x)) (n, q), in (0, 1); higher = more relevant."""
        return self._decision_function(check_features(self, X))

    def _decision_function(self, X: np.ndarray) -> np.ndarray:
        return lookup(self.posterior_table_, neighbour_counts(self.Y_fit_, self._kneighbors(X)))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Same as ``decision_function``: ML-kNN's scores are posterior probabilities."""
        return self.decision_function(X)

    def predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        """0/1 label sets: posterior > ``threshold`` (default: the fitted ``threshold_``, 0.5 under
        ML-kNN's own rule), then the never-empty fallback when ``ensure_nonempty_``."""
        return self._predict(check_features(self, X), threshold)

    def _predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        t = self.threshold_ if threshold is None else float(threshold)
        return self._label_sets(self._decision_function(X), t)


SPEC = MethodSpec(
    id="mlknn",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=MLkNNParams,
    estimator=MLkNN,
    summary="ML-kNN: per-label Bayesian posterior from how many of the K nearest training samples "
    "carry the label (leave-one-out counts, Laplace smoothing); labels whose posterior beats a threshold learned "
    "on the leave-one-out training posteriors (0.5 in the published reading).",
    paper="Zhang M.-L., Zhou Z.-H. ML-KNN: A lazy learning approach to multi-label learning. "
    "Pattern Recognition 40(7):2038-2048, 2007. doi:10.1016/j.patcog.2006.12.019",
    stages=("neighbours", "counts"),
)
