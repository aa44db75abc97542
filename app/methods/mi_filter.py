"""MI filter: features ranked by their mutual information with the labels, summed over labels.

The reference filter of multi-label feature selection: score(f) = sum_j I(x_f; y_j), features
ranked best first (ties by the lower index); a label constant in the training data carries no
information (I = 0) and is skipped. Two estimators of I:

* ``"knn"``: scikit-learn's ``mutual_info_classif`` (Kraskov-style nearest-neighbour estimate,
  seeded jitter, hence ``random_state``); it costs n log n per feature and label and densifies
  sparse features (scikit-learn treats a sparse matrix's features as discrete).
* ``"binned"``: each feature cut into ``n_bins`` equal-frequency bins, plug-in mutual information
  from the counts: exact for the binned data, deterministic, far cheaper; reads CSR a column at a time.

``"auto"`` (the default) takes ``"knn"`` unless its predicted cost passes ``KNN_MAX_SECONDS``, and
then ``"binned"``, saying so in a warning kept on the model version. The prediction and the sets
it bins are measured in docs/methods/mi-filter.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy import sparse
from sklearn.feature_selection import mutual_info_classif

from app.methods.base import (
    MAX_NEIGHBOURS,
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    RankedSelectorMixin,
    constant_labels,
)

#: predicted CPU seconds of the ``knn`` estimator above which ``"auto"`` bins instead
KNN_MAX_SECONDS = 30.0
#: CPU seconds of ``mutual_info_classif`` per feature and label at n = 2000 (docs/methods/mi-filter.md)
KNN_SECONDS_PER_FEATURE_LABEL = 5.3e-3


def knn_seconds(n: int, d: int, q: int) -> float:
    """Predicted CPU seconds of the ``knn`` estimator on n rows, d features and q varying labels."""
    return KNN_SECONDS_PER_FEATURE_LABEL * d * q * (n / 2000) ** 0.9


class SlowEstimatorWarning(UserWarning):
    """``estimator="auto"`` chose the binned estimator because the knn one would take too long."""


class MIFilterParams(MethodParams):
    estimator: Literal["auto", "knn", "binned"] = Field(
        "auto",
        description="'knn': scikit-learn's mutual_info_classif; 'binned': plug-in MI on quantile bins (fast); "
        f"'auto': knn unless its predicted cost exceeds {KNN_MAX_SECONDS:g} CPU s, then binned (with a warning).",
    )
    n_neighbors: int = Field(3, ge=1, le=MAX_NEIGHBOURS, description="Neighbours of the 'knn' estimator.")
    n_bins: int = Field(5, ge=2, le=256, description="Equal-frequency bins per feature of the 'binned' estimator.")
    ratio: float = Field(0.2, gt=0, le=1, description="Fraction of features kept by transform / get_support().")
    random_state: int | None = Field(0, description="Seed of the 'knn' estimator's jitter.")


def binned_codes(X: Any, n_bins: int) -> np.ndarray:
    """Equal-frequency bin codes (n, d), interior quantiles as edges with duplicates merged
    (``X`` dense, or sparse: then read one dense column at a time)."""
    qs = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    codes = np.empty(X.shape, dtype=np.int64)
    columns = sparse.csc_matrix(X) if sparse.issparse(X) else None
    for f in range(X.shape[1]):
        x = X[:, f] if columns is None else columns[:, [f]].toarray().ravel()
        edges = np.unique(np.quantile(x, qs))
        codes[:, f] = np.searchsorted(edges, x, side="left")
    return codes


def binned_mi(codes: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(d, q) plug-in mutual information (nats) between each binned feature and each 0/1 label."""
    n = Y.shape[0]
    p1 = Y.mean(axis=0)
    py = np.stack([1.0 - p1, p1])  # (2, q)
    out = np.zeros((codes.shape[1], Y.shape[1]))
    for f in range(codes.shape[1]):
        onehot = np.zeros((n, int(codes[:, f].max()) + 1))
        onehot[np.arange(n), codes[:, f]] = 1.0
        count = onehot.sum(axis=0)
        c1 = onehot.T @ Y
        joint = np.stack([count[:, None] - c1, c1]) / n  # (2, bins, q)
        expected = (count / n)[None, :, None] * py[:, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f] = np.where(joint > 0, joint * np.log(joint / expected), 0.0).sum(axis=(0, 1))
    return out


