"""``ResolvedRefs``: the model references this process has resolved, valid until the registry changes.

The application core holds one (``app.core.Core.refs``); the prediction fast path answers from it
without a database session.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from app.registry import Served
from app.store import Store

REFS_KEPT = 4096  # resolved references per process (each holds only a pointer to a cached model)


class ResolvedRefs:
    """Model references (``name``, ``name@3``, ``name@alias``) -> loaded versions, per process.

    Valid while the store's registry token is the one read *before* the resolution: a change
    committed meanwhile writes a new token, so the entry is dropped on the next lookup instead
    of being served stale. Thread-safe: the event loop and worker threads share it.
    """

    def __init__(self, store: Store, size: int = REFS_KEPT) -> None:
        self._store = store
        self._size = size
        self._lock = threading.Lock()
        self._token: bytes | None = None
        self._served: OrderedDict[str, Served] = OrderedDict()

    def get(self, ref: str) -> tuple[bytes, Served | None]:
        """The registry token now, and the version ``ref`` resolved to if it has not changed since
        (a new token drops every entry)."""
        token = self._store.registry_token()
        with self._lock:
            if token != self._token:
                self._served.clear()
                self._token = token
            served = self._served.get(ref)
            if served is not None:
                self._served.move_to_end(ref)
            return token, served

    def put(self, token: bytes, ref: str, served: Served) -> None:
        """Keep a resolution made after reading ``token``; ignored if the registry changed since."""
        with self._lock:
            if token != self._token:
                return
            self._served[ref] = served
            self._served.move_to_end(ref)
            while len(self._served) > self._size:
                self._served.popitem(last=False)

    def forget(self, served: Served) -> None:
        """Drop the references resolved to ``served`` (the model cache let go of it: holding it
        here would keep it in memory beyond the cache's bound)."""
        with self._lock:
            for ref in [ref for ref, kept in self._served.items() if kept is served]:
                del self._served[ref]
