"""Database errors that pass: telling them from the others, and retrying a unit of work through one.

With PostgreSQL backends terminated under load, uploads and listings answered 500 and trainings
failed as "internal error": ``pool_pre_ping`` tests a connection only when it is checked out,
so a connection that drops during a request fails that request. Such an error is *transient*:
the same work succeeds on a new connection a moment later. So is SQLite's "database is locked"
after the busy timeout. The API answers them 503 with ``Retry-After`` (``app.api.errors``), and
a job retries the transition that met one (``retry_transient``) instead of failing.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

log = logging.getLogger("labelserve.db")

T = TypeVar("T")

RETRY_AFTER_SECONDS = 1  # what a 503 for a transient database error tells the client

# SQLSTATE classes and codes of PostgreSQL errors that a new connection or a second attempt
# resolves: connection exceptions (08), operator intervention (57P01 admin shutdown, 57P02 crash
# shutdown, 57P03 cannot connect now), serialization failure and deadlock (40001, 40P01)
_TRANSIENT_STATES = ("08", "57P01", "57P02", "57P03", "40001", "40P01")
_SQLITE_BUSY = ("database is locked", "database is busy", "database table is locked")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a database error the same work would not meet again a moment later."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:  # SQLAlchemy recognised a disconnect and dropped the connection
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)  # psycopg 3
    if isinstance(sqlstate, str) and sqlstate.startswith(_TRANSIENT_STATES):
        return True
    return isinstance(exc, OperationalError) and any(text in str(exc.orig).lower() for text in _SQLITE_BUSY)


def is_disk_full_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the database finding its disk full (SQLite's "database or disk is
    full", or the driver's own ``ENOSPC``/``EDQUOT``)."""
    original = getattr(exc, "orig", None)  # the DBAPI error inside SQLAlchemy's wrapper
    if isinstance(original, OSError) and original.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(original or "").lower()
    return "disk is full" in text or "no space left" in text


def retry_transient(work: Callable[[], T], *, attempts: int = 4, pause: float = 0.5, what: str = "") -> T:
    """``work()``, run again (after ``pause``, then twice as long, ...) while it fails with a
    transient database error, ``attempts`` times in all; the last error is raised.

    ``work`` must be one whole transaction (open its session inside), so that a retry repeats
    it from the start on a new connection.
    """
    for attempt in range(1, attempts + 1):
        try:
            return work()
        except DBAPIError as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            log.warning("transient database error; retrying", extra={"what": what, "attempt": attempt}, exc_info=True)
            time.sleep(pause * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # the loop returns or raises
