"""Store housekeeping: sweeping files nothing refers to, and telling how much room is left.

Kills mid-write, failed requests and rejected ones can leave files in the store that no row
refers to: temporary files of unfinished atomic writes, arrays of an upload whose row was never
committed, artifacts of a training that never registered. ``sweep_store`` removes them at
start-up and then every ``sweep_seconds``; files younger than ``sweep_grace_seconds`` are left
alone, because a write in flight (file written, row not committed yet) is younger than that.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqlalchemy import select, text

from app.core import Core
from app.storage.orm import Dataset, ModelVersion

log = logging.getLogger("labelserve.store")


def sweep_store(core: Core) -> int:
    """Remove orphaned store files older than the grace period; how many were removed. Also makes
    the database's spare space (``app.storage.spare_space``) when it is missing and there is room."""
    with core.database.reading() as session:
        datasets = set(session.scalars(select(Dataset.sha256)).all())
        artifacts = set(session.scalars(select(ModelVersion.artifact_sha256)).all())
    removed = core.store.sweep(datasets, artifacts, core.settings.sweep_grace_seconds)
    if core.database.spare is not None:
        core.database.spare.keep()
    if removed:
        log.info("store swept", extra={"removed": [p.name for p in removed]})
    return len(removed)


def low_on_space(core: Core) -> bool:
    """True when the store has less free space than ``min_free_mb``."""
    return core.store.free_bytes() < core.settings.min_free_mb * 1024 * 1024


def database_ok(core: Core) -> bool:
    """Whether the database answers a query (readiness)."""
    try:
        with core.database.reading() as session:
            session.execute(text("SELECT 1"))
        return True
    except Exception:  # any failure to reach the database means "not ready"
        return False


@dataclass(frozen=True)
class Readiness:
    """What ``/ready`` (and the gRPC health service) checks: the database answers, the store is
    writable and has room, and the job backend can queue jobs."""

    database: bool
    writable: bool
    low_on_space: bool
    queueable: bool

    @property
    def ready(self) -> bool:
        return self.database and self.writable and not self.low_on_space and self.queueable


def readiness(core: Core) -> Readiness:
    """This process's readiness, checked now (a database query and a file made in the store)."""
    writable = core.store.writable()
    return Readiness(
        database=database_ok(core),
        writable=writable,
        low_on_space=writable and low_on_space(core),
        queueable=core.runner.can_queue(),  # a cached probe of the broker
    )


class Sweeper:
    """A daemon thread running ``sweep_store`` at start and every ``sweep_seconds`` until stopped."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="labelserve-sweeper", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                sweep_store(self._core)
            except Exception:  # the database or the disk is briefly unavailable: next round
                log.warning("store sweep failed", exc_info=True)
            if self._stop.wait(self._core.settings.sweep_seconds):
                return

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
