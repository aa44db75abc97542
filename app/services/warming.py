"""Warming newly registered versions: loaded into this process's model cache before anyone asks.

Without it the first prediction of a new version pays its load inside the request (docs/scale.md).
With ``LABELSERVE_WARM_NEW_VERSIONS`` on, each API process runs a ``Warmer``: a daemon thread that
reads the registry token (``Store.registry_token``, no database round trip) every
``warm_poll_seconds``; when it changed, it loads the newest of each model name's versions
registered since its last look through the model cache (``ModelCache.get``), as a request would,
and a request arriving meanwhile waits for that load. Warming evicts like any load; a version
larger than the whole cache is not warmed, nor are versions that existed at start-up.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import func, select

from app.core import Core
from app.registry.versions import VersionKey
from app.storage.orm import ModelVersion

log = logging.getLogger("labelserve.warming")


class Warmer:
    """Loads each model name's newest version into the cache once it is registered."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="labelserve-warmer", daemon=True)
        self._token = core.store.registry_token()
        with core.database.reading() as session:
            self._last_id = session.scalar(select(func.max(ModelVersion.id))) or 0

    def check(self) -> list[VersionKey]:
        """One look: warm what was registered since the last one; the keys warmed."""
        token = self._core.store.registry_token()  # before the query: a change during it is seen next time
        if token == self._token:
            return []
        with self._core.database.reading() as session:
            rows = session.execute(
                select(ModelVersion.id, ModelVersion.created_at, ModelVersion.model_name, ModelVersion.artifact_sha256)
                .where(ModelVersion.id > self._last_id)
                .order_by(ModelVersion.id)
            ).all()
        self._token = token
        if not rows:
            return []
        self._last_id = rows[-1].id
        newest = {row.model_name: row for row in rows}  # ids grow with versions: the last row of a name
        warmed = []
        for row in newest.values():
            limit = self._core.cache.max_bytes
            if limit is not None and self._core.store.artifact_size(row.artifact_sha256) > limit:
                log.info("not warmed: larger than the model cache", extra={"model": row.model_name})
                continue
            start = time.perf_counter()
            key: VersionKey = (row.id, row.created_at)
            try:
                self._core.cache.get(key)
            except Exception:  # deleted meanwhile, or its artifact unreadable: its requests will say so
                log.warning("warming failed", extra={"model": row.model_name}, exc_info=True)
                continue
            warmed.append(key)
            log.info("warmed", extra={"model": row.model_name, "seconds": round(time.perf_counter() - start, 3)})
        return warmed

    def _run(self) -> None:
        while not self._stop.wait(self._core.settings.warm_poll_seconds):
            try:
                self.check()
            except Exception:  # the database away: the next round looks again
                log.warning("warming failed", exc_info=True)

    def start(self) -> Warmer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
