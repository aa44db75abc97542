"""``POST /compare``: cross-validate methods on a dataset as a job (leaderboard and HTML report)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from app.api.deps import CoreDep, SessionDep
from app.api.errors import responses
from app.schemas import CompareRequest, JobOut
from app.services import comparison

router = APIRouter(tags=["comparison"])


@router.post("/compare", status_code=202, response_model=JobOut, responses=responses(404, 400, 413, 422, 429))
async def compare(body: CompareRequest, session: SessionDep, core: CoreDep) -> JobOut:
    """Queue a compare job; its result is the leaderboard, ``/jobs/{id}/report`` the HTML report."""
    return await run_in_threadpool(comparison.submit, session, core, body)
