"""Migrations as a deployment step: they match the ORM, run from the CLI and from ``alembic.ini``
(online and offline), and an API that does not migrate refuses a database that is behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from app.config import Settings
from app.main import create_app
from app.registry.versions import register_version
from app.storage.db import Database, SchemaNotCurrent, current_revision, get_engine, head_revision, migrate
from app.storage.orm import Base, Job, ModelVersion, utcnow
from app.storage.store import ARTIFACT_FORMAT, Store
from tests.helpers import BACKENDS, throwaway_postgres

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it, not even Alembic's version table."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    with throwaway_postgres(request.getfixturevalue("postgres_admin")) as url:
        yield url


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}


def test_migrations_build_exactly_the_orm_schema(empty_database: str) -> None:
    assert current_revision(empty_database) is None
    migrate(empty_database)
    assert current_revision(empty_database) == head_revision()
    with get_engine(empty_database).connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    migrate(empty_database)  # idempotent: a second run (another replica's deploy) changes nothing
    assert current_revision(empty_database) == head_revision()


def test_versions_of_a_0_1_database_are_marked_as_0_1_artifacts(empty_database: str, tmp_path: Path) -> None:
    """0.1.0's schema is revision 0006: its versions get artifact format 1, new ones this release's."""
    migrate(empty_database, "0006")
    with get_engine(empty_database).begin() as connection:
        connection.execute(text("INSERT INTO models (name, created_at) VALUES ('m', :t)"), {"t": utcnow()})
        connection.execute(
            text(
                "INSERT INTO model_versions (model_name, version, method, params, dataset_sha256, feature_names, "
                "label_names, training_seconds, library_versions, artifact_sha256, created_at) "
                "VALUES ('m', 1, 'br', '{}', 'x', '[]', '[]', 1.0, '{}', 'a', :t)"
            ),
            {"t": utcnow()},
        )
    migrate(empty_database)
    with Database(empty_database).session() as session:
        fields = {c.key: getattr(session.get(ModelVersion, 1), c.key) for c in ModelVersion.__table__.columns}
        fields = {k: v for k, v in fields.items() if k not in ("id", "model_name", "version", "artifact_format")}
        new = register_version(session, Store(tmp_path / "store"), "m", **fields)
        assert new.version == 2
    with Database(empty_database).reading() as session:
        formats = session.scalars(select(ModelVersion.artifact_format).order_by(ModelVersion.version)).all()
    assert formats == [1, ARTIFACT_FORMAT] == [1, 2]


def test_jobs_of_0_2_under_the_api_key_become_the_default_keys(empty_database: str) -> None:
    """0.2.x recorded a fingerprint of its one key (revision 0010); that key is now named ``default``."""
    migrate(empty_database, "0010")
    insert = text(
        "INSERT INTO jobs (id, kind, status, progress, stage, request, created_at, submitter) "
        "VALUES (:id, 'train', 'succeeded', 1.0, 'done', '{}', :t, :submitter)"
    )
    with get_engine(empty_database).begin() as connection:
        connection.execute(insert, {"id": "keyed", "t": utcnow(), "submitter": "0123456789abcdef"})
        connection.execute(insert, {"id": "open", "t": utcnow(), "submitter": None})
    migrate(empty_database)
    with Database(empty_database).reading() as session:
        submitters = {row.id: row.submitter for row in session.execute(select(Job.id, Job.submitter))}
    assert submitters == {"keyed": "default", "open": None}


def test_api_without_auto_migrate_refuses_an_unmigrated_database_then_serves_once_migrated(
    empty_database: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=empty_database, model_dir=tmp_path / "store", auto_migrate=False)
    with pytest.raises(SchemaNotCurrent, match="labelserve migrate"):
        with TestClient(create_app(settings)):
            pass
    migrate(empty_database)
    with TestClient(create_app(settings)) as client:
        assert client.get("/ready").status_code == 200


def test_auto_migrate_defaults_to_the_embedded_sqlite_only(tmp_path: Path) -> None:
    assert Settings(model_dir=tmp_path).migrate_at_startup
    assert not Settings(database_url="postgresql+psycopg://u@db/x").migrate_at_startup
    assert Settings(database_url="postgresql+psycopg://u@db/x", auto_migrate=True).migrate_at_startup
    assert not Settings(model_dir=tmp_path, auto_migrate=False).migrate_at_startup


@pytest.mark.slow
def test_labelserve_migrate_creates_the_embedded_database(tmp_path: Path) -> None:
    env = clean_env() | {"LABELSERVE_MODEL_DIR": str(tmp_path / "models")}
    done = subprocess.run(
        [sys.executable, "-m", "app.client.cli", "migrate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    url = f"sqlite:///{tmp_path / 'models' / 'labelserve.db'}"
    assert current_revision(url) == head_revision()
    assert "database migrated" in done.stderr


@pytest.mark.parametrize("url", ["postgresql+psycopg://nobody@unreachable.invalid/db", "sqlite:////nonexistent/x.db"])
@pytest.mark.slow
def test_alembic_ini_renders_the_sql_offline(url: str) -> None:
    """``alembic upgrade head --sql`` needs no database: the DDL of every revision, for review."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-c",
            str(ROOT / "alembic.ini"),
            "-x",
            f"url={url}",
            "upgrade",
            "head",
            "--sql",
        ],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "CREATE TABLE jobs" in done.stdout and "CREATE TABLE model_versions" in done.stdout
    assert f"'{head_revision()}'" in done.stdout  # the version stamp of the newest revision


@pytest.mark.slow
def test_alembic_check_finds_nothing_to_autogenerate_on_a_migrated_database(tmp_path: Path) -> None:
    """What ``alembic revision --autogenerate`` would compare, through the top-level alembic.ini."""
    url = f"sqlite:///{tmp_path / 'checked.db'}"
    migrate(url)
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "check"],
        cwd=ROOT,
        env=clean_env() | {"LABELSERVE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No new upgrade operations detected" in done.stdout + done.stderr
