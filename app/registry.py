"""The model registry: names, versions, aliases, and loading fitted models.

A model reference is ``name`` (latest version), ``name@3`` (a version) or ``name@alias``.
A version row is inserted only after its artifact is durable on disk, in the same transaction
that marks the training job succeeded, so a reader can never see a version without its
artifact (nor a succeeded job without its version).
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.allocator import large_blocks_mapped, release_freed_memory
from app.db import Database
from app.orm import Alias, Model, ModelVersion, VersionCounter
from app.store import Store

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
# 1 .. 2**31 - 1 without leading zeros, digit by digit, so that the schema states the exact range
_VERSION = (
    r"(?:[1-9][0-9]{0,8}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}|2147[0-3][0-9]{5}"
    r"|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7])"
)
# letters, digits, '-' and '_', at least one of them not a digit (``name@3`` is a version)
_ALIAS = r"[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*"

NAME_PATTERN = rf"^{_NAME}$"
ALIAS_PATTERN = rf"^{_ALIAS}$"
ALIAS_MAX_LENGTH = 64
REF_PATTERN = rf"^{_NAME}(?:@(?:{_VERSION}|{_ALIAS}))?$"
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # dataset and job ids (hex digests, uuids)
MAX_DB_INT = 2**31 - 1  # bound of versions, offsets and other integers that reach the database
_NAME_RE = re.compile(NAME_PATTERN)
_REF_RE = re.compile(REF_PATTERN)


class RegistryError(LookupError):
    """A reference that does not resolve (the API answers 404)."""


@dataclass(frozen=True)
class ModelRef:
    name: str
    selector: str | None  # None = latest; digits = version; otherwise an alias

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        """Split a reference; ValueError saying what is wrong unless it matches ``REF_PATTERN``.

        An alias longer than aliases can be is not an error here: it names no alias (404).
        """
        name, _, selector = ref.partition("@")
        if _REF_RE.fullmatch(ref):
            return cls(name, selector or None)
        if not _NAME_RE.fullmatch(name) or ref.count("@") > 1 or (ref.count("@") == 1 and not selector):
            raise ValueError(f"'{ref}' is not a model reference (name, name@version or name@alias)")
        if selector.isascii() and selector.isdigit():
            raise ValueError(f"'{ref}': version must be between 1 and {MAX_DB_INT}, without leading zeros")
        raise ValueError(f"'{ref}': an alias is letters, digits, '-' or '_', and not only digits")


# aliases a reader would take for something else: ``latest`` (the default), or a version
# number in disguise (``-1``, ``+2``, ``v3``)
_RESERVED_ALIAS_RE = re.compile(r"latest|[+-]?[0-9]+|[vV][0-9]+", re.IGNORECASE)


def reserved_alias(text: str) -> bool:
    """Aliases that may not be created: ``latest`` and version-like ones (``-1``, ``v3``)."""
    return _RESERVED_ALIAS_RE.fullmatch(text) is not None


def is_version_number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also admits other scripts' digits (``'٣'``)."""
    return text.isascii() and text.isdigit()


def _select_version(session: Session, ref: str, *columns: Any) -> tuple[Any, ...]:
    """The ``columns`` of the version a reference points to, or RegistryError."""
    parsed = ModelRef.parse(ref)
    query = select(*columns).where(ModelVersion.model_name == parsed.name)
    if parsed.selector is None:
        query = query.order_by(ModelVersion.version.desc()).limit(1)
    elif is_version_number(parsed.selector):
        query = query.where(ModelVersion.version == int(parsed.selector))
    else:
        alias = session.get(Alias, (parsed.name, parsed.selector))
        if alias is None:
            raise RegistryError(f"model '{parsed.name}' has no alias '{parsed.selector}'")
        query = query.where(ModelVersion.version == alias.version)
    row = session.execute(query).first()
    if row is None:
        raise RegistryError(f"model '{ref}' not found")
    return tuple(row)


def resolve(session: Session, ref: str) -> ModelVersion:
    """The version row a reference points to, or RegistryError."""
    return _select_version(session, ref, ModelVersion)[0]


VersionKey = tuple[int, datetime]


def resolve_key(session: Session, ref: str) -> VersionKey:
    """A narrow lookup for the hot predict path: the version's id and creation time.

    Versions never change once created, so everything else about one (names, model) can be
    cached under this key; the creation time guards against a reused id after a deletion.
    """
    row = _select_version(session, ref, ModelVersion.id, ModelVersion.created_at)
    return row[0], row[1]


def library_versions() -> dict[str, str]:
    import joblib
    import numpy
    import scipy
    import sklearn

    import app

    return {
        "python": platform.python_version(),
        "labelserve": app.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "joblib": joblib.__version__,
        "lightgbm": importlib.metadata.version("lightgbm"),  # gbm's boosters (read without importing it)
    }


def notify_on_commit(session: Session, store: Store) -> None:
    """Publish a registry change (``Store.registry_changed``) once ``session`` commits it.

    Every change to what a reference resolves to (a version added or deleted, an alias set or
    removed, a model deleted) goes through this, so that cached resolutions in every process
    are dropped; a rolled-back change publishes nothing.
    """
    event.listen(session, "after_commit", lambda _session: store.registry_changed(), once=True)


def register_version(session: Session, store: Store, name: str, **fields: Any) -> ModelVersion:
    """Add the next version of ``name`` (creating the model on first use).

    The model row is locked (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises writers)
    so concurrent trainings of the same name get distinct consecutive versions. The number comes
    from the name's ``VersionCounter``, which outlives deleted versions and models: a number is
    never given twice for one name.
    """
    if session.get(Model, name) is None:
        try:
            with session.begin_nested():
                session.add(Model(name=name))
        except IntegrityError:
            pass  # created concurrently by another job
    session.execute(select(Model).where(Model.name == name).with_for_update()).scalar_one()
    latest = session.scalar(select(func.max(ModelVersion.version)).where(ModelVersion.model_name == name))
    counter = session.get(VersionCounter, name, with_for_update=True)
    number = max(latest or 0, counter.last_version if counter is not None else 0) + 1
    if counter is None:
        session.add(VersionCounter(model_name=name, last_version=number))
    else:
        counter.last_version = number
    row = ModelVersion(model_name=name, version=number, **fields)
    session.add(row)
    session.flush()
    notify_on_commit(session, store)
    return row


def drop_unused_artifacts(session: Session, store: Store, hashes: set[str]) -> None:
    """Delete the artifact files that no version uses any more.

    Called after the rows that used them are gone (committed), by the registry's deletions and
    by a training whose job was cancelled after its artifact was written.
    """
    for sha256 in hashes:
        used = session.scalar(
            select(func.count()).select_from(ModelVersion).where(ModelVersion.artifact_sha256 == sha256)
        )
        if not used:
            store.delete_artifact(sha256)


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
        (the processes keep freed memory for reuse, ``app.allocator``: an evicted model's
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
