"""Every change of a job's state: the only code that writes ``jobs.status`` (and its companions).

A job moves through ``JobStatus`` like this (``-`` = not allowed; the row is left as it is)::

                  queued      running                    succeeded / failed / cancelled
    create        (new row)   -                          -
    withdraw      (deleted)   -                          -
    claim         -> running  -                          -
    progress      -           running (stage, fraction)  -
    beat          -           running (heartbeat_at)     -
    succeed       -           -> succeeded               -
    fail          -> failed   -> failed                  -
    cancel        -> cancelled -> cancelled              -
    recover       (re-sent)   -> failed (interrupted, or -
                              silent past the heartbeat
                              timeout)

Every transition is one compare-and-set ``UPDATE ... WHERE status IN (<allowed sources>)`` and
says whether it applied, so the API, the job's worker, a reaper and a duplicate delivery are safe
against each other: whoever moves the row first wins, the others see that they lost. The functions
never commit: the caller decides the transaction (a training registers its version and succeeds
in one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, cast
from uuid import uuid4

from sqlalchemy import ColumnElement, CursorResult, Update, delete, func, select, update
from sqlalchemy.orm import Session

from app.jobs.base import ACTIVE, CANCELLED_BY_REQUEST, INTERRUPTED, WORKER_DIED, JobStatus
from app.jobs.payloads import JobPayload
from app.storage.orm import Job, utcnow

log = logging.getLogger("labelserve.jobs")


def _apply(session: Session, statement: Update) -> int:
    """Run an UPDATE and return how many rows it changed."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def _guarded(job_ids: Iterable[str] | None, sources: Iterable[JobStatus], *when: ColumnElement[bool]) -> Update:
    """``UPDATE jobs WHERE status IN sources [AND id IN job_ids] AND when...`` (values still to set)."""
    statement = update(Job).where(Job.status.in_([s.value for s in sources]), *when)
    if job_ids is not None:
        statement = statement.where(Job.id.in_(list(job_ids)))
    return statement


def create(session: Session, payload: JobPayload, submitter: str | None = None, address: str | None = None) -> Job:
    """A new ``queued`` job carrying ``payload``, queued with the API key named ``submitter`` by
    the client at ``address`` (added to the session, not committed)."""
    job = Job(
        id=uuid4().hex,
        submitter=submitter,
        submitted_from=address,
        kind=payload.kind,
        status=JobStatus.QUEUED.value,
        stage="queued",
        progress=0.0,
        request=payload.model_dump(mode="json"),
        **payload.columns(),
    )
    session.add(job)
    return job


def withdraw(session: Session, job_id: str) -> bool:
    """Delete a ``queued`` job that no backend took (the broker refused it): the submit is
    answered as if it had never been made. False when the job has moved on meanwhile."""
    deleted = session.execute(delete(Job).where(Job.id == job_id, Job.status == JobStatus.QUEUED.value))
    return bool(cast(CursorResult[Any], deleted).rowcount)


def claim(session: Session, job_id: str, worker: str) -> Job | None:
    """``queued -> running`` for the process ``worker`` (``host:pid``); the job, or None if taken."""
    now = utcnow()
    changed = _apply(
        session,
        _guarded([job_id], [JobStatus.QUEUED]).values(
            status=JobStatus.RUNNING.value, stage="starting", started_at=now, heartbeat_at=now, worker=worker
        ),
    )
    if not changed:
        return None
    job = session.get(Job, job_id, populate_existing=True)
    if job is not None:
        log.info("job started", extra={"job_id": job_id, "kind": job.kind, "method": job.method, "worker": worker})
    return job


def report_progress(session: Session, job_id: str, stage: str, fraction: float) -> bool:
    """Record a running job's stage and progress (a sign of life too: it stamps the heartbeat);
    False once it is no longer running."""
    values = {"stage": stage[:64], "progress": float(min(max(fraction, 0.0), 1.0)), "heartbeat_at": utcnow()}
    return bool(_apply(session, _guarded([job_id], [JobStatus.RUNNING]).values(**values)))


def beat(session: Session, job_id: str) -> bool:
    """Stamp a running job's heartbeat; False once it is no longer running."""
    return bool(_apply(session, _guarded([job_id], [JobStatus.RUNNING]).values(heartbeat_at=utcnow())))


