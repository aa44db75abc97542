"""One migration at a time per database, across processes.

Two API processes started together on a new store would both find no schema and race to create
it, and the second would fail (docs/reliability.md). A migration therefore holds an
inter-process lock while it runs, so the second process waits, then finds the schema current:

- SQLite: an exclusive ``flock`` on a file next to the database (``<db>.migrate-lock``), which
  the kernel releases when its holder dies, so a killed migration leaves no stale lock.
- PostgreSQL: a session-level advisory lock, held on a connection of its own for the migration's
  duration (released by the server when that connection closes).

Other databases are migrated without a lock.
"""

from __future__ import annotations

import fcntl
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

# pg_advisory_lock's key: a fixed 32-bit number derived from the project's name, so that no
# other application's advisory locks on the same database collide with it by accident
ADVISORY_KEY = zlib.crc32(b"labelserve-migrate")


def sqlite_lock_path(url: str) -> Path | None:
    """The lock file of a file-backed SQLite database (None for in-memory or other databases)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    database = Path(parsed.database)
    return database.with_name(database.name + ".migrate-lock")


@contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """Hold the database's migration lock (waiting for it) for the body of the ``with``."""
    lock_path = sqlite_lock_path(url)
    if lock_path is not None:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released on close, or when the process dies
            yield
        return
    if make_url(url).get_backend_name() == "postgresql":
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_KEY})
                connection.commit()
                try:
                    yield
                finally:
                    connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_KEY})
                    connection.commit()
        finally:
            engine.dispose()
        return
    yield
