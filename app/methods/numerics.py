"""Numerical building blocks shared by several methods: feature scaling and the row-block runner.

What legitimately differs between the methods is an explicit option (the treatment of constant
features); nothing else does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from joblib import Parallel, delayed
from scipy import sparse

#: What a scaling does with a feature that is constant on the training data.
#: ``"zero"``: the feature maps to 0 for training *and* test rows, so it can never move a
#: distance (the kNN methods: a feature without spread carries no neighbourhood information).
#: ``"keep"``: the feature is only shifted (scale 1), so a test value that differs from the
#: training constant keeps its deviation (TRANS-OVK, whose kernels see the test values).
ConstantFeatures = Literal["zero", "keep"]


@dataclass(frozen=True)
class FeatureScaling:
    """A per-feature affine map ``(X - offset) / scale`` fitted on training data.

    Columns flagged in ``zeroed`` map to 0 whatever the input. Test values outside the
    training range are not clipped. Instances are immutable and picklable (they are stored in
    the fitted estimators).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 5.0], [2.0, 5.0], [4.0, 5.0]])
    >>> FeatureScaling.minmax(X, constant="zero").transform(np.array([[1.0, 7.0]]))
    array([[0.25, 0.  ]])
    >>> FeatureScaling.minmax(X, constant="keep").transform(np.array([[1.0, 7.0]]))
    array([[0.25, 2.  ]])
    """

    offset: np.ndarray
    scale: np.ndarray
    zeroed: np.ndarray

    @classmethod
    def minmax(cls, X: np.ndarray, constant: ConstantFeatures) -> FeatureScaling:
        """Scale every feature to [0, 1] on ``X`` (dense or sparse, whose implicit zeros count);
        ``constant`` says what a constant feature does."""
        lo, hi = _column_extremes(X)
        span = hi - lo
        flat = span == 0
        zeroed = flat if constant == "zero" else np.zeros_like(flat)
        return cls(lo, np.where(flat, 1.0, span), zeroed)

    @classmethod
    def zscore(cls, X: np.ndarray, constant: ConstantFeatures) -> FeatureScaling:
        """Centre on the training mean and divide by the standard deviation (``constant`` as above)."""
        std = X.std(axis=0)
        flat = std == 0
        zeroed = flat if constant == "zero" else np.zeros_like(flat)
        return cls(X.mean(axis=0), np.where(flat, 1.0, std), zeroed)

    @classmethod
    def identity(cls, d: int) -> FeatureScaling:
        """The map that leaves ``d`` features as they are."""
        return cls(np.zeros(d), np.ones(d), np.zeros(d, dtype=bool))

    def transform(self, X: Any) -> Any:
        """The scaled copy of ``X`` (float64, C order).

        A sparse ``X`` stays sparse (CSR) when the map moves no zero, i.e. every offset is 0, as
        min-max scaling of non-negative data (counts, text) gives: each stored value is divided
        by its column's scale, the same arithmetic as the dense path. Otherwise every zero would
        become a stored value, and the scaled copy is dense.
        """
        if sparse.issparse(X):
            if np.any(self.offset[~self.zeroed] != 0):
                return self.transform(X.toarray())
            Xs = sparse.csr_matrix(X, dtype=np.float64, copy=True)
            Xs.data /= self.scale[Xs.indices]
            if self.zeroed.any():
                Xs.data[self.zeroed[Xs.indices]] = 0.0
                Xs.eliminate_zeros()
            return Xs
        Xs = np.subtract(np.asarray(X, dtype=np.float64), self.offset, order="C")
        Xs /= self.scale  # in place: one temporary less (the same values as ``(X - offset) / scale``)
        if self.zeroed.any():
            Xs[:, self.zeroed] = 0.0
        return Xs


def _column_extremes(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each column's minimum and maximum, of a dense or a sparse matrix."""
    if sparse.issparse(X):
        return np.asarray(X.min(axis=0).toarray()).ravel(), np.asarray(X.max(axis=0).toarray()).ravel()
    return X.min(axis=0), X.max(axis=0)


def run_blocks(
    fn: Callable[[int, int], Any],
    n: int,
    b: int,
    n_jobs: int,
    report: Callable[[float], None],
    consume: Callable[[int, int, Any], None],
) -> None:
    """Apply ``fn(start, stop)`` to consecutive row blocks of ``b`` rows, ``n_jobs`` threads at a
    time, and hand each result to ``consume(start, stop, result)`` in block order.

    NumPy releases the GIL in its element-wise kernels and in BLAS, so threads parallelise the
    heavy part without copying the data. ``consume`` and ``report(fraction_done)`` run in the
    calling thread only, between rounds of ``4 * n_jobs`` blocks: block results are folded in as
    they arrive (memory stays at one round of blocks), and a progress callback may safely raise
    (job cancellation) or touch the database. ``n_jobs=-1`` uses every core.

    Examples
    --------
    >>> out = []
    >>> run_blocks(lambda s, e: e - s, 10, 4, 1, lambda f: None, lambda s, e, r: out.append((s, e, r)))
    >>> out
    [(0, 4, 4), (4, 8, 4), (8, 10, 2)]
    """
    n_jobs = effective_jobs(n_jobs)
    blocks = [(s, min(n, s + b)) for s in range(0, n, b)]
    if n_jobs == 1 or len(blocks) == 1:
        for k, (s, e) in enumerate(blocks):
            consume(s, e, fn(s, e))
            report((k + 1) / len(blocks))
        return
    per_round = 4 * n_jobs
    with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        for r in range(0, len(blocks), per_round):
            group = blocks[r : r + per_round]
            for (s, e), res in zip(group, parallel(delayed(fn)(s, e) for s, e in group)):
                consume(s, e, res)
            report(min(1.0, (r + len(group)) / len(blocks)))


def effective_jobs(n_jobs: int) -> int:
    """The number of threads ``n_jobs`` stands for (``-1`` = every core, at least 1)."""
    return (os.cpu_count() or 1) if n_jobs == -1 else max(1, int(n_jobs))
