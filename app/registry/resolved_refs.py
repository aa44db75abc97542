"""``ResolvedRefs``: the model references this process has resolved, valid until the registry changes.

The application core holds one (``app.core.Core.refs``); the prediction fast path answers from it
without a database session.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from app.errors import DomainError
from app.registry.model_cache import Served
from app.storage.store import Store

REFS_KEPT = 4096  # resolved references per process (each holds only a pointer to a cached model)
RESOLVING = "resolving"  # the refusals of resolving a model reference (a prediction, a V2 route)
MODEL_PAGE = "model page"  # the refusals of ``GET /models/{name}`` (the name alone, worded for a path)
#: the memory the kept model pages of one process may take, and the largest page kept (a model
#: of many versions and labels: its page is read from the database each time)
PAGES_BYTES = 16 * 1024 * 1024
PAGE_MAX_BYTES = 1024 * 1024


class ResolvedRefs:
    """Model references (``name``, ``name@3``, ``name@alias``) -> loaded versions, per process.

    Valid while the store's registry token is the one read *before* the resolution: a change
    committed meanwhile writes a new token, so the entry is dropped on the next lookup instead
    of being served stale. Thread-safe: the event loop and worker threads share it.

    References that did not resolve (an unknown name, version or alias) are kept too, with the
    error they gave, under the same token rule: until the next registry change the same error
    is raised again without a database session. 100 connections predicting an unknown model
    otherwise each read the registry, and queued behind its writers. Refusals are kept per
    ``kind`` of lookup, since each words its error its own way: ``RESOLVING`` (a prediction's or
    a V2 route's reference) and ``MODEL_PAGE`` (``GET /models/{name}``).

    The answers of ``GET /models/{name}`` (its JSON, ``PAGES_BYTES`` of them at most) are kept
    under the same rule, so that the route answers from memory on the event loop. A worker
    thread's answer under a flood of other requests waited two turns of the busy loop and the
    GIL: with 100 connections predicting an unknown model the page took a p50 of 111 ms, as
    long as ``/health`` did (``benchmarks/faults.py``). Everything a page shows changes with a
    registry change: versions, aliases and deletions, and evaluations, which announce one too.

    ``keep_resolutions`` (resolutions and refusals) and ``keep_pages`` switch the two kinds of
    entries off (``LABELSERVE_RESOLVED_REFS``, ``LABELSERVE_KEPT_MODEL_PAGES``): nothing of that
    kind is kept, so every lookup misses and the caller reads the database.
    """

    def __init__(
        self, store: Store, size: int = REFS_KEPT, *, keep_resolutions: bool = True, keep_pages: bool = True
    ) -> None:
        self._store = store
        self._size = size
        self._keep_resolutions = keep_resolutions
        self._keep_pages = keep_pages
        self._lock = threading.Lock()
        self._token: bytes | None = None
        self._served: OrderedDict[str, Served] = OrderedDict()
        self._refused: OrderedDict[tuple[str, str], DomainError] = OrderedDict()
        self._pages: OrderedDict[str, bytes] = OrderedDict()
        self._page_bytes = 0

    def token(self) -> bytes:
        """The registry token now; every entry kept under an older one is dropped."""
        token = self._store.registry_token()
        with self._lock:
            self._drop_if_changed(token)
        return token

    def _drop_if_changed(self, token: bytes) -> None:  # with the lock held
        if token != self._token:
            self._served.clear()
            self._refused.clear()
            self._pages.clear()
            self._page_bytes = 0
            self._token = token

    def get(self, ref: str) -> tuple[bytes, Served | None]:
        """The registry token now, and the version ``ref`` resolved to if it has not changed since
        (a new token drops every entry)."""
        token = self._store.registry_token()
        with self._lock:
            self._drop_if_changed(token)
            served = self._served.get(ref)
            if served is not None:
                self._served.move_to_end(ref)
            return token, served

    def put(self, token: bytes, ref: str, served: Served) -> None:
        """Keep a resolution made after reading ``token``; ignored if the registry changed since."""
        if not self._keep_resolutions:
            return
        with self._lock:
            if token != self._token:
                return
            self._served[ref] = served
            self._served.move_to_end(ref)
            while len(self._served) > self._size:
                self._served.popitem(last=False)

    def refusal(self, ref: str, kind: str = RESOLVING) -> DomainError | None:
        """A fresh copy of the error a ``kind`` lookup of ``ref`` gave since the registry last
        changed, if any (the token is read here: callable without a ``get`` before it)."""
        token = self._store.registry_token()
        key = (kind, ref)
        with self._lock:
            self._drop_if_changed(token)
            error = self._refused.get(key)
            if error is None:
                return None
            self._refused.move_to_end(key)
        return type(error)(error.message, loc=error.loc)

    def refuse(self, token: bytes, ref: str, error: DomainError, kind: str = RESOLVING) -> None:
        """Keep the error a ``kind`` lookup of ``ref`` gave after reading ``token``; ignored if the
        registry changed since."""
        if not self._keep_resolutions:
            return
        key = (kind, ref)
        with self._lock:
            if token != self._token:
                return
            self._refused[key] = error
            self._refused.move_to_end(key)
            while len(self._refused) > self._size:
                self._refused.popitem(last=False)

    def page(self, name: str) -> bytes | None:
        """The ``GET /models/{name}`` answer kept since the registry last changed, if any."""
        token = self._store.registry_token()
        with self._lock:
            self._drop_if_changed(token)
            page = self._pages.get(name)
            if page is not None:
                self._pages.move_to_end(name)
            return page

    def keep_page(self, token: bytes, name: str, page: bytes) -> None:
        """Keep the answer of ``GET /models/{name}`` read after ``token``; ignored if the registry
        changed since, or if it is larger than ``PAGE_MAX_BYTES``."""
        if len(page) > PAGE_MAX_BYTES or not self._keep_pages:
            return
        with self._lock:
            if token != self._token:
                return
            old = self._pages.pop(name, None)
            self._page_bytes += len(page) - (len(old) if old is not None else 0)
            self._pages[name] = page
            while self._page_bytes > PAGES_BYTES:
                _, dropped = self._pages.popitem(last=False)
                self._page_bytes -= len(dropped)

    def forget(self, served: Served) -> None:
        """Drop the references resolved to ``served`` (the model cache let go of it: holding it
        here would keep it in memory beyond the cache's bound)."""
        with self._lock:
            for ref in [ref for ref, kept in self._served.items() if kept is served]:
                del self._served[ref]
