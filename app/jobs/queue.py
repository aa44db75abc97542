"""Queueing, cancelling, awaiting and counting jobs on the API side (their HTTP shape is ``services.jobs.job_out``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import Database, commit_deletion
from app.jobs import transitions
from app.jobs.base import TERMINAL, JobRunner, JobStatus
from app.jobs.events import JobEvents
from app.jobs.payloads import JobPayload
from app.orm import Job


def enqueue(session: Session, runner: JobRunner, payload: JobPayload) -> Job:
    """Commit a queued job carrying ``payload``, then hand its id to the runner.

    The commit comes first: the process that picks the job up reads it from the database.
    """
    job = transitions.create(session, payload)
    session.commit()
    runner.submit(job.id)
    return job


def cancel(session: Session, runner: JobRunner, job_id: str) -> bool:
    """Mark a queued or running job cancelled and stop it; False when it had already ended.

    Committed even on a full disk (``commit_deletion``): stopping a job is one way to make room."""
    changed = commit_deletion(session, lambda: transitions.cancel(session, job_id))
    if changed:
        runner.cancel(job_id)
        runner.ended(job_id)
    return changed


def _snapshot(database: Database, job_id: str) -> Job | None:
    with database.reading() as session:
        return session.get(Job, job_id)


async def wait_for(database: Database, events: JobEvents, job_id: str, timeout: float) -> Job | None:
    """The job once it has ended, or as it is when ``timeout`` passes (None: there is no such job).

    The row is read when the backend says the job may have ended (``events``), and every
    ``events.interval(job_id)`` seconds in case no one says so: the database stays the source of
    truth.
    """
    deadline = time.monotonic() + timeout
    with events.listen(job_id) as ended:
        while True:
            job = await asyncio.to_thread(_snapshot, database, job_id)
            remaining = deadline - time.monotonic()
            if job is None or job.status in TERMINAL or remaining <= 0:
                return job
            try:
                await asyncio.wait_for(ended.wait(), min(events.interval(job_id), remaining))
            except asyncio.TimeoutError:
                pass
            ended.clear()


class JobCounts(Collector):
    """Job counts by status for ``/metrics``, read from the database at scrape time (it is the
    source of truth), in a read-only session."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("labelserve_jobs", "Jobs by status", labels=["status"])
        with self._database.reading() as session:
            counts = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
        for status in JobStatus:
            family.add_metric([status.value], counts.get(status.value, 0))
        yield family
