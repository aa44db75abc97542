"""The registry's tables, as SQLAlchemy 2.0 typed ORM classes.

The database is the single source of truth for datasets, model versions, aliases and jobs: the
API, local worker processes and (later) remote workers all read and write it, so job state and
progress live here rather than in any process's memory.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the offset otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.astimezone(timezone.utc) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, list[Any]: JSON}


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    format: Mapped[str] = mapped_column(String(16))
    n_samples: Mapped[int] = mapped_column(Integer)
    n_features: Mapped[int] = mapped_column(Integer)
    n_labels: Mapped[int] = mapped_column(Integer)
    feature_names: Mapped[list[str]]
    label_names: Mapped[list[str]]
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    warnings: Mapped[list[str]]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # lineage of a part of a split (POST /datasets/{id}/split): the parent's id (kept when the
    # parent is deleted, like a version's dataset_id) and how it was split
    parent_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    split: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Model(Base):
    __tablename__ = "models"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    versions: Mapped[list[ModelVersion]] = relationship(
        back_populates="model", cascade="all, delete-orphan", order_by="ModelVersion.version"
    )
    aliases: Mapped[list[Alias]] = relationship(
        back_populates="model", cascade="all, delete-orphan", order_by="Alias.alias"
    )


class ModelVersion(Base):
    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model_name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_name: Mapped[str] = mapped_column(ForeignKey("models.name", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    method: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]]
    dataset_id: Mapped[str | None] = mapped_column(String(64))
    dataset_sha256: Mapped[str] = mapped_column(String(64))
    feature_names: Mapped[list[str]]
    label_names: Mapped[list[str]]
    training_seconds: Mapped[float] = mapped_column(Float)
    #: UserWarnings the training raised (ConvergenceWarning, degenerate fits): [{"category", "message"}]
    warnings: Mapped[list[dict[str, str]] | None] = mapped_column(JSON, nullable=True)
    library_versions: Mapped[dict[str, Any]]
    artifact_sha256: Mapped[str] = mapped_column(String(64))
    #: the store's ``ARTIFACT_FORMAT`` the artifact was written in, so that a release can tell the
    #: versions its compatibility window leaves out (docs/operations.md); the default, 1, is that of
    #: 0.1.x's rows (and of any inserted by code that does not know the column)
    artifact_format: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    job_id: Mapped[str | None] = mapped_column(String(64))
    # set when the method was chosen by ``"method": "auto"``: metric, folds and the leaderboard
    selection: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: what the fit measured, from the method's ``recorded_attributes`` (e.g. neighbour recall)
    fit_details: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: the name of the API key whose job registered it (its job's ``submitter``); null with no keys
    created_by: Mapped[str | None] = mapped_column(String(64), nullable=True)

    model: Mapped[Model] = relationship(back_populates="versions")
    evaluations: Mapped[list[Evaluation]] = relationship(
        back_populates="version", cascade="all, delete-orphan", order_by="Evaluation.id"
    )


class Evaluation(Base):
    """One ``POST /evaluate``: a version's metrics on a dataset.

    Stored beside the version rather than on it, because a version never changes once
    registered; the version record shows the latest evaluation on each dataset.
    ``dataset_sha256`` keeps the lineage when the dataset is deleted; ``options`` are what
    shaped the figures (threshold, and for selectors the downstream classifier).
    """

    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"), index=True)
    dataset_id: Mapped[str] = mapped_column(String(64))
    dataset_sha256: Mapped[str | None] = mapped_column(String(64))
    n_samples: Mapped[int | None] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]]
    options: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    version: Mapped[ModelVersion] = relationship(back_populates="evaluations")


class VersionCounter(Base):
    """The highest version number a model name has ever had. Never deleted (not with its versions,
    not with its model), so a number is never handed out twice for one name."""

    __tablename__ = "version_counters"

    model_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    last_version: Mapped[int] = mapped_column(Integer)


class Alias(Base):
    __tablename__ = "aliases"

    model_name: Mapped[str] = mapped_column(ForeignKey("models.name", ondelete="CASCADE"), primary_key=True)
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)

    model: Mapped[Model] = relationship(back_populates="aliases")


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="train")
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    stage: Mapped[str] = mapped_column(String(64), default="queued")
    method: Mapped[str | None] = mapped_column(String(32))
    dataset_id: Mapped[str | None] = mapped_column(String(64), index=True)
    model_name: Mapped[str | None] = mapped_column(String(255))
    model_version: Mapped[int | None] = mapped_column(Integer)
    request: Mapped[dict[str, Any]]
    result_path: Mapped[str | None] = mapped_column(Text)  # file name under the store's results/
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # stamped at the claim and then periodically by the process running the job, so that a
    # reaper elsewhere (another process or machine) can tell a live job from an orphaned one
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the name of the API key the job was submitted with (null with no keys configured), and the
    # client's address: what LABELSERVE_MAX_QUEUED_JOBS_PER_KEY counts by (the address with no keys)
    submitter: Mapped[str | None] = mapped_column(String(64))
    submitted_from: Mapped[str | None] = mapped_column(String(64), nullable=True)


class AuditEvent(Base):
    """A change to the registry or the datasets that leaves no row of its own to say who made it:
    an alias set, moved or removed, a version, model or dataset deleted. Only ever inserted."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: ``alias.set``, ``alias.delete``, ``version.delete``, ``model.delete``, ``dataset.delete``
    action: Mapped[str] = mapped_column(String(32))
    #: what it changed: ``name@alias``, ``name@version``, a model name, a dataset id
    target: Mapped[str] = mapped_column(String(512))
    #: the API key's name (null with no keys configured) and the client's address
    key_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: what else tells the change: the version an alias now points to and the one before, ...
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
