"""Neighbour search for the kNN methods (ML-kNN, DMKNN): exact where it is cheap, an
inverted-file index above ``EXACT_MAX_N`` training rows, and one neighbour graph shared within
a selection.

:class:`ExactKNN` is one GEMM over all pairs (fit cost n^2 d). :class:`ApproximateKNN` (faiss
k-means cells of about ``ROWS_PER_LIST`` rows) is exact within the rows it searches: the fit's
leave-one-out graph compares each cell with a budget of rows from its nearest cells, a query reads
its own few nearest cells. Both answer ``kneighbors(Q, k)`` -> (n, k) training indices, nearest
first, ties by lower index, ``Q=None`` for leave-one-out (each row excluded by index, never by
distance, so its duplicates stay eligible). :func:`training_graph` measures the approximate
graph's recall on a sample, keeps the least breadth reaching ``RECALL_TARGET`` and reuses graphs
within a selection (:mod:`app.methods.graph_cache`). docs/neighbours.md has the measurements
behind the library and the constants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import faiss
import numpy as np
from scipy import sparse
from sklearn.neighbors import KDTree

from app.methods.graph_cache import cached_graph

#: The ``neighbors`` parameter of ML-kNN and DMKNN.
NeighborSearch = Literal["auto", "exact", "approximate"]
#: ``neighbors="auto"`` searches exactly up to this many training rows (docs/neighbours.md:
#: below it the exact GEMM costs about as much as building the index, and its answers are exact).
EXACT_MAX_N = 8_000
#: The inverted file: about this many training rows per cell (``n_lists = m // ROWS_PER_LIST``,
#: at most ``MAX_LISTS``), k-means trained on ``TRAIN_ROWS_PER_LIST`` sampled rows per cell.
ROWS_PER_LIST = 160
MAX_LISTS = 4096
TRAIN_ROWS_PER_LIST = 40
#: A k-means cell of more rows than this is clustered again (``_balanced_centroids``).
SPLIT_ROWS_PER_LIST = 2 * ROWS_PER_LIST
#: k-means iterations of the cells (faiss's default, 25, gained no recall per row read and cost
#: more: docs/neighbours.md; the recall is measured either way).
KMEANS_ITERATIONS = 10
#: Sampled recall the breadths (cells probed) are chosen for: the fewest cells that reach it.
RECALL_TARGET = 0.96
#: Training rows whose true leave-one-out neighbours are computed at fit time to measure recall.
RECALL_SAMPLE = 1000
#: Queries of new rows probe at least this many cells (the former fixed first breadth): a new
#: row may lie away from the training rows, where its nearest cells are a poorer guide than for
#: the training rows the query breadth is measured on.
MIN_QUERY_PROBES = 8
#: Largest share of non-zero training values at which queries read a CSR copy of the rows.
QUERY_SPARSE_DENSITY = 0.1
#: Candidates fetched per query of a new row beyond k, re-ranked by exact distance (then index).
EXTRA_CANDIDATES = 5
#: Rows added to the index per call (the progress callback runs between blocks; sparse rows are
#: densified one block at a time).
BUILD_BLOCK = 2048
#: Relative slack on GEMM distances when comparing with the true k-th distance (as ExactKNN's).
_RECALL_RTOL = 1e-9
#: Rounding of one float32 operation (2^-24, with a margin): times (d + 4) and the operands'
#: squared norms, it bounds the error of a float32 ``|p|^2 - 2 q.p`` (inputs rounded, d-term sums).
_FLOAT32_RTOL = 1.01 * 2.0**-24

#: A training or query matrix: dense float64 ndarray, or scipy.sparse CSR (scipy ships no types).
Matrix: TypeAlias = Any

#: Largest number of float64 entries in one block of the train-by-train distance matrix (the
#: leave-one-out search of ``fit``): when one block holds every row, NumPy computes it by SYRK,
#: half the multiplications of a GEMM.
_BLOCK_ENTRIES = 1 << 22
#: The same for queries of new rows, smaller: a 2 MB block stays in cache for the selection
#: that follows the GEMM (docs/benchmarks.md, training latency).
_QUERY_BLOCK_ENTRIES = 1 << 18
#: Relative slack on GEMM distances when collecting candidates for the exact recomputation;
#: far above the rounding error of ||a||^2 + ||b||^2 - 2ab, far below any real gap.
_GEMM_RTOL = 1e-9
#: scikit-learn's ``algorithm="auto"`` uses a KD-tree for Euclidean data up to this dimension.
_KD_TREE_MAX_DIM = 15
#: Queries of new rows skip the tree when the training matrix has at most this many entries:
#: a GEMM over it costs less than one ``KDTree.query`` call and its input checks. Both searches
#: are exact with ties by index: the same neighbours.
_BRUTE_QUERY_MAX_ENTRIES = 1 << 17


# ------------------------------------------------------------------------------ exact search
class ExactKNN:
    """Exact K-nearest-neighbour search over a fixed training matrix, ties by lower index.

    The training matrix is dense float64 or CSR. A CSR matrix stays CSR: its distances are
    sparse products ``Q_block @ X.T`` made dense one block of rows at a time (as bounded as the
    dense GEMM's blocks), the exact recomputation at near-ties densifies only the candidate
    rows, and there is no KD-tree (a tree pays off only in low dimension, where data is rarely
    sparse). Queries may be dense or CSR either way (a CSR query of a dense index is densified
    one block at a time). The neighbours are the dense path's: the same exact recomputation
    decides every near-tie.

    Picklable and validation-free on the query path (callers pass float64 C-ordered arrays, or
    CSR, of the right width).
    """

    def __init__(self, X: Matrix) -> None:
        self.X: Matrix = (
            sparse.csr_matrix(X, dtype=np.float64) if sparse.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
        )
        self.sqnorm = _sqnorms(self.X)
        self.max_sqnorm = float(self.sqnorm.max()) if len(self.sqnorm) else 0.0
        m, d = self.X.shape
        # scikit-learn's "auto" rule for Euclidean dense data (tree only pays off in low d).
        dense_low_d = not self.is_sparse and d <= _KD_TREE_MAX_DIM and m >= 64
        self.tree = KDTree(self.X) if dense_low_d else None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def is_sparse(self) -> bool:
        """Whether the training matrix is CSR (derived, so 0.1.x pickles load unchanged)."""
        return bool(sparse.issparse(self.X))

    @property
    def nbytes(self) -> int:
        """Bytes held: the training matrix (its CSR arrays, or the dense array)."""
        return _csr_bytes(self.X) if self.is_sparse else int(self.X.nbytes)

    def kneighbors(self, Q: Matrix | None, k: int) -> np.ndarray:
        """Indices (n, k) of the k nearest training rows of each query, nearest first.

        ``Q=None`` queries the training rows themselves with each row excluded (by index, not
        by distance: its duplicates remain eligible), i.e. leave-one-out neighbourhoods.
        """
        loo = Q is None
        Q = self.X if Q is None else Q
        n = Q.shape[0]
        m = self.n_samples
        if not 1 <= k <= m - int(loo):
            raise ValueError(f"k={k} needs at least {k + int(loo)} training samples, have {m}")
        out = np.empty((n, k), dtype=np.intp)
        if n == 0:
            return out
        use_tree = self.tree is not None and (loo or self.X.size > _BRUTE_QUERY_MAX_ENTRIES)
        # Leave-one-out on few enough dense rows: every product at once (SYRK, half a GEMM's
        # work), then the selection block by block, each block in cache.
        all_at_once = loo and not use_tree and not self.is_sparse and n * m <= _BLOCK_ENTRIES
        products = self.X @ self.X.T if all_at_once else None
        step = max(1, (_BLOCK_ENTRIES if loo and products is None else _QUERY_BLOCK_ENTRIES) // max(m, 1))
        densify = sparse.issparse(Q) and not self.is_sparse
        for start in range(0, n, step):
            stop = min(n, start + step)
            offset = start if loo else None
            Qb = _dense_rows(Q, slice(start, stop)) if densify else Q[start:stop]
            if use_tree:
                rows, cols = self._tree_candidates(Qb, k, offset)
                out[start:stop] = self._select(Qb, rows, cols, k, stop - start)
            else:
                block = None if products is None else products[start:stop]
                out[start:stop] = self._brute_block(Qb, k, offset, block)
        return out

    def _products(self, Qb: Matrix, scale: float) -> np.ndarray:
        """``scale * Qb @ X.T`` as a dense (b, m) float64 block (from sparse products when
        either side is CSR)."""
        if not self.is_sparse and not sparse.issparse(Qb):
            return (scale * Qb) @ self.X.T
        P = Qb @ self.X.T
        D = P.toarray() if sparse.issparse(P) else np.array(P, dtype=np.float64)
        D *= scale
        return D

    def _brute_block(
        self, Qb: Matrix, k: int, self_offset: int | None, products: np.ndarray | None = None
    ) -> np.ndarray:
        """GEMM distances. A row whose k-th and (k+1)-th distances are further apart than the
        rounding error has an unambiguous neighbour set, ordered by (distance, index); only rows
        with a (near-)tie at the boundary go through the exact recomputation of ``_select``.
        ``products``: the block's rows of ``X @ X.T``, already computed (overwritten)."""
        b, m = Qb.shape[0], self.n_samples
        rows_b = np.arange(b)
        # ||t||^2 - 2 q.t: the query's own norm is a per-row constant and cannot change ranks
        if self_offset is not None:
            if products is None:
                D = self._products(Qb, -2.0)
            else:
                D = products
                D *= -2.0
            D[rows_b, self_offset + rows_b] = np.inf
        else:
            D = self._products(Qb, -2.0)
        D += self.sqnorm[None, :]
        finite = m - int(self_offset is not None)
        rows = rows_b[:, None]  # plain fancy indexing: take_along_axis costs more for a few rows
        if k < finite:
            part = np.argpartition(D, k, axis=1)
            idx = part[:, :k]
            dk = D[rows, idx]
            nxt = D[rows_b, part[:, k]]
            slack = _GEMM_RTOL * (_sqnorms(Qb) + self.max_sqnorm) + 1e-300
            tied = nxt <= dk.max(axis=1) + slack
        else:  # every other training row is a neighbour
            idx = np.argpartition(D, k - 1, axis=1)[:, :k]
            dk = D[rows, idx]
            tied = np.zeros(b, dtype=bool)
        out = idx[rows, np.lexsort((idx, dk), axis=1)]
        if tied.any():
            sub = np.flatnonzero(tied)
            kth = dk[sub].max(axis=1) + slack[sub]
            r, c = np.nonzero(D[sub] <= kth[:, None])
            out[sub] = self._select(Qb[sub], r, c, k, len(sub))
        return out

    def _tree_candidates(self, Qb: np.ndarray, k: int, self_offset: int | None) -> tuple[np.ndarray, np.ndarray]:
        """KD-tree candidates, widened per row until nothing beyond them can tie the k-th."""
        b = Qb.shape[0]
        m = self.n_samples
        extra = int(self_offset is not None)
        width = min(m, 2 * k + extra)
        pending = np.arange(b)
        rows_out: list[np.ndarray] = []
        cols_out: list[np.ndarray] = []
        assert self.tree is not None
        while pending.size:
            dist, idx = self.tree.query(Qb[pending], k=width, return_distance=True, sort_results=True)
            if self_offset is not None:
                keep = idx != (self_offset + pending)[:, None]
            else:
                keep = np.ones_like(idx, dtype=bool)
            # the k-th smallest kept distance per row (kept entries are sorted ascending)
            kth = np.take_along_axis(dist, np.argmax(np.cumsum(keep, axis=1) >= k, axis=1)[:, None], axis=1)[:, 0]
            complete = (width >= m) | (kth < dist[:, -1] * (1.0 - _GEMM_RTOL))
            r, c = np.nonzero(keep & complete[:, None] & (dist <= (kth * (1.0 + _GEMM_RTOL))[:, None]))
            rows_out.append(pending[r])
            cols_out.append(idx[r, c])
            pending = pending[~complete]
            width = min(m, 2 * width)
        rows = np.concatenate(rows_out)
        cols = np.concatenate(cols_out)
        return rows, cols

    # -- exact ordering of the candidates: (sum of squared differences, training index) --
    def _select(self, Qb: Matrix, rows: np.ndarray, cols: np.ndarray, k: int, b: int) -> np.ndarray:
        """The k candidates nearest by exact distance per query row (dense copies of only the
        candidate rows, a block at a time), ties by lower index."""
        d = self.X.shape[1]
        exact = np.empty(rows.shape[0])
        step = max(1, _BLOCK_ENTRIES // max(d, 1))
        for s in range(0, rows.shape[0], step):
            diff = _dense_rows(Qb, rows[s : s + step])
            diff -= _dense_rows(self.X, cols[s : s + step])  # in place: one block less held
            exact[s : s + step] = np.einsum("ij,ij->i", diff, diff)
        order = np.lexsort((cols, exact, rows))
        rows, cols = rows[order], cols[order]
        first = np.searchsorted(rows, np.arange(b))
        rank = np.arange(rows.shape[0]) - first[rows]
        take = rank < k
        return cols[take].reshape(b, k)


# ------------------------------------------------------------------------ approximate search
def _dense_rows(X: Matrix, rows: np.ndarray | slice) -> np.ndarray:
    """Rows of ``X`` as dense float64 (one block of a sparse matrix at a time)."""
    block = X[rows]
    return np.asarray(block.toarray() if sparse.issparse(block) else block, dtype=np.float64)


def _sqnorms(X: Matrix) -> np.ndarray:
    if sparse.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X)


def _float32_exact(X: Matrix, sqnorm: np.ndarray) -> bool:
    """Whether float32 products give exact distances: every value an integer (binary and count
    data, also after min-max scaling of 0/1 features) and every partial sum of ``|p|^2 - 2 q.p``
    (at most 3 max |x|^2) below 2^24, so that no float32 sum rounds."""
    if not len(sqnorm) or 3.0 * float(sqnorm.max()) >= 2.0**24:
        return False
    if sparse.issparse(X):
        return bool(np.array_equal(X.data, np.rint(X.data)))
    return all(
        np.array_equal(block, np.rint(block))
        for block in (X[s : s + BUILD_BLOCK] for s in range(0, len(X), BUILD_BLOCK))
    )


@contextmanager
def _one_thread() -> Iterator[None]:
    """faiss single-threaded: k-means is then reproducible, and a job's search does not spin
    OpenMP threads against the other jobs of a shared machine (as BLAS in cross-validation)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


#: ApproximateKNN attributes rebuilt on load (``_query_arrays``), never pickled
_DERIVED = frozenset({"_centroids64", "_centroid_sqnorm", "_cell_blocks", "_ordered_sqnorm"})


def _kmeans(rows: np.ndarray, n: int, seed: int) -> np.ndarray:
    kmeans = faiss.Kmeans(rows.shape[1], n, niter=KMEANS_ITERATIONS, seed=seed)
    kmeans.train(rows)
    return np.asarray(kmeans.centroids, dtype=np.float32)


def _balanced_centroids(X: Matrix, n_lists: int, seed: int) -> np.ndarray:
    """k-means centroids of about ``ROWS_PER_LIST`` rows each (float32, single-threaded).

    k-means on sparse binary rows leaves a few cells of ten times the median size (tmc2007-500:
    median 47 rows, largest 1,690), and a large cell costs twice, in its own rows' comparisons
    and as the nearest cell of many queries; so each cell above ``SPLIT_ROWS_PER_LIST`` rows is
    clustered again into cells of about ``ROWS_PER_LIST`` rows."""
    m = X.shape[0]
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(m, size=min(m, TRAIN_ROWS_PER_LIST * n_lists), replace=False))
    centroids = _kmeans(_dense_rows(X, sample).astype(np.float32), n_lists, seed)
    flat = faiss.IndexFlatL2(X.shape[1])
    flat.add(centroids)
    cell = np.concatenate(
        [
            flat.search(_dense_rows(X, slice(s, s + BUILD_BLOCK)).astype(np.float32), 1)[1][:, 0]
            for s in range(0, m, BUILD_BLOCK)
        ]
    )
    sizes = np.bincount(cell, minlength=n_lists)
    parts = [centroids[sizes <= SPLIT_ROWS_PER_LIST]]
    for c in np.flatnonzero(sizes > SPLIT_ROWS_PER_LIST):
        members = np.flatnonzero(cell == c)
        parts.append(_kmeans(_dense_rows(X, members).astype(np.float32), -(-members.size // ROWS_PER_LIST), seed))
    return np.ascontiguousarray(np.concatenate(parts)[:MAX_LISTS])


def _csr_bytes(M: Any) -> int:
    return int(M.data.nbytes + M.indices.nbytes + M.indptr.nbytes)


def _queries(A: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``[-2q, 1]`` for the rows of ``A`` (:meth:`ApproximateKNN.cell_ordered`) at ``positions``."""
    Q = A[positions]
    Q[:, :-1] *= -2.0
    Q[:, -1] = 1.0
    return Q


class ApproximateKNN:
    """Inverted-file neighbour search over a fixed training matrix (dense float64 or CSR).

    The training rows are clustered into ``n_lists`` cells by k-means (faiss, on a fixed-seed
    sample, single-threaded: the same rows give the same index; cells of more than
    ``SPLIT_ROWS_PER_LIST`` rows clustered again). Two breadths are set by
    :func:`training_graph` from a recall sample:

    * ``loo_rows``: the leave-one-out graph of the fit compares the rows of each cell with the
      rows of the cells nearest to that cell's centroid, taken nearest first while fewer than
      ``loo_rows`` (and at least k + 1) rows are taken (one float32 GEMM per cell; a budget in rows, not cells,
      because k-means cells are uneven and a large cell next to many others would otherwise
      dominate the cost), and is exact within them: (squared distance, index) order;
    * ``n_probe``: a new row is compared with the rows of its own ``n_probe`` nearest cells
      (probed per row, which finds more per cell read, so fewer are needed), ``k +
      EXTRA_CANDIDATES`` candidates re-ranked by their exact squared distance (float64), ties by
      lower index. Sparse rows are read from ``ordered_csr``, dense ones through a faiss
      ``IndexIVFFlat`` over the same cells (``index``; None for sparse rows).

    The training matrix is kept for the exact distances (a CSR matrix stays CSR). Picklable
    (faiss serialises its index to bytes).
    """

    def __init__(self, X: Matrix, *, seed: int = 0, progress: Callable[[float], None] | None = None) -> None:
        self.X: Matrix = X.tocsr() if sparse.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
        m, d = self.X.shape
        self.sqnorm = _sqnorms(self.X)
        #: float32 distances are exact (integer data): the fit's graph needs no float64 pass
        self.float32_exact = _float32_exact(self.X, self.sqnorm)
        self.n_lists = int(min(max(1, m // ROWS_PER_LIST), MAX_LISTS))
        self.loo_rows = m
        X_: Any = self.X
        nonzero = X_.nnz if sparse.issparse(X_) else np.count_nonzero(X_)
        dense_rows = nonzero > QUERY_SPARSE_DENSITY * m * d
        with _one_thread():
            self.centroids = _balanced_centroids(self.X, self.n_lists, seed)
            self.n_lists = len(self.centroids)
            quantizer = faiss.IndexFlatL2(d)
            quantizer.add(self.centroids)
            #: faiss's inverted file for queries of dense rows (None for sparse rows)
            self.index: Any = faiss.IndexIVFFlat(quantizer, d, self.n_lists) if dense_rows else None
            if self.index is not None:
                self.index.is_trained = True
            cell = np.empty(m, dtype=np.intp)
            for start in range(0, m, BUILD_BLOCK):
                stop = min(m, start + BUILD_BLOCK)
                rows = _dense_rows(self.X, slice(start, stop)).astype(np.float32)
                cell[start:stop] = quantizer.search(rows, 1)[1][:, 0]
                if self.index is not None:
                    self.index.add(rows)
                if progress is not None:
                    progress(stop / m)
        #: training rows grouped by cell (stable: by index within a cell), and where each cell starts
        self.by_cell = np.argsort(cell, kind="stable")
        self.cell_start = np.searchsorted(cell[self.by_cell], np.arange(self.n_lists + 1))
        self.cell = cell
        self.set_probes(self.n_lists)
        #: sparse rows (at most ``QUERY_SPARSE_DENSITY`` non-zero): a query reads its probed
        #: cells' non-zeros from this CSR copy in cell order, not dense float32 rows (fewer bytes
        #: read per row, docs/neighbours.md)
        self.ordered_csr = None if dense_rows else sparse.csr_matrix(self.X[self.by_cell], dtype=np.float64)
        self._query_arrays()

    def _query_arrays(self) -> None:
        """What every sparse-path query would otherwise recompute (derived, not pickled)."""
        self._centroids64 = self.centroids.astype(np.float64)
        self._centroid_sqnorm = np.einsum("ij,ij->i", self._centroids64, self._centroids64)
        csr: Any = self.ordered_csr
        #: the CSR rows of each cell (views of ``ordered_csr``) and the squared norms in cell order
        self._cell_blocks = [] if csr is None else [csr[a:b] for a, b in zip(self.cell_start[:-1], self.cell_start[1:])]
        self._ordered_sqnorm = self.sqnorm[self.by_cell]

    def __getstate__(self) -> dict[str, Any]:
        state = {name: value for name, value in self.__dict__.items() if name not in _DERIVED}
        if self.index is not None:
            state["index"] = faiss.serialize_index(self.index)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state["index"] is not None:
            state["index"] = faiss.deserialize_index(state["index"])
        self.__dict__.update(state)
        self.set_probes(self.n_probe)
        self._query_arrays()

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def nbytes(self) -> int:
        """Approximate memory held: the training matrix, its CSR copy or the index's float32 rows."""
        X = self.X
        own = sum(_csr_bytes(M) if sparse.issparse(M) else M.nbytes for M in (X, self.ordered_csr) if M is not None)
        return int(own + (0 if self.index is None else 4 * X.shape[0] * X.shape[1]))

    def set_probes(self, n_probe: int, loo_rows: int | None = None) -> None:
        """Cells searched by every later query of new rows (more: higher recall, slower
        queries) and, if given, the rows budget of the leave-one-out graph."""
        self.n_probe = int(min(max(1, n_probe), self.n_lists))
        if self.index is not None:
            self.index.nprobe = self.n_probe
        if loo_rows is not None:
            self.loo_rows = int(min(max(1, loo_rows), self.n_samples))

    def rows_before(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each given cell: the probe order (all cells, nearest first) and, at each position,
        how many rows the cells before it hold (a cell is in the graph's pool while that is
        below ``loo_rows``)."""
        order = self.probe_order(cells, self.n_lists)
        sizes = np.diff(self.cell_start)[order]
        return order, np.cumsum(sizes, axis=1) - sizes

    def probe_order(self, cells: np.ndarray, depth: int) -> np.ndarray:
        """(len(cells), depth): the cells nearest to each given cell's centroid, nearest first
        (a stable sort of float64 squared distances: the cell itself first, ties by cell)."""
        C = self.centroids.astype(np.float64)
        sq = np.einsum("ij,ij->i", C, C)
        out = np.empty((len(cells), depth), dtype=np.intp)
        step = max(1, _BLOCK_ENTRIES // max(self.n_lists, 1))
        for s in range(0, len(cells), step):
            part = cells[s : s + step]
            D = sq[None, :] - 2.0 * (C[part] @ C.T)
            D[np.arange(len(part)), part] = -np.inf
            out[s : s + step] = np.argsort(D, axis=1, kind="stable")[:, :depth]
        return out

    def kneighbors(self, Q: np.ndarray | None, k: int) -> np.ndarray:
        """Indices (n, k) of the k nearest training rows of each query, nearest first.

        ``Q=None`` gives the leave-one-out neighbourhoods of the training rows (each excluded
        by its index only), computed cell by cell (:meth:`_loo_cell`). New rows are faiss
        queries (their own ``n_probe`` nearest cells).
        """
        loo = Q is None
        m = self.n_samples
        if not 1 <= k <= m - int(loo):
            raise ValueError(f"k={k} needs at least {k + int(loo)} training samples, have {m}")
        if loo:
            return self.loo_graph(k, self.cell_ordered())
        assert Q is not None
        width = min(m, k + EXTRA_CANDIDATES)
        n = Q.shape[0]
        out = np.empty((n, k), dtype=np.intp)
        step = max(1, (1 << 22) // max(width * self.X.shape[1], 1))
        for start in range(0, n, step):
            Qb = _dense_rows(Q, slice(start, start + step))  # a CSR query block densified alone
            cand = self._candidates(Qb, width) if self.ordered_csr is None else self._sparse_candidates(Qb, width)
            out[start : start + step] = self._rerank(Qb, cand, k)
        return out

    def cell_ordered(self) -> np.ndarray:
        """The training rows in cell order as float32, each with its squared norm appended
        (``[x, |x|^2]``; ``4 m (d + 1)`` bytes, held by the fit only): ``[-2q, 1] . [p, |p|^2] =
        |p|^2 - 2 q.p`` (the squared distance less the query's own norm) of a block of rows
        against others is then one GEMM."""
        m, d = self.X.shape
        A = np.empty((m, d + 1), dtype=np.float32)
        for start in range(0, m, BUILD_BLOCK):
            A[start : start + BUILD_BLOCK, :d] = _dense_rows(self.X, self.by_cell[start : start + BUILD_BLOCK])
        A[:, d] = self.sqnorm[self.by_cell]
        return A

    def loo_graph(self, k: int, A: np.ndarray) -> np.ndarray:
        """Leave-one-out neighbours of every training row, one cell at a time (``A``: the rows
        of :meth:`cell_ordered`)."""
        m = self.n_samples
        out = np.empty((m, k), dtype=np.intp)
        bounds = self.cell_start
        step = max(1, _BLOCK_ENTRIES // max(self.n_lists, 1))
        for c in range(self.n_lists):
            if c % step == 0:  # the probe orders of the next block of cells
                order, before = self.rows_before(np.arange(c, min(c + step, self.n_lists)))
            if bounds[c + 1] == bounds[c]:
                continue
            probes = np.sort(order[c % step][before[c % step] < max(self.loo_rows, k + 1)])
            pool = np.concatenate([np.arange(bounds[p], bounds[p + 1]) for p in probes])  # ascending
            step = max(1, _BLOCK_ENTRIES // pool.size)
            for s in range(bounds[c], bounds[c + 1], step):
                local = np.arange(s, min(s + step, bounds[c + 1]))
                out[self.by_cell[local]] = self._loo_cell(A, local, pool, bounds[c], bounds[c + 1], k)
        return out

    def _loo_cell(self, A: np.ndarray, local: np.ndarray, pool: np.ndarray, lo: int, hi: int, k: int) -> np.ndarray:
        """The k nearest of ``pool`` (positions in cell order, ascending, holding the own cell
        ``lo:hi``) to each row at position ``local``, by (squared distance, index), each row
        excluded by index.

        A threshold from the own cell (its k-th smallest distance bounds the pool's) keeps the
        selection to one comparison over the block. With ``float32_exact`` the float32 values
        are the distances; otherwise every row within the float32 rounding bound of the k-th
        gets its exact float64 distance."""
        b, d = local.size, A.shape[1] - 1
        D = _queries(A, local) @ A[pool].T
        rows = np.arange(b)
        D[rows, np.searchsorted(pool, local)] = np.inf
        threshold = np.partition(D, k - 1, axis=1)[:, k - 1]
        if self.float32_exact:
            slack = np.zeros(b)
        else:
            qsq = self.sqnorm[self.by_cell[local]]
            slack = _FLOAT32_RTOL * (d + 4) * (qsq + 2.0 * float(self.sqnorm.max()))
        r, col = np.nonzero(D <= (threshold + 2.0 * slack)[:, None])
        dist = D[r, col].astype(np.float64)
        cand = self.by_cell[pool[col]]
        if not self.float32_exact:
            order = np.lexsort((dist, r))
            r, dist, cand = r[order], dist[order], cand[order]
            kth = dist[np.searchsorted(r, rows) + k - 1]
            keep = dist <= kth[r] + 2.0 * slack[r]
            r, cand = r[keep], cand[keep]
            diff = _dense_rows(self.X, cand) - _dense_rows(self.X, self.by_cell[local])[r]
            dist = np.einsum("ij,ij->i", diff, diff)
        order = np.lexsort((cand, dist, r))
        r, cand = r[order], cand[order]
        rank = np.arange(r.size) - np.searchsorted(r, rows)[r]
        return cand[rank < k].reshape(b, k)

    def _rerank(self, Qb: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
        """The k candidates nearest by exact distance, ties by lower index."""
        exact = self._exact_sqdist(Qb, cand)
        order = np.lexsort((cand, exact), axis=1)[:, :k]
        return np.take_along_axis(cand, order, axis=1)

    def _candidates(self, Qb: np.ndarray, width: int) -> np.ndarray:
        """``width`` candidate indices per query row. A query whose probed cells hold fewer
        rows than that (faiss pads with -1) is scanned exhaustively instead (then exact)."""
        with _one_thread():
            _, labels = self.index.search(np.ascontiguousarray(Qb, dtype=np.float32), width)
        cand = np.asarray(labels, dtype=np.intp)
        for i in np.flatnonzero((cand < 0).any(axis=1)):
            D = self.sqnorm - 2.0 * np.asarray(self.X @ Qb[i]).ravel()
            cand[i] = np.argsort(D, kind="stable")[:width]
        return cand

    def _sparse_candidates(self, Qb: np.ndarray, width: int) -> np.ndarray:
        """``width`` candidates per query row from the non-zeros of its ``n_probe`` nearest cells
        (float64 ``|p|^2 - 2 q.p`` over ``ordered_csr``; the same probe order as the recall
        measurement's), or from every row when those cells hold fewer than ``width``."""
        bounds, blocks = self.cell_start, self._cell_blocks
        C = self._centroids64
        near = self._centroid_sqnorm[None, :] - 2.0 * (Qb @ C.T)
        p = self.n_probe
        probed = np.argpartition(near, p - 1, axis=1)[:, :p] if p < self.n_lists else np.argsort(near, axis=1)
        cand = np.empty((Qb.shape[0], width), dtype=np.intp)
        for i, cells in enumerate(probed):
            lo, hi = bounds[cells], bounds[cells + 1]
            if int((hi - lo).sum()) < width:
                D = self.sqnorm - 2.0 * np.asarray(self.X @ Qb[i]).ravel()
                cand[i] = np.argsort(D, kind="stable")[:width]
                continue
            pos = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)])
            D = self._ordered_sqnorm[pos] - 2.0 * np.concatenate([blocks[c] @ Qb[i] for c in cells])
            cand[i] = self.by_cell[pos[np.argpartition(D, width - 1)[:width]]]
        return cand

    def _exact_sqdist(self, Qb: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Sum of squared differences of each query row to each of its candidates (float64)."""
        b, w = cand.shape
        diff = _dense_rows(self.X, cand.ravel()).reshape(b, w, -1)
        diff -= Qb[:, None, :]
        return np.einsum("ijk,ijk->ij", diff, diff)


# ------------------------------------------------------------------------ the training graph
Index = ExactKNN | ApproximateKNN


@dataclass(frozen=True)
class NeighbourGraph:
    """Leave-one-out neighbours of the training rows, the index they came from, its recall.

    ``neighbours`` (m, k) is read-only (it may be shared by several estimators); ``recall`` is
    the sampled recall of an approximate graph, ``query_recall`` that of its index's queries of
    new rows, as measured on training rows (both None for an exact graph).
    """

    index: Index
    neighbours: np.ndarray
    search: Literal["exact", "approximate"]
    recall: float | None
    query_recall: float | None = None


def resolve_search(neighbors: NeighborSearch, m: int) -> Literal["exact", "approximate"]:
    """What ``neighbors`` means for m training rows (``"auto"``: exact up to ``EXACT_MAX_N``)."""
    if neighbors == "auto":
        return "exact" if m <= EXACT_MAX_N else "approximate"
    return neighbors


def training_graph(
    Xs: Matrix, k: int, neighbors: NeighborSearch = "auto", progress: Callable[[float], None] | None = None
) -> NeighbourGraph:
    """The k leave-one-out neighbours of every row of the (scaled) training matrix ``Xs``.

    Both searches take CSR as it is (exact search by sparse products, block by block). Inside
    :func:`app.methods.graph_cache.sharing_graphs` the graph is computed once per (rows, k,
    search) and reused.
    """
    search = resolve_search(neighbors, Xs.shape[0])
    return cached_graph(Xs, k, search, lambda: _build(Xs, k, search, progress))


def _build(
    Xs: Matrix, k: int, search: Literal["exact", "approximate"], progress: Callable[[float], None] | None
) -> NeighbourGraph:
    if search == "exact":
        index: Index = ExactKNN(Xs)
        neighbours, recall, query_recall = index.kneighbors(None, k), None, None
    else:
        index = ApproximateKNN(Xs, progress=None if progress is None else lambda f: progress(0.5 * f))
        A = index.cell_ordered()
        recall, query_recall = _tune_breadth(index, k, A)
        neighbours = index.loo_graph(k, A)
    if progress is not None:
        progress(1.0)
    neighbours.flags.writeable = False
    return NeighbourGraph(index, neighbours, search, recall, query_recall)


def _tune_breadth(index: ApproximateKNN, k: int, A: np.ndarray) -> tuple[float, float]:
    """Set the index's two breadths to the fewest cells whose sampled recall reaches
    ``RECALL_TARGET``; returns the sampled recalls (leave-one-out graph, queries).

    No search is run for it: the graph is exact within the probed cells, so a sampled row's
    recall with p cells probed is ``min(k, t) / k``, t = how many of its true neighbours (ties at
    the k-th distance included) lie in those cells. The true neighbours of ``RECALL_SAMPLE``
    rows (one exact pass over the training matrix) and the rank of each one's cell in the probe
    order give the recall of every breadth at once: for the graph the order of cells around the
    row's own cell, for queries the order around the row (faiss probes a query's own nearest
    cells; a training row stands for a new one)."""
    m = index.n_samples
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(m, size=min(m, RECALL_SAMPLE), replace=False))
    true_cells = _true_neighbour_cells(index, rows, k, A)
    own = index.cell[rows]
    cells, at = np.unique(own, return_inverse=True)
    order, before = index.rows_before(cells)
    graph_key = np.empty_like(order)  # rows before each cell in the probe order of the row's cell
    graph_key[np.arange(len(cells))[:, None], order] = before
    C = index.centroids.astype(np.float64)
    Xr = _dense_rows(index.X, rows)
    near = np.argsort(np.einsum("ij,ij->i", C, C)[None, :] - 2.0 * (Xr @ C.T), axis=1, kind="stable")
    query_rank = np.empty_like(near)
    query_rank[np.arange(len(rows))[:, None], near] = np.arange(index.n_lists)[None, :]
    loo_rows, recall = _fewest(
        np.concatenate([np.sort(graph_key[at[i], c])[:k] for i, c in enumerate(true_cells)]), k + 1, m
    )
    n_probe, query_recall = _fewest(
        np.concatenate([np.sort(query_rank[i, c])[:k] for i, c in enumerate(true_cells)]),
        min(MIN_QUERY_PROBES, index.n_lists),
        index.n_lists,
    )
    index.set_probes(n_probe, loo_rows)
    return recall, query_recall


def _fewest(keys: np.ndarray, least: int, most: int) -> tuple[int, float]:
    """The least breadth b in ``least``..``most`` at which the recall, #{keys < b} / (k rows), reaches
    ``RECALL_TARGET``, and that recall. ``keys``: for each sampled row its k true neighbours
    found first (the k smallest keys), each key the breadth beyond which it is found (a cell's
    rank in the probe order, or the rows before its cell); a row's recall at breadth b is then
    min(k, #{its keys < b}) / k, and more breadth never finds fewer."""
    ranked = np.sort(keys)
    need = int(np.ceil(RECALL_TARGET * len(ranked) - 1e-9))
    b = int(ranked[need - 1]) + 1 if need >= 1 else 1
    b = min(max(least, b), most)
    return b, float(np.count_nonzero(ranked < b) / len(ranked))


def _true_neighbour_cells(index: ApproximateKNN, rows: np.ndarray, k: int, A: np.ndarray) -> list[np.ndarray]:
    """The cells of each sampled row's true leave-one-out neighbours: every other row within the
    row's exact k-th distance (ties count: on binary data any of the tied rows is a correct
    k-th neighbour). With ``float32_exact`` the distances are the float32 GEMM of the
    cell-ordered rows ``A`` (exact); otherwise a float64 GEMM, up to its rounding slack."""
    X, sqnorm = index.X, index.sqnorm
    position = np.empty(index.n_samples, dtype=np.intp)
    position[index.by_cell] = np.arange(index.n_samples)
    out: list[np.ndarray] = []
    step = max(1, _BLOCK_ENTRIES // max(index.n_samples, 1))
    for s in range(0, len(rows), step):
        part = rows[s : s + step]
        if index.float32_exact:  # columns in cell order
            D = _queries(A, position[part]) @ A.T
            D[np.arange(len(part)), position[part]] = np.inf
            kth = np.partition(D, k - 1, axis=1)[:, k - 1]
            r, c = np.nonzero(D <= kth[:, None])
            cells = index.cell[index.by_cell[c]]
        else:
            products = X[part] @ X.T
            products = products.toarray() if sparse.issparse(products) else np.asarray(products)
            D = sqnorm[part, None] + sqnorm[None, :] - 2.0 * products
            D[np.arange(len(part)), part] = np.inf
            kth = np.partition(D, k - 1, axis=1)[:, k - 1]
            slack = _RECALL_RTOL * (sqnorm[part] + float(sqnorm.max())) + 1e-300
            r, c = np.nonzero(D <= (kth + slack)[:, None])
            cells = index.cell[c]
        out.extend(np.split(cells, np.searchsorted(r, np.arange(1, len(part)))))
    return out
