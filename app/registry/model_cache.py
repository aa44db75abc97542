"""The loaded versions of one process (``ModelCache``), bounded by count and by bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.registry.refs import RegistryError
from app.registry.versions import VersionKey
from app.runtime.allocator import large_blocks_mapped, release_freed_memory
from app.storage.db import Database
from app.storage.orm import ModelVersion
from app.storage.store import Store


@dataclass(frozen=True)
class Served:
    """A loaded version: what predicting with it needs, without another database read."""

    name: str
    version: int
    method: str
    feature_names: list[str]
    label_names: list[str]
    model: Any


def _derived_nbytes(model: Any) -> int:
    """What a loaded estimator derives beyond its pickle (``MethodEstimator.derived_nbytes``);
    0 for an artifact that is no estimator."""
    derived = getattr(model, "derived_nbytes", None)
    return int(derived()) if callable(derived) else 0


class ModelCache:
    """Loaded versions by ``VersionKey``: at most ``size`` of them and ``max_bytes`` in all, least
    recently used evicted first.

    A model's size is its artifact file's (a pickle holds a model's arrays byte for byte) plus
    what it derives when it loads (``derived_nbytes``: a forest's flat node arrays, a quarter
    more for a forest of many labels). The file's size is known before the load, so room is
    made for it *before* the model is read, and again for the whole once it is loaded: the
    process holds at most ``max_bytes`` of models, the one in flight included (but for its
    derived part). A model larger than ``max_bytes`` evicts every other and is kept alone (else
    every request would pay its load). One load per key at a time: concurrent first requests
    for the same version wait for one load rather than each reading its own copy.

    Whoever keeps references to served models (``services.prediction.ResolvedRefs``) registers
    with ``on_evict`` and drops them when a model is evicted: a model pinned elsewhere would stay
    in memory whatever the bound.

    The artifact's sha256 is verified on every load (in ``Store.load_artifact``); failures are
    not cached, so a repaired store is picked up on the next request.
    """

    def __init__(self, store: Store, database: Database, size: int, *, max_bytes: int | None = None) -> None:
        self._store = store
        self._database = database
        self.size = size
        self.max_bytes = max_bytes
        self._entries: OrderedDict[VersionKey, tuple[Served, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._loading: dict[VersionKey, threading.Lock] = {}
        self._listeners: list[Callable[[Served], None]] = []

    def on_evict(self, listener: Callable[[Served], None]) -> None:
        """Call ``listener`` with every model the cache lets go of (evicted or cleared)."""
        self._listeners.append(listener)

    def _evicted(self, models: list[Served]) -> None:
        """Tell the listeners, drop the last references, and return the memory to the system
        (the processes keep freed memory for reuse, ``app.runtime.allocator``: an evicted model's
        hundreds of megabytes would otherwise stay resident)."""
        if not models:
            return
        for served in models:
            for listener in self._listeners:
                listener(served)
        models.clear()
        release_freed_memory()

    @property
    def bytes_held(self) -> int:
        """The bytes of the models kept (their artifacts' sizes and what they derived on load)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def _cached(self, key: VersionKey) -> Served | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def _make_room(self, incoming: int) -> list[Served]:
        """Evict least recently used entries until one of ``incoming`` bytes fits (under the
        lock); the evicted models, for the listeners (called outside the lock)."""
        evicted = []
        while self._entries and (
            len(self._entries) >= self.size or (self.max_bytes is not None and self._bytes + incoming > self.max_bytes)
        ):
            _, (served, nbytes) = self._entries.popitem(last=False)
            self._bytes -= nbytes
            evicted.append(served)
        return evicted

    def get(self, key: VersionKey) -> tuple[Served, bool]:
        """The loaded version and whether it came from the cache."""
        served = self._cached(key)
        if served is not None:
            return served, True
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            served = self._cached(key)  # loaded meanwhile by the request this one waited for
            if served is not None:
                return served, True
            try:
                row = self._version_row(key)
                nbytes = self._store.artifact_size(row.artifact_sha256)
                with self._lock:
                    evicted = self._make_room(nbytes)
                self._evicted(evicted)
                with large_blocks_mapped():
                    model = self._store.load_artifact(row.artifact_sha256)
                served = Served(
                    name=row.model_name,
                    version=row.version,
                    method=row.method,
                    feature_names=row.feature_names,
                    label_names=row.label_names,
                    model=model,
                )
                nbytes += _derived_nbytes(served.model)
                with self._lock:
                    # room for what the model holds, which may exceed its file; and another
                    # version may have come in meanwhile
                    evicted = self._make_room(nbytes)
                    self._entries[key] = (served, nbytes)
                    self._bytes += nbytes
                self._evicted(evicted)
                release_freed_memory()  # what unpickling freed (the arrays copied into the trees)
            finally:
                with self._lock:
                    self._loading.pop(key, None)
        return served, False

    def _version_row(self, key: VersionKey) -> ModelVersion:
        with self._database.reading() as session:
            row = session.get(ModelVersion, key[0])
            if row is None:
                raise RegistryError("the model version was deleted meanwhile")
            session.expunge(row)
        return row

    def clear(self) -> None:
        with self._lock:
            evicted = [served for served, _ in self._entries.values()]
            self._entries.clear()
            self._bytes = 0
        self._evicted(evicted)
