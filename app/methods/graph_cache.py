"""The neighbour-graph cache a model selection shares.

Within one ``auto`` run ``mlknn`` and ``dmknn`` compute the same leave-one-out graph over the
same scaled training rows in every fold. :func:`sharing_graphs` opens a cache, keyed by the
content of the scaled training matrix, k and the search, that
:func:`app.methods.neighbours.training_graph` consults (:func:`cached_graph`): the second method
of a fold reuses the first one's graph and index. The cache lives for one selection, apart from
the search itself: no fitted estimator holds anything of this module.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from scipy import sparse

if TYPE_CHECKING:
    from app.methods.neighbours import Matrix, NeighbourGraph

#: A selection's graph cache holds at most this many bytes of indexes (least recently used out).
SHARED_GRAPHS_BYTES = 1 << 30


def _digest(X: Matrix) -> tuple[tuple[int, ...], str]:
    """Identity of a training matrix's content (shape and blake2b of its bytes)."""
    h = hashlib.blake2b(digest_size=16)
    if sparse.issparse(X):
        X = X.tocsr()
        for part in (X.data, X.indices, X.indptr):
            h.update(np.ascontiguousarray(part).data)
        h.update(b"csr")
    else:
        h.update(np.ascontiguousarray(X, dtype=np.float64).data)
    return tuple(X.shape), h.hexdigest()


class GraphCache:
    """Neighbour graphs by (training matrix content, k, search), least recently used out
    beyond ``max_bytes``; thread-safe (builds run one at a time, so no graph is built twice)."""

    def __init__(self, max_bytes: int = SHARED_GRAPHS_BYTES) -> None:
        self.max_bytes = max_bytes
        self._graphs: OrderedDict[Any, NeighbourGraph] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0
        self.hits = 0

    def get_or_build(self, key: Any, build: Callable[[], NeighbourGraph]) -> NeighbourGraph:
        with self._lock:
            graph = self._graphs.get(key)
            if graph is not None:
                self._graphs.move_to_end(key)
                self.hits += 1
                return graph
            graph = build()
            self.builds += 1
            self._graphs[key] = graph
            while len(self._graphs) > 1 and sum(_nbytes(g) for g in self._graphs.values()) > self.max_bytes:
                self._graphs.popitem(last=False)
            return graph

    def keys(self) -> frozenset[Any]:
        """The keys of the graphs held now."""
        with self._lock:
            return frozenset(self._graphs)

    def retain(self, keys: Collection[Any]) -> None:
        """Forget every graph but those of ``keys`` (a pilot's repeated run builds its own
        graphs again, as each fold of the cross-validation does)."""
        with self._lock:
            for key in [key for key in self._graphs if key not in keys]:
                del self._graphs[key]


def _nbytes(graph: NeighbourGraph) -> int:
    index = graph.index
    held = index.nbytes
    return int(held + graph.neighbours.nbytes)


_shared: ContextVar[GraphCache | None] = ContextVar("labelserve_shared_neighbour_graphs", default=None)


@contextmanager
def sharing_graphs(max_bytes: int = SHARED_GRAPHS_BYTES) -> Iterator[GraphCache]:
    """Within the block, :func:`app.methods.neighbours.training_graph` computes each graph once (model selection:
    ``mlknn`` and ``dmknn`` on the same fold). Nested blocks share the outer cache."""
    outer = _shared.get()
    if outer is not None:
        yield outer
        return
    cache = GraphCache(max_bytes)
    token = _shared.set(cache)
    try:
        yield cache
    finally:
        _shared.reset(token)


def cached_graph(
    X: Matrix, k: int, search: Literal["exact", "approximate"], build: Callable[[], NeighbourGraph]
) -> NeighbourGraph:
    """``build()``, or inside :func:`sharing_graphs` the graph already built for the same
    (content of ``X``, k, search)."""
    cache = _shared.get()
    if cache is None:
        return build()
    return cache.get_or_build((_digest(X), k, search), build)
