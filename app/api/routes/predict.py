"""``POST /predict``: label sets, rankings, distributions or selected features."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.datastructures import State

from app.api import examples
from app.api.errors import responses
from app.db import session_scope
from app.schemas import JobOut, PredictRequest, PredictResponse
from app.services import prediction
from app.services.prediction import Predictor

router = APIRouter(tags=["prediction"])


@router.post(
    "/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    responses=responses(
        404, 409, 400, 413, 422, success={202: {"model": JobOut, "description": "a large dataset, predicted as a job"}}
    ),
)
async def predict(body: Annotated[PredictRequest, Body(openapi_examples=examples.PREDICT)], request: Request) -> Any:
    """Label sets, label rankings, label distributions or a selector's features, as JSON."""
    # One threadpool hop for the whole request, so the hot path costs about what /health does
    # (sync dependencies would each add a hop; the session is opened inside instead).
    return await run_in_threadpool(_predict, body, request.app.state)


def _predict(body: PredictRequest, state: State) -> Any:
    predictor: Predictor = state.predictor
    with session_scope(state.settings.resolved_database_url) as session:
        result = prediction.predict(session, predictor, body)
    if isinstance(result, JobOut):
        return JSONResponse(result.model_dump(mode="json"), status_code=202)
    return result