def lock_running(session: Session, job_id: str) -> bool:
    """Lock the job's row for this transaction (PostgreSQL) and tell whether it is still running.

    Taken before a result is registered, so a cancellation cannot slip in between the check and
    ``succeed`` on a database that honours row locks.
    """
    status = session.scalar(select(Job.status).where(Job.id == job_id).with_for_update())
    return status == JobStatus.RUNNING.value


def succeed(session: Session, job_id: str, *, model_version: int | None = None, result_path: str | None = None) -> bool:
    """``running -> succeeded`` with what the job produced; False when it had been cancelled or failed."""
    values: dict[str, Any] = {
        "status": JobStatus.SUCCEEDED.value,
        "stage": "done",
        "progress": 1.0,
        "finished_at": utcnow(),
    }
    if model_version is not None:
        values["model_version"] = model_version
    if result_path is not None:
        values["result_path"] = result_path
    return bool(_apply(session, _guarded([job_id], [JobStatus.RUNNING]).values(**values)))


def fail(
    session: Session,
    job_ids: str | Sequence[str],
    error: str,
    *,
    sources: Iterable[JobStatus] = ACTIVE,
    when: Sequence[ColumnElement[bool]] = (),
) -> list[str]:
    """``sources -> failed`` with ``error`` for each job still in ``sources`` (and matching ``when``).

    Returns the ids actually failed. The default sources are every active state: a job can fail
    before it starts (its message could not be sent) as well as while it runs.
    """
    ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
    failed = []
    for job_id in ids:  # one row at a time, to tell which ones were changed on every backend
        values = {"status": JobStatus.FAILED.value, "error": error, "finished_at": utcnow()}
        if _apply(session, _guarded([job_id], sources, *when).values(**values)):
            failed.append(job_id)
    for job_id in failed:
        log.error("job failed", extra={"job_id": job_id, "error": error})
    return failed


def cancel(session: Session, job_id: str) -> bool:
    """``queued | running -> cancelled``; False when the job had already ended."""
    values = {
        "status": JobStatus.CANCELLED.value,
        "stage": "cancelled",
        "finished_at": utcnow(),
        "error": CANCELLED_BY_REQUEST,
    }
    changed = bool(_apply(session, _guarded([job_id], ACTIVE).values(**values)))
    if changed:
        log.info("job cancelled", extra={"job_id": job_id})
    return changed


def fail_interrupted(session: Session) -> list[str]:
    """Recovery of a single-machine service: every ``running`` job was running in a process that
    is gone (the service stopped), so it fails as interrupted."""
    running = list(session.scalars(select(Job.id).where(Job.status == JobStatus.RUNNING.value)).all())
    return fail(session, running, INTERRUPTED, sources=[JobStatus.RUNNING])


def _stale(timeout: float) -> ColumnElement[bool]:
    """SQL condition: the job's last sign of life is older than ``timeout`` seconds."""
    cutoff = utcnow() - timedelta(seconds=timeout)
    return func.coalesce(Job.heartbeat_at, Job.started_at, Job.created_at) < cutoff


def fail_stale(session: Session, timeout: float, job_id: str | None = None, *, spare: Sequence[str] = ()) -> list[str]:
    """Recovery with remote workers: fail every ``running`` job (or just ``job_id``) whose
    heartbeat is older than ``timeout`` seconds; its process died without recording it.
    ``spare``: jobs whose process is known to be alive (the local backend can tell)."""
    query = select(Job.id).where(Job.status == JobStatus.RUNNING.value, _stale(timeout))
    if job_id is not None:
        query = query.where(Job.id == job_id)
    if spare:
        query = query.where(Job.id.not_in(list(spare)))
    stale = list(session.scalars(query).all())
    error = f"{WORKER_DIED}: no heartbeat for more than {timeout:g} s"
    # the staleness is checked again in the update: a beat may have landed in between
    return fail(session, stale, error, sources=[JobStatus.RUNNING], when=[_stale(timeout)])


def fail_orphan(session: Session, job_id: str, worker: str) -> bool:
    """``running -> failed`` for a job whose recorded process ``worker`` is known to be dead."""
    return bool(fail(session, job_id, WORKER_DIED, sources=[JobStatus.RUNNING], when=[Job.worker == worker]))


def queued(session: Session) -> list[str]:
    """The ids of the jobs waiting to run, oldest first (what recovery sends again)."""
    query = select(Job.id).where(Job.status == JobStatus.QUEUED.value).order_by(Job.created_at)
    return list(session.scalars(query).all())
