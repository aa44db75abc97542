"""Engine and sessions, and the schema: applying the Alembic migrations, checking they were applied.

SQLite gets WAL and a busy timeout so the API process and the training processes can write
concurrently; any other SQLAlchemy URL (PostgreSQL via psycopg) is used as given.

SQLite transactions are made real with SQLAlchemy's documented pysqlite recipe: the driver's own
transaction handling is switched off (it begins a transaction only before a data change, and it
lets a ``SAVEPOINT`` start one that its ``RELEASE`` commits at once, so a later rollback undid
nothing) and SQLAlchemy emits the ``BEGIN`` itself. It is ``BEGIN IMMEDIATE``: the write lock is
taken when the transaction starts, so a transaction that reads and then writes (the next version
number of a model) is serialised against every other writer instead of failing with "database
is locked" when another writer committed after its read. Two kinds of transaction begin
deferred (a plain ``BEGIN``, a read snapshot that never waits for the writer in WAL mode): those
of a ``Database.reading()`` session, and one a thread opens while it already holds the
write lock on another connection (a nested read, e.g. loading a model inside a request's
session), which would otherwise wait for itself.

Migrating is a deployment step (``labelserve migrate``, the compose file's ``migrate`` service),
run once before the API and the workers start, so that several API replicas never race to alter
the schema and a migration that fails stops the rollout instead of one replica.
``prepare_schema`` is what the API does at start-up: migrate when ``LABELSERVE_AUTO_MIGRATE``
says so (by default only on SQLite, the embedded single-process set-up), otherwise refuse to
start on a database whose schema is not the one this code needs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
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


READONLY = "labelserve_readonly"  # execution option of the connections of read-only sessions


class _WriteLocks:
    """How many SQLite write transactions each thread holds open (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[int] = Counter()

    def held_here(self) -> bool:
        with self._lock:
            return self._held[threading.get_ident()] > 0

    def taken(self, info: dict[str, Any]) -> None:
        owner = threading.get_ident()
        with self._lock:
            self._held[owner] += 1
        info["write_lock_owner"] = owner

    def released(self, info: dict[str, Any]) -> None:
        owner = info.pop("write_lock_owner", None)
        if owner is not None:
            with self._lock:
                self._held[owner] -= 1
                if self._held[owner] <= 0:
                    del self._held[owner]


_write_locks = _WriteLocks()


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # no implicit BEGIN/COMMIT from pysqlite (see above)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(connection: Any) -> None:
            if connection.get_execution_options().get(READONLY) or _write_locks.held_here():
                connection.exec_driver_sql("BEGIN")
                return
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            _write_locks.taken(connection.info)

        @event.listens_for(engine, "commit")
        @event.listens_for(engine, "rollback")
        def _sqlite_end(connection: Any) -> None:
            _write_locks.released(connection.info)

        @event.listens_for(engine, "checkin")
        def _sqlite_checkin(_dbapi_conn: Any, record: Any) -> None:
            _write_locks.released(record.info)  # a connection returned without commit or rollback

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


class Database:
    """One database: its engine and its two session factories, built once per process.

    The one object the code below the application core holds to reach the database (never its
    URL). ``session()`` is for work that writes (on SQLite its transaction takes the write lock
    when it begins), ``reading()`` for work that only reads (a snapshot that neither takes nor
    waits for the write lock). Neither should stay open across a computation: read what the
    work needs, close the session, compute, then open another one to record the result.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        engine = get_engine(url)
        self._writer = sessionmaker(engine, expire_on_commit=False)
        self._reader = sessionmaker(engine.execution_options(**{READONLY: True}), expire_on_commit=False)

    @property
    def engine(self) -> Engine:
        return get_engine(self._url)

    def session(self) -> AbstractContextManager[Session]:
        """A read-write session, committed on success and rolled back on error."""
        return _scope(self._writer)

    def reading(self) -> AbstractContextManager[Session]:
        """A read-only session: on SQLite a snapshot that does not take (or wait for) the write lock."""
        return _scope(self._reader)


@contextmanager
def _scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    session = factory()
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
