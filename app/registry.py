"""The model registry: names, versions, aliases, and loading fitted models.

A model reference is ``name`` (latest version), ``name@3`` (a version) or ``name@alias``.
A version row is inserted only after its artifact is durable on disk, in the same transaction
that marks the training job succeeded, so a reader can never see a version without its
artifact (nor a succeeded job without its version).
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.orm import Alias, Model, ModelVersion
from app.store import Store

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


class RegistryError(LookupError):
    """A reference that does not resolve (the API answers 404)."""


@dataclass(frozen=True)
class ModelRef:
    name: str
    selector: str | None  # None = latest; digits = version; otherwise an alias

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        name, _, selector = ref.partition("@")
        if not _NAME_RE.match(name) or (ref.count("@") == 1 and not selector):
            raise ValueError(f"'{ref}' is not a model reference (name, name@version or name@alias)")
        return cls(name, selector or None)


def resolve(session: Session, ref: str) -> ModelVersion:
    """The version row a reference points to, or RegistryError."""
    parsed = ModelRef.parse(ref)
    query = select(ModelVersion).where(ModelVersion.model_name == parsed.name)
    if parsed.selector is None:
        row = session.scalars(query.order_by(ModelVersion.version.desc()).limit(1)).first()
    elif parsed.selector.isdigit():
        row = session.scalars(query.where(ModelVersion.version == int(parsed.selector))).first()
    else:
        alias = session.get(Alias, (parsed.name, parsed.selector))
        if alias is None:
            raise RegistryError(f"model '{parsed.name}' has no alias '{parsed.selector}'")
        row = session.scalars(query.where(ModelVersion.version == alias.version)).first()
    if row is None:
        raise RegistryError(f"model '{ref}' not found")
    return row


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
    }


def register_version(session: Session, name: str, **fields: Any) -> ModelVersion:
    """Add the next version of ``name`` (creating the model on first use).

    The model row is locked (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises writers)
    so concurrent trainings of the same name get distinct consecutive versions.
    """
    if session.get(Model, name) is None:
        try:
            with session.begin_nested():
                session.add(Model(name=name))
        except IntegrityError:
            pass  # created concurrently by another job
    session.execute(select(Model).where(Model.name == name).with_for_update()).scalar_one()
    latest = session.scalar(select(func.max(ModelVersion.version)).where(ModelVersion.model_name == name))
    row = ModelVersion(model_name=name, version=(latest or 0) + 1, **fields)
    session.add(row)
    session.flush()
    return row


def artifact_in_use(session: Session, sha256: str) -> bool:
    return (
        session.scalar(
            select(func.count()).select_from(ModelVersion).where(ModelVersion.artifact_sha256 == sha256)
        )
        or 0
    ) > 0


class ModelCache:
    """Fitted models by artifact sha256, least recently used evicted first."""

    def __init__(self, store: Store, size: int) -> None:
        self._store = store
        self._load = lru_cache(maxsize=size)(store.load_artifact)

    def get(self, sha256: str) -> tuple[Any, bool]:
        """The model and whether it came from the cache."""
        hits = self._load.cache_info().hits
        model = self._load(sha256)
        return model, self._load.cache_info().hits > hits

    def clear(self) -> None:
        self._load.cache_clear()
