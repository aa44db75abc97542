"""RF: scikit-learn's random forest, which handles multi-label targets natively.

``RandomForestClassifier`` fitted on the (n, q) label matrix grows each tree on all labels at
once (a multi-output tree: the split criterion is summed over the labels). A label's score is the
forest's mean leaf frequency of that label; the label set is every label above one threshold
learned on inner out-of-fold scores (``threshold="cv"``, ``app.methods.thresholds``). A label
constant in the training data is a one-class output, scored with that constant. The forest is
grown in batches of trees with ``warm_start`` so that a job can report progress and be
cancelled between batches (the trees are a single ``fit``'s, tested).

Up to ``_FLAT_ROWS`` rows (what a request usually holds) descend all trees at once through their
concatenated node arrays (``_FlatForest``, rebuilt on load, never pickled), one NumPy step per
level, rather than one ``tree_.predict`` call per tree; larger batches, where the compiled walk
wins, call each tree's. Both give ``predict_proba``'s scores (tested); docs/scaling.md times them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field
from scipy import sparse
from sklearn.ensemble import RandomForestClassifier

from app.methods.base import (
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    draw_seed,
)
from app.methods.baseline_support import ProbabilityClassifierMixin
from app.methods.numerics import effective_jobs
from app.methods.thresholds import THRESHOLD_DOC, LearnedThresholdMixin, ThresholdParam

#: trees grown between two progress reports
_BATCH = 25
#: largest number of (row, tree, label) leaf scores gathered at once by the flat walk
_GATHER = 2**22
#: batches of at most this many rows take the flat walk of every tree at once
_FLAT_ROWS = 32


class _FlatForest:
    """The nodes of every tree in one set of arrays; a leaf points to itself (threshold +inf), so
    ``depth`` steps take every row to its leaf in every tree.

    The arrays are allocated once at their final size and filled tree by tree: the leaf scores
    are a quarter of a many-label forest's bytes, and collecting them per tree before
    concatenating held them twice while a model loaded.
    """

    def __init__(self, trees: list[Any], positive: np.ndarray) -> None:
        sizes = np.array([tree.tree_.node_count for tree in trees], dtype=np.intp)
        leaves = np.array([int((tree.tree_.children_left < 0).sum()) for tree in trees], dtype=np.intp)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        leaf_offsets = np.concatenate([[0], np.cumsum(leaves)[:-1]]).astype(np.intp)
        self.roots = offsets
        self.depth = max(tree.tree_.max_depth for tree in trees)
        total = int(sizes.sum())
        self.feature = np.empty(total, dtype=np.intp)
        self.threshold = np.empty(total)
        self.left = np.empty(total, dtype=np.intp)
        self.right = np.empty(total, dtype=np.intp)
        self.leaf_row = np.full(total, -1, dtype=np.intp)
        self.leaf_scores = np.empty((int(leaves.sum()), positive.shape[0]))  # (leaves of all trees, q)
        has = positive >= 0
        cols = np.where(has, positive, 0)[None, :]
        labels = np.arange(positive.shape[0])[None, :]
        for tree, offset, size, first_leaf, n_leaves in zip(trees, offsets, sizes, leaf_offsets, leaves):
            t = tree.tree_
            nodes = slice(offset, offset + size)
            ids = np.arange(offset, offset + size)
            leaf = t.children_left < 0
            self.feature[nodes] = np.where(leaf, 0, t.feature)
            self.threshold[nodes] = np.where(leaf, np.inf, t.threshold)
            self.left[nodes] = np.where(leaf, ids, t.children_left + offset)
            self.right[nodes] = np.where(leaf, ids, t.children_right + offset)
            self.leaf_row[nodes][leaf] = np.arange(first_leaf, first_leaf + n_leaves)
            # (leaves, q) gathers from the (nodes, q, classes) class fractions or counts, never
            # a copy of the leaves' whole value array
            value, rows = t.value, np.flatnonzero(leaf)[:, None]
            total = value[rows, labels, 0]
            for k in range(1, value.shape[2]):
                total += value[rows, labels, k]
            scores = self.leaf_scores[first_leaf : first_leaf + n_leaves]
            np.divide(value[rows, labels, cols], total, out=scores)
            scores[:, ~has] = 0.0

    @property
    def nbytes(self) -> int:
        """The bytes of the arrays (what a loaded forest holds beyond its trees)."""
        arrays = (self.roots, self.feature, self.threshold, self.left, self.right, self.leaf_row, self.leaf_scores)
        return sum(a.nbytes for a in arrays)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """Mean leaf score of each label over the trees (n, q)."""
        n, q, T = X.shape[0], self.leaf_scores.shape[1], self.roots.shape[0]
        X32 = np.asarray(X, dtype=np.float32).astype(np.float64)  # the trees' own rounding
        out = np.empty((n, q))
        step = max(1, _GATHER // max(1, T * q))
        for start in range(0, n, step):
            block = X32[start : start + step]
            rows = np.arange(block.shape[0])[:, None]
            node = np.repeat(self.roots[None, :], block.shape[0], axis=0)
            for _ in range(self.depth):
                node = np.where(
                    block[rows, self.feature[node]] <= self.threshold[node], self.left[node], self.right[node]
                )
            out[start : start + step] = self.leaf_scores[self.leaf_row[node]].sum(axis=1) / T
        return out


def tree_nodes(rows: float, depth: int | None, leaf: int, split_share: float) -> int:
    """The expected node count of one tree grown on ``rows`` distinct rows (a bootstrap sample
    holds about 63.2 % of n), down to ``depth`` levels with ``leaf`` rows at least per leaf.

    Grown out, a tree has ``2 leaves - 1`` nodes, its leaves holding from ``leaf`` to ``2 leaf -
    1`` rows (a node of ``2 leaf`` rows or more can be split), ``(3 leaf - 1) / 2`` on average (on
    bibtex, ``leaf`` 4: 798 nodes measured, 1121 estimated; ``2 rows / leaf - 1`` would be
    1541); the depth does not matter. Under a depth cap the count depends on how the splits
    divide the rows: a node of m rows splits into
    ``m (1 - s)`` and ``m s`` with ``s`` the ``split_share`` (the share of rows a split sends
    aside: one half for dense features; for sparse ones the share of stored values, since a
    split of a sparse feature separates its non-zeros from the rest), and never sends fewer than
    ``leaf`` rows aside. With sparse 0/1 features the trees are a long spine off which small
    branches hang: depth 8 on 4880 rows of 3.7 % density grew about 130 nodes, not the 511 a
    balanced tree has (measured; the estimate was 3.66 times the artifact). Once a node's aside
    part falls under ``leaf`` rows, each further split peels off ``leaf`` rows (closed form);
    above that the count is summed over the (spine steps, aside steps) a node is reached by.
    """
    grown = 2 * max(1, math.ceil(rows / ((3 * leaf - 1) / 2))) - 1
    if depth is None:
        return grown
    aside = min(split_share, 1.0 - split_share)
    keep = 1.0 - aside

    def below(a: int, b: int) -> int:
        """Nodes under the one reached by ``a`` spine and ``b`` aside steps, if it is a leaf or
        its aside part is under ``leaf`` rows (then each split peels off ``leaf`` rows)."""
        m, levels = rows * keep**a * aside**b, depth - a - b
        if levels == 0 or m < 2 * leaf:
            return 1
        return 2 * min(levels, math.floor(m / leaf) - 1) + 1

    if rows * aside < leaf:
        return min(grown, below(0, 0))
    # nodes whose aside part holds ``leaf`` rows or more: m >= limit, so a, b are bounded
    limit = max(2 * leaf, leaf / aside)
    steps = math.log(rows / limit)
    max_a = min(depth, math.ceil(steps / -math.log(keep)) + 1)
    max_b = min(depth, math.ceil(steps / -math.log(aside)) + 1)
    counts: dict[tuple[int, int], int] = {}

    def nodes(a: int, b: int) -> int:
        return counts[a, b] if (a, b) in counts else below(a, b)

    for a in range(max_a, -1, -1):
        for b in range(min(max_b, depth - a), -1, -1):
            m = rows * keep**a * aside**b
            if a + b < depth and m >= limit:
                counts[a, b] = 1 + nodes(a + 1, b) + nodes(a, b + 1)
    return min(grown, 2 ** (min(depth, 62) + 1) - 1, nodes(0, 0))  # a depth past 62 caps nothing


class RFParams(MethodParams):
    n_estimators: int = Field(200, ge=1, le=10_000, description="Number of trees.")
    max_features: Literal["sqrt", "log2"] | Annotated[float, Field(gt=0, le=1)] = Field(
        "sqrt", description="Features tried per split: 'sqrt', 'log2', or a fraction in (0, 1] of d."
    )
    min_samples_leaf: int = Field(1, ge=1, description="Minimum number of training samples in a leaf.")
    max_depth: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Deepest split level of a tree (None: grown until pure or min_samples_leaf). Every node "
        "stores a score per label, so with many labels this and min_samples_leaf bound the model's size.",
    )
    n_jobs: int | None = Field(None, description="Parallel jobs for fitting (None = 1, -1 = all cores).")
    random_state: int | None = Field(0, description="Seed of the bootstrap samples and feature draws.")
    threshold: ThresholdParam = Field("cv", description=THRESHOLD_DOC)


class RandomForest(LearnedThresholdMixin, ProbabilityClassifierMixin, MethodEstimator):
    """Native multi-label random forest; parameters as :class:`RFParams`.

    Fitted attributes: ``n_features_in_``, ``forest_`` (the ``RandomForestClassifier``),
    ``positive_`` (q,) index of class 1 in each output's classes (-1 when the label was never
    present in training).
    """

    _params_model = RFParams
    accepts_sparse = True  # trees are grown on CSC and applied to CSR (float32 either way)

    def __init__(
        self,
        *,
        n_estimators: int = 200,
        max_features: Literal["sqrt", "log2"] | float = "sqrt",
        min_samples_leaf: int = 1,
        max_depth: int | None = None,
        n_jobs: int | None = None,
        random_state: int | None = 0,
        threshold: float | str = "cv",
    ) -> None:
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.max_depth = max_depth
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.threshold = threshold

    def _fit(self, X: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        seed = self.random_state if self.random_state is not None else draw_seed()
        forest = RandomForestClassifier(
            n_estimators=0,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            max_depth=self.max_depth,
            n_jobs=self.n_jobs,
            random_state=seed,
            warm_start=True,
        )
        grown = 0
        while grown < self.n_estimators:
            progress("trees", grown / self.n_estimators)
            grown = min(self.n_estimators, grown + _BATCH)
            forest.set_params(n_estimators=grown)
            forest.fit(X, Y.astype(np.int8))
        progress("trees", 1.0)
        forest.set_params(warm_start=False)
        classes = forest.classes_ if Y.shape[1] > 1 else [forest.classes_]
        self.positive_ = np.array([int(np.flatnonzero(c == 1)[0]) if (c == 1).any() else -1 for c in classes])
        self.forest_ = forest
        self._flat = _FlatForest(forest.estimators_, self.positive_)
        self._learn_threshold(X, Y, progress, seed)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """Every node of every tree stores a 64-byte record and a (q, 2) float64 value array, and
        each tree its q outputs' classes (about 96 bytes a label), so a forest costs trees x
        (nodes x (64 + 16 q) + 96 q) bytes, nodes as ``tree_nodes`` counts them. The fit also
        holds the input, scikit-learn's float32 copy of it, the targets as float64, and while a
        tree grows, its node arrays (reallocated by doubling: up to three times its final size,
        or from the start the 2^(depth+1) - 1 nodes of a depth cap up to 10) per parallel job."""
        trees = int(params.get("n_estimators", 200))
        leaf = int(params.get("min_samples_leaf", 1))
        depth = params.get("max_depth")
        split_share = 0.5 if shape.nnz is None else shape.nnz / max(1, shape.n * shape.d)
        node_bytes = 64 + 16 * shape.q
        tree = tree_nodes(0.632 * shape.n, None if depth is None else int(depth), leaf, split_share) * node_bytes
        tree += 96 * shape.q + 4096
        model = trees * tree
        growing = max(3 * tree, (2 ** (int(depth) + 1) - 1 if depth is not None and depth <= 10 else 0) * node_bytes)
        x32 = 4 * shape.n * shape.d if shape.nnz is None else 8 * shape.nnz + 4 * (shape.d + 1)
        jobs = min(trees, effective_jobs(params.get("n_jobs") or 1))
        peak = model + shape.feature_bytes(True) + x32 + shape.label_bytes + 9 * shape.n * shape.q + jobs * growing
        return MemoryEstimate(peak, model)

    # ----------------------------------------------------------------------- prediction
    def _predict_scores(self, X: Any) -> np.ndarray:
        """Mean leaf frequency of each label (n, q) for a float64 (n, d) array (or CSR matrix)
        already validated."""
        if sparse.issparse(X):
            X32 = sparse.csr_matrix(X, dtype=np.float32)
            X32.sort_indices()
        elif X.shape[0] <= _FLAT_ROWS:
            return self._flat.scores(X)
        else:
            X32 = np.ascontiguousarray(X, dtype=np.float32)
        q = self.positive_.shape[0]
        total = np.zeros((X.shape[0], q))
        has = self.positive_ >= 0
        cols = np.where(has, self.positive_, 0)
        for tree in self.forest_.estimators_:
            # class fractions or counts; (n, max classes) for one output, hence the reshape
            value = tree.tree_.predict(X32).reshape(X.shape[0], q, -1)
            value = value / value.sum(axis=2, keepdims=True)
            total += np.take_along_axis(value, cols[None, :, None], axis=2)[:, :, 0]
        total /= len(self.forest_.estimators_)
        total[:, ~has] = 0.0
        return total

    def derived_nbytes(self) -> int:
        """The flat node arrays (a quarter of a many-label forest's bytes: a score per label of
        every leaf, against the trees' two fractions per label of every node)."""
        return self._flat.nbytes

    def __getstate__(self) -> dict[str, Any]:
        """The flat node arrays are derived from the trees: rebuilt on load, not stored."""
        state = dict(super().__getstate__())
        state.pop("_flat", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuilds the flat node arrays; 0.1.x artifacts predate ``max_depth`` (unbounded trees)."""
        super().__setstate__({"max_depth": None, **state})
        if "forest_" in state:
            self._flat = _FlatForest(self.forest_.estimators_, self.positive_)


SPEC = MethodSpec(
    id="rf",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=RFParams,
    estimator=RandomForest,
    summary="Random forest (a baseline): scikit-learn RandomForestClassifier on the label matrix "
    "(multi-output trees); labels above one threshold learned on inner out-of-fold scores.",
    paper="Baseline. Breiman L. Random forests. Machine Learning 45(1):5-32, 2001. doi:10.1023/A:1010933404324",
    stages=("trees", "threshold"),
)
