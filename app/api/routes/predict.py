"""``POST /predict``: label sets, rankings, distributions or selected features."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Body, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.api import examples
from app.api.access import caller_of
from app.api.errors import responses
from app.api.json_body import JsonBodyRoute
from app.core import Core
from app.schemas import JobAccepted, JobOut, PredictRequest, PredictResponse
from app.services import prediction
from app.services.keys import Caller

router = APIRouter(route_class=JsonBodyRoute, tags=["prediction"])


@router.post(
    "/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    responses=responses(
        404,
        409,
        400,
        413,
        422,
        429,
        503,
        success={202: {"model": JobAccepted, **examples.accepted("a large dataset, predicted as a job")}},
    ),
)
async def predict(
    body: Annotated[PredictRequest, Body(openapi_examples=examples.PREDICT)], request: Request
) -> Response:
    """Label sets, label rankings, label distributions or a selector's features, as JSON.

    Give `instances` (a list of feature vectors, or of `{feature: value}` objects) or the
    `dataset_id` of a stored dataset; a stored dataset of more than `LABELSERVE_BATCH_JOB_ROWS`
    rows is predicted as a job (202, then `GET /jobs/{id}/result`).
    """
    # Cached references with a few instances rarely get here (``app.api.fast_path`` answers
    # them); this path resolves, reads stored datasets and shapes every error, in a worker thread.
    answer = await run_in_threadpool(_predict, body, request.app.state.core, caller_of(request))
    if isinstance(answer, JobOut):
        return JSONResponse(JobAccepted.of(answer).model_dump(mode="json"), status_code=202)
    # the service builds the response document from checked values: serialised once, by orjson
    return Response(orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")


def _predict(body: PredictRequest, core: Core, caller: Caller) -> prediction.Answer | JobOut:
    return prediction.predict(core, body, caller)
