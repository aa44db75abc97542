"""Jobs as the API sees them: listing, showing (at once or once ended), cancelling, and result files."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import ScalarSelect, case, func, select
from sqlalchemy.orm import Session, aliased

from app.config import Settings
from app.core import Core
from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.jobs import queue
from app.jobs.base import JobRunner, JobStatus
from app.jobs.payloads import JobPayload
from app.jobs.queue import cancel, wait_for
from app.schemas import JobOut, ModelPointer, Page
from app.services.keys import Caller, Role
from app.services.paging import PageParams, page
from app.storage.orm import Job
from app.storage.store import Store


def job_out(job: Job, queue_position: int | None = None) -> JobOut:
    model = None
    if job.model_version is not None and job.model_name is not None:
        model = ModelPointer(name=job.model_name, version=job.model_version)
    status = JobStatus(job.status)
    result_url = f"/jobs/{job.id}/result" if job.result_path and status is JobStatus.SUCCEEDED else None
    return JobOut(
        id=job.id,
        kind=job.kind,
        status=status,
        progress=job.progress,
        stage=job.stage,
        method=job.method,
        dataset_id=job.dataset_id,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        model=model,
        error=job.error,
        result_url=result_url,
        queue_position=queue_position if status is JobStatus.QUEUED else None,
        random_state=_seed(job.request),
        max_seconds=job.request.get("max_seconds"),
        submitted_by=job.submitter,
    )


def check_room(session: Session, core: Core, caller: Caller) -> None:
    """Refuse before any work a submit that could not be queued: 503 while the job backend cannot
    take jobs, 429 when the caller (its key; with no keys, its address) already has the most jobs
    queued (``LABELSERVE_MAX_QUEUED_JOBS_PER_KEY``); ``queue_job`` checks both again with its insert."""
    queue.check_queueable(core.runner)
    queue.check_room(session, caller.name, caller.address, core.settings.max_queued_jobs_per_key)


def queue_job(session: Session, core: Core, payload: JobPayload, caller: Caller) -> JobOut:
    """Queue a job for the caller, recording its key's name and address: refused (429, nothing
    stored) when it already has ``LABELSERVE_MAX_QUEUED_JOBS_PER_KEY`` jobs queued; counted and
    inserted in one transaction."""
    job = queue.enqueue(
        session,
        core.runner,
        payload,
        submitter=caller.name,
        address=caller.address,
        max_queued=core.settings.max_queued_jobs_per_key,
    )
    return job_out(job)


def time_limit(settings: Settings, requested: float | None) -> float | None:
    """The request's ``max_seconds``, checked against the server's ``LABELSERVE_MAX_JOB_SECONDS``.

    A larger one is refused rather than clamped: a client that asked for an hour and silently got
    ten minutes would read the failed job as its own fault.
    """
    server = settings.max_job_seconds
    if requested is not None and requested > server:
        raise InvalidInput(
            f"{requested:g} s exceeds the server's job time limit of {server:g} s (LABELSERVE_MAX_JOB_SECONDS); "
            f"give at most {server:g}, or omit it",
            loc=("body", "max_seconds"),
        )
    return requested


def _seed(request: dict[str, Any]) -> int | None:
    """The seed a job's payload carries: the method's own ``random_state`` (decided at submit),
    else the request's (auto's folds and candidates, a comparison's folds)."""
    params = request.get("params")
    seed = params.get("random_state") if isinstance(params, dict) else None
    if seed is None:
        seed = request.get("random_state")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _job(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"job '{job_id}' not found")
    return job


def list_jobs(session: Session, params: PageParams, status: JobStatus | None) -> Page[JobOut]:
    query = select(Job).order_by(Job.created_at.desc(), Job.id)
    if status is not None:
        query = query.where(Job.status == status.value)
    found = page(session, query, params, job_out)
    positions = queue_positions(session, [j.id for j in found.items if j.status == JobStatus.QUEUED])
    for item in found.items:
        item.queue_position = positions.get(item.id)
    return found


def count_jobs(session: Session, status: JobStatus | None) -> int:
    """How many jobs there are (of ``status``): a listing's total."""
    query = select(func.count()).select_from(Job)
    if status is not None:
        query = query.where(Job.status == status.value)
    return session.scalar(query) or 0


def times_of(session: Session, job_ids: Iterable[str | None]) -> dict[str, tuple[datetime | None, datetime | None]]:
    """When each of the jobs started and ended (a version's whole job beside its final fit), in one query."""
    wanted = {i for i in job_ids if i}
    if not wanted:
        return {}
    rows = session.execute(select(Job.id, Job.started_at, Job.finished_at).where(Job.id.in_(wanted)))
    return {job_id: (started, ended) for job_id, started, ended in rows}


