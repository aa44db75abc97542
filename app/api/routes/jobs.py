"""``/jobs``: job state and progress, cancellation, and batch prediction results."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app.api.deps import JobId, PageDep, RunnerDep, SessionDep, StoreDep
from app.api.errors import responses
from app.jobs.base import JobStatus
from app.schemas import JobOut, Page
from app.services import jobs

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.get("", response_model=Page[JobOut])
def list_jobs(session: SessionDep, page: PageDep, status: JobStatus | None = None) -> Page[JobOut]:
    return jobs.list_jobs(session, page, status)


@router.get("/{job_id}", response_model=JobOut, responses=responses(404))
def get_job(job_id: JobId, session: SessionDep) -> JobOut:
    return jobs.show_job(session, job_id)


@router.delete("/{job_id}", response_model=JobOut, responses=responses(404, 409))
def cancel_job(job_id: JobId, session: SessionDep, runner: RunnerDep) -> JobOut:
    return jobs.cancel_job(session, runner, job_id)


@router.get(
    "/{job_id}/result",
    response_class=FileResponse,
    responses=responses(
        404,
        409,
        success={
            200: {
                "description": "the predictions, one JSON object a line (or CSV)",
                "content": {"application/x-ndjson": {}, "text/csv": {}},
            }
        },
    ),
)
def job_result(job_id: JobId, session: SessionDep, store: StoreDep) -> FileResponse:
    """The output file of a batch prediction job (JSON lines or CSV)."""
    path = jobs.result_file(session, store, job_id)
    media = "text/csv" if path.suffix == ".csv" else "application/x-ndjson"
    return FileResponse(path, media_type=media, filename=f"{job_id}{path.suffix}")
