"""``POST /compare``: cross-validate methods on a dataset as a job (leaderboard and HTML report)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool

from app.api import examples
from app.api.deps import CallerDep, CoreDep, SessionDep
from app.api.errors import responses
from app.api.json_body import JsonBodyRoute
from app.schemas import CompareRequest, JobAccepted
from app.services import comparison

router = APIRouter(route_class=JsonBodyRoute, tags=["comparison"])


@router.post(
    "/compare",
    status_code=202,
    response_model=JobAccepted,
    responses=responses(
        404,
        409,
        400,
        413,
        422,
        429,
        503,
        success={202: examples.accepted("the compare job, queued: poll status_url until its status is final")},
    ),
)
async def compare(
    body: Annotated[CompareRequest, Body(openapi_examples=examples.COMPARE)],
    session: SessionDep,
    core: CoreDep,
    caller: CallerDep,
) -> JobAccepted:
    """Queue a compare job; its result is the leaderboard, ``/jobs/{id}/report`` the HTML report."""
    return JobAccepted.of(await run_in_threadpool(comparison.submit, session, core, body, caller))
