"""Versions: resolving a reference to its row, registering the next version, dropping artifacts.

A version row is inserted only after its artifact is durable on disk, in the same transaction
that marks the training job succeeded, so a reader can never see a version without its
artifact (nor a succeeded job without its version).
"""

from __future__ import annotations

import importlib.metadata
import platform
from datetime import datetime
from typing import Any

from sqlalchemy import event, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.registry.refs import ModelRef, RegistryError, is_version_number
from app.storage.orm import Alias, Model, ModelVersion, VersionCounter
from app.storage.store import ARTIFACT_FORMAT, Store


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
    """Add the next version of ``name`` (creating the model on first use), its artifact in this
    release's ``ARTIFACT_FORMAT``.

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
    row = ModelVersion(model_name=name, version=number, artifact_format=ARTIFACT_FORMAT, **fields)
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