class MIFilter(RankedSelectorMixin, MethodEstimator):
    """Summed label mutual information filter; parameters as :class:`MIFilterParams`.

    Fitted attributes: ``estimator_`` the estimator used, ``feature_scores_`` (d,), ``ranking_`` (d,) best first,
    ``mutual_information_`` (d, q) per label (0 for constant labels), ``n_features_in_``.
    """

    _params_model = MIFilterParams
    accepts_sparse = True
    recorded_attributes = ("estimator_",)

    def __init__(
        self,
        *,
        estimator: Literal["auto", "knn", "binned"] = "auto",
        n_neighbors: int = 3,
        n_bins: int = 5,
        ratio: float = 0.2,
        random_state: int | None = 0,
    ) -> None:
        self.estimator = estimator
        self.n_neighbors = n_neighbors
        self.n_bins = n_bins
        self.ratio = ratio
        self.random_state = random_state

    def _fit(self, X: Any, Y: np.ndarray, progress: ProgressFn) -> None:
        q = Y.shape[1]
        varying, _ = constant_labels(Y)
        mi = np.zeros((X.shape[1], q))
        self.estimator_ = self.estimator
        if self.estimator == "auto":
            predicted = knn_seconds(X.shape[0], X.shape[1], int(varying.sum()))
            self.estimator_ = "knn" if predicted <= KNN_MAX_SECONDS else "binned"
            if self.estimator_ == "binned":
                warnings.warn(
                    f"mi-filter: the knn estimator was predicted to take {predicted:.0f} CPU s (more than "
                    f"{KNN_MAX_SECONDS:g}), so the binned estimator was used; estimator='knn' forces it",
                    SlowEstimatorWarning,
                    stacklevel=3,
                )
        if self.estimator_ == "binned":
            progress("mutual information", 0.0)
            mi[:, varying] = binned_mi(binned_codes(X, self.n_bins), Y[:, varying])
        else:
            X = X.toarray() if sparse.issparse(X) else X
            for j in np.flatnonzero(varying):
                progress("mutual information", j / q)
                mi[:, j] = mutual_info_classif(
                    X, Y[:, j].astype(np.int8), n_neighbors=self.n_neighbors, random_state=self.random_state
                )
        progress("mutual information", 1.0)
        self.mutual_information_ = mi
        self.feature_scores_ = mi.sum(axis=1)
        self.ranking_ = np.argsort(-self.feature_scores_, kind="stable")

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model is the (d, q) mutual information; the fit holds the input, the (n, d) int64
        bin codes or the dense copy the ``knn`` estimator needs (and its jittered copy), the targets
        and, per feature, an (n, bins) one-hot matrix."""
        model = 8 * shape.d * (shape.q + 3)
        x = shape.feature_bytes(True)
        estimator = params.get("estimator", "auto")
        if estimator == "auto":
            estimator = "knn" if knn_seconds(shape.n, shape.d, shape.q) <= KNN_MAX_SECONDS else "binned"
        if estimator == "binned":
            work = shape.dense_bytes + 8 * shape.n * int(params.get("n_bins", 5)) * 2
        else:
            work = 2 * shape.dense_bytes + 8 * 16 * shape.n
        return MemoryEstimate(x + work + shape.label_bytes + model, model)

    def _default_count(self, d: int) -> int:
        """Features kept by default: max(1, round(ratio * d))."""
        return max(1, int(round(self.ratio * d)))


SPEC = MethodSpec(
    id="mi-filter",
    task="selection",
    outputs=("features",),
    params=MIFilterParams,
    estimator=MIFilter,
    summary="Mutual-information filter (a baseline): features ranked by the sum over labels of their "
    "mutual information with the label (scikit-learn's mutual_info_classif, or binned).",
    paper="Baseline. Kraskov A., Stoegbauer H., Grassberger P. Estimating mutual information. "
    "Physical Review E 69:066138, 2004 (the estimator of mutual_info_classif).",
    stages=("mutual information",),
)
