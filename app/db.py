"""Engine and sessions, and the schema: applying the Alembic migrations, checking they were applied.

SQLite gets WAL and a busy timeout so the API process and the training processes can write
concurrently; any other SQLAlchemy URL (PostgreSQL via psycopg) is used as given.

Migrating is a deployment step (``labelserve migrate``, the compose file's ``migrate`` service),
run once before the API and the workers start, so that several API replicas never race to alter
the schema and a migration that fails stops the rollout instead of one replica.
``prepare_schema`` is what the API does at start-up: migrate when ``LABELSERVE_AUTO_MIGRATE``
says so (by default only on SQLite, the embedded single-process set-up), otherwise refuse to
start on a database whose schema is not the one this code needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings

MIGRATIONS = Path(__file__).parent / "migrations"


class SchemaNotCurrent(RuntimeError):
    """The database's schema revision is not the one this code was written for."""


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@lru_cache(maxsize=8)
def _session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(get_engine(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session committed on success and rolled back on error."""
    session = _session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Config:
    """The Alembic configuration of the installed package, bound to ``url``.

    The same scripts the top-level ``alembic.ini`` points to, found through the package so that
    an installed service (the container image) migrates without the source tree.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection_url"] = url
    return cfg


def migrate(url: str, revision: str = "head", sql: bool = False) -> None:
    """Bring the schema to ``revision`` (idempotent); with ``sql``, print the SQL instead (offline)."""
    if url.startswith("sqlite:///") and not sql:
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision, sql=sql)


def head_revision() -> str | None:
    """The newest revision of the migration scripts: the schema this code needs."""
    return ScriptDirectory.from_config(alembic_config("")).get_current_head()


def current_revision(url: str) -> str | None:
    """The revision the database's schema is at (None: never migrated)."""
    with get_engine(url).connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def check_schema(url: str) -> None:
    """Raise ``SchemaNotCurrent`` unless the database is migrated to the head revision."""
    current, head = current_revision(url), head_revision()
    if current != head:
        raise SchemaNotCurrent(
            f"the database schema is at revision {current or '(none: empty database)'}, this code needs "
            f"{head}: run `labelserve migrate` first (or set LABELSERVE_AUTO_MIGRATE=true)"
        )


def prepare_schema(settings: Settings) -> None:
    """At API start-up: migrate if ``settings`` say so, otherwise check the schema is current."""
    if settings.migrate_at_startup:
        migrate(settings.resolved_database_url)
    else:
        check_schema(settings.resolved_database_url)
