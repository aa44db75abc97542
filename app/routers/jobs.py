"""``/jobs``: job state and progress, cancellation, and batch prediction results."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import FileResponse
from sqlalchemy import select

from app.deps import PageDep, RunnerDep, SessionDep, StoreDep
from app.jobs.base import JobStatus
from app.jobs.queue import cancel, job_out
from app.orm import Job
from app.paging import page
from app.schemas import JobOut, Page

router = APIRouter(prefix="/jobs", tags=["jobs"])


def get_job_or_404(session: SessionDep, job_id: str) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(404, f"job '{job_id}' not found")
    return job


@router.get("", response_model=Page[JobOut])
def list_jobs(session: SessionDep, page_params: PageDep, status: JobStatus | None = None) -> Page[JobOut]:
    limit, offset = page_params
    query = select(Job).order_by(Job.created_at.desc(), Job.id)
    if status is not None:
        query = query.where(Job.status == status.value)
    return page(session, query, limit, offset, job_out)


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: str, session: SessionDep) -> JobOut:
    return job_out(get_job_or_404(session, job_id))


@router.delete("/{job_id}", response_model=JobOut)
def cancel_job(job_id: str, session: SessionDep, runner: RunnerDep) -> JobOut:
    job = get_job_or_404(session, job_id)
    if not cancel(session, runner, job_id):
        session.refresh(job)
        raise HTTPException(409, f"job '{job_id}' has already ended ({job.status})")
    session.refresh(job)
    return job_out(job)


@router.get("/{job_id}/result")
def job_result(job_id: str, session: SessionDep, store: StoreDep) -> Response:
    """The output file of a batch prediction job (JSON lines or CSV)."""
    job = get_job_or_404(session, job_id)
    if job.kind != "predict":
        raise HTTPException(404, f"job '{job_id}' is a {job.kind} job; it has no result file")
    if job.status != "succeeded" or not job.result_path:
        raise HTTPException(409, f"job '{job_id}' is {job.status}; its result is not ready")
    path = store.results / job.result_path  # relative: workers may mount the store elsewhere
    if not path.exists():
        raise HTTPException(404, f"the result of job '{job_id}' is no longer in the store")
    media = "text/csv" if path.suffix == ".csv" else "application/x-ndjson"
    return FileResponse(path, media_type=media, filename=f"{job_id}{path.suffix}")
