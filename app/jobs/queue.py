"""Creating, describing, cancelling and awaiting jobs on the API side."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.db import session_scope
from app.jobs.runner import JobRunner
from app.orm import Job, utcnow
from app.schemas import JobOut, ModelPointer

TERMINAL = ("succeeded", "failed", "cancelled")


def enqueue(session: Session, runner: JobRunner, kind: str, request: dict[str, Any], **fields: Any) -> Job:
    """Commit a queued job row, then hand its id to the runner."""
    job = Job(
        id=uuid.uuid4().hex,
        kind=kind,
        status="queued",
        stage="queued",
        progress=0.0,
        request=request,
        **fields,
    )
    session.add(job)
    session.commit()
    runner.submit(job.id)
    return job


def job_out(job: Job) -> JobOut:
    model = None
    if job.model_version is not None and job.model_name is not None:
        model = ModelPointer(name=job.model_name, version=job.model_version)
    result_url = f"/jobs/{job.id}/result" if job.result_path and job.status == "succeeded" else None
    return JobOut(
        id=job.id,
        kind=job.kind,
        status=job.status,  # type: ignore[arg-type]
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
    )


def cancel(session: Session, runner: JobRunner, job_id: str) -> bool:
    """Mark a queued or running job cancelled; False when it had already ended."""
    changed = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(("queued", "running")))
        .values(status="cancelled", stage="cancelled", finished_at=utcnow(), error="cancelled by request")
    ).rowcount
    session.commit()
    if changed:
        runner.cancel(job_id)
    return bool(changed)


def _snapshot(database_url: str, job_id: str) -> Job | None:
    with session_scope(database_url) as session:
        return session.get(Job, job_id)


async def wait_for(database_url: str, job_id: str, timeout: float) -> Job | None:
    """Poll the job (the database is the source of truth) until it ends or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        job = await asyncio.to_thread(_snapshot, database_url, job_id)
        if job is None or job.status in TERMINAL or time.monotonic() >= deadline:
            return job
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 0.25)
