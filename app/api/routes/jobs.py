"""``/jobs``: job state and progress, cancellation, and batch prediction results."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import FileResponse, HTMLResponse

from app.api.deps import CallerDep, CoreDep, JobId, PageDep, ReadingDep, SessionDep
from app.api.errors import responses
from app.api.headers import report_policy
from app.jobs.base import JobStatus
from app.schemas import JobOut, Page
from app.services import comparison, jobs

# every route here has a path or query parameter that can fail validation: the 422 in the API's own shape
router = APIRouter(prefix="/jobs", tags=["jobs"], responses=responses(422))


@router.get("", response_model=Page[JobOut])
def list_jobs(session: ReadingDep, page: PageDep, status: JobStatus | None = None) -> Page[JobOut]:
    return jobs.list_jobs(session, page, status)


@router.get("/{job_id}", response_model=JobOut, responses=responses(404, 429))
async def get_job(
    job_id: JobId,
    core: CoreDep,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=3600,
            description="seconds to hold the answer until the job ends (a long poll): it comes as soon as "
            "the job ends, else after this long with the job as it is then; 0 answers at once",
        ),
    ] = 0,
) -> JobOut:
    """The job's state and progress; with ``?wait=`` the answer waits for the job's end."""
    return await jobs.await_job(core, job_id, wait)


@router.delete("/{job_id}", response_model=JobOut, responses=responses(404, 409, 507))
def cancel_job(job_id: JobId, session: SessionDep, core: CoreDep, caller: CallerDep) -> JobOut:
    return jobs.cancel_job(session, core.runner, job_id, caller)


@router.get(
    "/{job_id}/result",
    response_class=FileResponse,
    responses=responses(
        404,
        409,
        success={
            200: {
                "description": "batch prediction: one JSON object a line (or CSV); compare: the leaderboard",
                "content": {"application/x-ndjson": {}, "text/csv": {}, "application/json": {}},
            }
        },
    ),
)
def job_result(job_id: JobId, session: ReadingDep, core: CoreDep) -> FileResponse:
    """The output file of a batch prediction job (JSON lines or CSV), or a compare job's leaderboard (JSON)."""
    path = jobs.result_file(session, core.store, job_id)
    media = {".csv": "text/csv", ".json": "application/json"}.get(path.suffix, "application/x-ndjson")
    return FileResponse(path, media_type=media, filename=f"{job_id}{path.suffix}")


@router.get(
    "/{job_id}/report",
    responses=responses(
        404,
        409,
        success={
            200: {
                "description": "the HTML report (charts inlined: it opens offline), or with ?format=csv the leaderboard",
                "content": {"text/html": {"schema": {"type": "string"}}, "text/csv": {"schema": {"type": "string"}}},
            }
        },
    ),
)
def job_report(
    job_id: JobId,
    session: ReadingDep,
    core: CoreDep,
    format: Annotated[
        Literal["html", "csv"], Query(description="html: the report page; csv: its leaderboard, one row per entry")
    ] = "html",
) -> Response:
    """The self-contained HTML report of a compare job (tables and interactive charts), or its leaderboard as CSV."""
    if format == "csv":
        return Response(
            comparison.leaderboard_csv(session, core.store, job_id),
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{job_id}-leaderboard.csv"'},
        )
    page = comparison.report_html(session, core.store, job_id)
    return HTMLResponse(page, headers={"Content-Security-Policy": report_policy(page)})
