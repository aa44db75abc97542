"""Engine and sessions, and the schema: applying the Alembic migrations, checking they were applied.

SQLite gets WAL and a busy timeout so the API process and the training processes can write
concurrently; any other SQLAlchemy URL (PostgreSQL via psycopg) is used as given. SQLite
transactions are made real with SQLAlchemy's documented pysqlite recipe (the driver's own
transaction handling, which let a ``SAVEPOINT``'s rollback undo nothing, is off) and begin with
``BEGIN IMMEDIATE``, so a transaction that reads then writes (the next version number) is
serialised against every other writer instead of failing with "database is locked". Two kinds
begin deferred, as read snapshots that never wait for the writer: a ``Database.reading()``
session, and a nested read on a thread that already holds the write lock (it would wait for itself).

Migrating is a deployment step (``labelserve migrate``), run once before the API and the workers
start; ``prepare_schema`` is what the API does at start-up: migrate when ``LABELSERVE_AUTO_MIGRATE``
says so (by default only on SQLite), otherwise refuse a database whose schema is not this code's.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.errors import InsufficientStorage
from app.storage.db_errors import is_disk_full_error
from app.storage.migration_lock import migration_lock
from app.storage.spare_space import SpareSpace

T = TypeVar("T")
log = logging.getLogger("labelserve.db")

MIGRATIONS = Path(__file__).parent / "migrations"


class SchemaNotCurrent(RuntimeError):
    """The database's schema revision is not the one this code was written for."""


READONLY = "labelserve_readonly"  # execution option of the connections of read-only sessions
SPARE = "labelserve_spare"  # the key of a write session's ``info`` holding the database's ``SpareSpace``

#: the 507 of a deletion that could not be recorded: deleting something else fails the same way
NO_ROOM_TO_DELETE = (
    "the disk holding the database is full, and this deletion could not be recorded even after "
    "giving up the service's spare space; deleting other datasets or models would fail the same way. "
    "Free space on that disk by other means (remove files that are not the service's, or enlarge the "
    "volume), then retry"
)


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
    ``spare``: the spare space a deletion gives up on a full disk (SQLite files only; its write
    sessions carry it in ``info``, for ``commit_deletion``).
    """

    def __init__(self, url: str) -> None:
        self._url = url
        engine = get_engine(url)
        self.spare = _spare_of(url)
        self._writer = sessionmaker(engine, expire_on_commit=False, info={SPARE: self.spare})
        self._reader = sessionmaker(engine.execution_options(**{READONLY: True}), expire_on_commit=False)

    @property
    def engine(self) -> Engine:
        return get_engine(self._url)

    def session(self) -> AbstractContextManager[Session]:
        """A read-write session, committed on success and rolled back on error."""
        return _scope(self._writer)

    def reading(self) -> AbstractContextManager[Session]:
        """A read-only session: on SQLite a snapshot that does not take (or wait for) the write lock.

        It ends without a commit (there is nothing to commit), and a connection lost after its
        reads (a PostgreSQL backend terminated) does not undo them: the connection is dropped
        from the pool and what was read stands."""
        return _reading_scope(self._reader)


def _spare_of(url: str) -> SpareSpace | None:
    """The spare file of a SQLite database file (``app.storage.spare_space``); None for other databases,
    whose disk is their server's to manage, and for in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return SpareSpace(path.with_name(f"{path.name}.spare"))


def commit_deletion(session: Session, stage: Callable[[], T], *, free_first: Callable[[T], None] | None = None) -> T:
    """Stage a deletion (``stage()``, which may be run again) and commit it, even on a full disk.

    A commit that finds the disk full is rolled back, the database's spare space is given up and
    the deletion staged and committed again; failing that, ``free_first(staged)`` (removing the
    deleted thing's own files, for a state the service already answers) frees what it can before a last
    attempt. ``InsufficientStorage`` (``NO_ROOM_TO_DELETE``) when nothing made room. A cancelled
    job is committed this way too: stopping a job is also how room is made.
    """
    spare = session.info.get(SPARE)
    ways: list[Callable[[T], object]] = []
    if isinstance(spare, SpareSpace) and spare.present():
        ways.append(lambda _staged: spare.release())
    if free_first is not None:
        ways.append(free_first)
    result = stage()
    for make_room in [*ways, None]:
        try:
            session.commit()
            return result
        except OperationalError as exc:
            if not is_disk_full_error(exc):
                raise
            session.rollback()
        if make_room is None:
            break
        make_room(result)
        result = stage()
    raise InsufficientStorage(NO_ROOM_TO_DELETE)


def keep_spare(session: Session) -> None:
    """Make the database's spare again if a deletion gave it up (best effort: only when there is
    room; the store sweep tries again)."""
    spare = session.info.get(SPARE)
    if isinstance(spare, SpareSpace):
        spare.keep()


@contextmanager
def _reading_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    session = factory()
    try:
        yield session
    finally:
        try:
            session.close()  # rolls the read-only transaction back
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.warning(
                "a read-only session's connection was lost after its reads", extra={"error": type(exc.orig).__name__}
            )


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
    if sql:
        command.upgrade(alembic_config(url), revision, sql=True)
        return
    with migration_lock(url):  # processes started together on a new database migrate in turn
        if revision == "head" and current_revision(url) == head_revision():
            return  # current already: a restart skips loading alembic's environment and scripts
        command.upgrade(alembic_config(url), revision)


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    """The newest revision of the migration scripts: the schema this code needs (the scripts are
    part of the installed code, read once per process)."""
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
