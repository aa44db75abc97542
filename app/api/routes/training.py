"""``POST /train``: queue a training job (everything checkable is checked first)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.api import examples
from app.api.deps import CallerDep, CoreDep
from app.api.errors import responses
from app.api.json_body import JsonBodyRoute
from app.schemas import JobAccepted, JobOut, TrainRequest
from app.services import training

router = APIRouter(route_class=JsonBodyRoute, tags=["training"])


@router.post(
    "/train",
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
        507,
        success={
            202: examples.accepted("the job, queued: poll status_url until its status is final"),
            200: {"model": JobOut, "description": "?wait=true: the job once it ended"},
        },
    ),
)
async def train(
    body: Annotated[TrainRequest, Body(openapi_examples=examples.TRAIN)],
    core: CoreDep,
    caller: CallerDep,
    wait: bool = False,
    timeout: Annotated[float, Query(gt=0, le=86_400, description="seconds ?wait=true blocks at most")] = 3600,
) -> Any:
    """Queue a training job; with ``?wait=true`` block until it ends and return the job."""
    if wait:
        finished = await training.submit_and_wait(core, body, caller, timeout)
        return JSONResponse(finished.model_dump(mode="json"), status_code=200)
    job = await run_in_threadpool(training.submit, core, body, caller)
    return JobAccepted.of(job)
