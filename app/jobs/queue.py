"""Queueing, cancelling, awaiting and counting jobs on the API side (their HTTP shape is ``services.jobs.job_out``)."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.errors import TooManyRequests, Unavailable
from app.jobs import transitions
from app.jobs.base import TERMINAL, JobRunner, JobStatus
from app.jobs.events import JobEvents
from app.jobs.payloads import JobPayload
from app.storage.db import Database, commit_deletion
from app.storage.orm import Job

#: what a refusal for a full queue tells the client to wait: about the time a queued job takes to start
QUEUE_FULL_RETRY_SECONDS = 10
#: what a refusal for an unreachable job broker tells the client to wait (a broker restart)
BACKEND_DOWN_RETRY_SECONDS = 5
BACKEND_DOWN = (
    "could not queue the job: the job broker is unreachable; nothing was stored: send the request again "
    "after Retry-After seconds"
)


def check_room(session: Session, submitter: str | None, address: str | None, bound: int) -> None:
    """Refuse (429) a new job of ``submitter`` (an API key's name), or with no key of the client
    at ``address``, when it already has ``bound`` jobs queued (0: no bound).

    The count and the insert that follows must be one write transaction, or two submits at the
    bound both see room: on SQLite the transaction holds the write lock from its start
    (``BEGIN IMMEDIATE``); on PostgreSQL an advisory lock of the submitter, held until the
    transaction ends, serialises its submits.
    """
    if not bound:
        return
    share = f"key {submitter}" if submitter is not None else f"address {address}"
    if session.get_bind().dialect.name == "postgresql":
        key = zlib.crc32(f"labelserve-queue:{share}".encode())
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
    if submitter is not None:
        mine = Job.submitter == submitter
    else:  # no keys configured: the client's address
        mine = Job.submitted_from.is_(None) if address is None else Job.submitted_from == address
    queued = session.scalar(select(func.count()).select_from(Job).where(Job.status == JobStatus.QUEUED.value, mine))
    if (queued or 0) >= bound:
        whose = f"this API key ('{submitter}') has" if submitter is not None else f"this client ({address}) has"
        raise TooManyRequests(
            f"{whose} {queued} jobs queued, the most allowed (LABELSERVE_MAX_QUEUED_JOBS_PER_KEY={bound}); "
            f"retry once one has started, or cancel one (DELETE /jobs/{{id}})",
            retry_after=QUEUE_FULL_RETRY_SECONDS,
        )


def check_queueable(runner: JobRunner) -> None:
    """Refuse (503 with ``Retry-After``) a submit while the job backend cannot take jobs (the
    broker is unreachable): a job row stored then could only fail."""
    if not runner.can_queue():
        raise Unavailable(BACKEND_DOWN, retry_after=BACKEND_DOWN_RETRY_SECONDS)


def enqueue(
    session: Session,
    runner: JobRunner,
    payload: JobPayload,
    *,
    submitter: str | None = None,
    address: str | None = None,
    max_queued: int = 0,
) -> Job:
    """Commit a queued job carrying ``payload``, then hand its id to the runner; refused (429)
    when ``submitter`` (or with none, ``address``) has ``max_queued`` jobs queued already
    (``check_room``, in the same transaction as the insert), and (503) when the backend cannot
    take it: checked first, and should the hand-over still fail, the job row is withdrawn, so
    nothing stays stored.

    The commit comes first: the process that picks the job up reads it from the database.
    """
    check_queueable(runner)
    check_room(session, submitter, address, max_queued)
    job = transitions.create(session, payload, submitter, address)
    session.commit()
    try:
        runner.submit(job.id)
    except Unavailable:
        withdrawn = transitions.withdraw(session, job.id)
        session.commit()
        if withdrawn:
            raise
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