def cancel_job(session: Session, runner: JobRunner, job_id: str, caller: Caller) -> JobOut:
    """Cancel a queued or running job; Conflict when it has already ended, Forbidden when it is
    another key's and the caller's role is not ``admin``."""
    job = _job(session, job_id)
    if job.submitter != caller.name and not caller.role.allows(Role.ADMIN):
        owner = f"key '{job.submitter}'" if job.submitter is not None else "no key"
        raise Forbidden(
            f"job '{job_id}' was queued by {owner}: this key (name '{caller.name}', role '{caller.role.value}') "
            f"may cancel only its own jobs; another key's needs the 'admin' role"
        )
    cancelled = cancel(session, runner, job_id)
    session.refresh(job)
    if not cancelled:
        raise Conflict(f"job '{job_id}' has already ended ({job.status})")
    return job_out(job)


async def await_job(core: Core, job_id: str, timeout: float) -> JobOut:
    """The job once it has ended, or as it is when ``timeout`` seconds have passed (0: at once).

    A request that waits takes one of the process's ``LABELSERVE_MAX_WAITERS`` places (429 when
    none is free); one answered at once parks nothing and needs none.
    """
    if timeout <= 0:
        return await job_when_ended(core, job_id, 0)
    with core.runner.events.admitted():
        return await job_when_ended(core, job_id, timeout)


async def job_when_ended(core: Core, job_id: str, timeout: float) -> JobOut:
    """``await_job`` for a caller that holds its waiting place already (``POST /train?wait=true``).

    The end is learnt from the runner's notification as soon as it is committed (see
    ``app.jobs.events``), not from polling.
    """
    job = await wait_for(core.database, core.runner.events, job_id, timeout)
    if job is None:
        raise NotFound(f"job '{job_id}' not found")
    if job.status != JobStatus.QUEUED:
        return job_out(job)
    with core.database.reading() as session:  # a job that waits says how many are ahead of it
        position = queue_positions(session, [job_id]).get(job_id)
    return job_out(job, position)


def result_file(session: Session, store: Store, job_id: str) -> Path:
    """The output file of a succeeded batch prediction (JSON lines or CSV) or compare job (JSON)."""
    job = _job(session, job_id)
    if job.kind not in ("predict", "compare"):
        raise NotFound(f"job '{job_id}' is a {job.kind} job; it has no result file")
    if job.status != JobStatus.SUCCEEDED or not job.result_path:
        raise Conflict(f"job '{job_id}' is {job.status}; its result is not ready")
    path = store.results / job.result_path  # relative: workers may mount the store elsewhere
    if not path.exists():
        raise NotFound(f"the result of job '{job_id}' is no longer in the store")
    return path


def _ahead() -> ScalarSelect[int]:
    """The number of queued jobs created before the row of ``Job`` it is correlated with."""
    earlier = aliased(Job)
    return (
        select(func.count())
        .select_from(earlier)
        .where(earlier.status == JobStatus.QUEUED.value, earlier.created_at < Job.created_at)
        .correlate(Job)
        .scalar_subquery()
    )


def queue_positions(session: Session, job_ids: list[str]) -> dict[str, int]:
    """Each queued job's place in the queue (1: next to start), for those of ``job_ids`` that are queued.

    Jobs start in the order they were queued; the place counts the queued jobs created before
    it: one query, with an indexed count per queued job asked about, never a scan of the whole table.
    """
    if not job_ids:
        return {}
    rows = session.execute(
        select(Job.id, _ahead()).where(Job.id.in_(job_ids), Job.status == JobStatus.QUEUED.value)
    ).all()
    return {job_id: int(ahead) + 1 for job_id, ahead in rows}


class JobProgress(NamedTuple):
    """What the dashboard's progress poll shows of a job."""

    id: str
    status: JobStatus
    progress: float
    stage: str
    position: int | None  # the place in the queue of a queued job
    started_at: datetime | None = None
    finished_at: datetime | None = None


def progress_of(session: Session, job_ids: list[str]) -> list[JobProgress]:
    """The progress of the jobs of ``job_ids`` that exist, in one query of the columns shown (the
    dashboard's poll: it had cost one query per job, and more per queued job)."""
    if not job_ids:
        return []
    position = case((Job.status == JobStatus.QUEUED.value, _ahead() + 1), else_=None)
    rows = session.execute(
        select(Job.id, Job.status, Job.progress, Job.stage, position, Job.started_at, Job.finished_at).where(
            Job.id.in_(job_ids)
        )
    )
    return [JobProgress(i, JobStatus(status), *rest) for i, status, *rest in rows]


def show_job(session: Session, job_id: str) -> JobOut:
    """The job as it is now (NotFound when there is none)."""
    job = _job(session, job_id)
    return job_out(job, queue_positions(session, [job.id]).get(job.id))
