"""Progress reporting from inside a running job, through the database.

The database is the source of truth for job state, whichever process runs the job. Every
progress report is also the cancellation check: the update only applies while the job is still
``running``, so a job cancelled through the API stops at its next report.
"""

from __future__ import annotations

import time

from sqlalchemy import update

from app.db import session_scope
from app.methods.base import JobCancelled
from app.orm import Job


class JobProgress:
    """Callable ``(stage, fraction)`` given to ``fit``; writes at most every ``interval`` s."""

    def __init__(self, database_url: str, job_id: str, interval: float = 0.25) -> None:
        self.database_url = database_url
        self.job_id = job_id
        self.interval = interval
        self._stage: str | None = None
        self._last = 0.0

    def __call__(self, stage: str, fraction: float) -> None:
        now = time.monotonic()
        if stage == self._stage and now - self._last < self.interval:
            return
        self._stage, self._last = stage, now
        with session_scope(self.database_url) as session:
            result = session.execute(
                update(Job)
                .where(Job.id == self.job_id, Job.status == "running")
                .values(stage=stage[:64], progress=float(min(max(fraction, 0.0), 1.0)))
            )
            if result.rowcount == 0:
                raise JobCancelled(self.job_id)
