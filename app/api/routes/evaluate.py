"""``POST /evaluate``: the standard metrics of a model's task on a stored dataset."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api import examples
from app.api.deps import CoreDep
from app.api.errors import responses
from app.api.json_body import JsonBodyRoute
from app.schemas import EvaluateRequest, EvaluateResponse
from app.services import evaluation

router = APIRouter(route_class=JsonBodyRoute, tags=["evaluation"])


@router.post("/evaluate", response_model=EvaluateResponse, responses=responses(404, 409, 400, 413, 422))
def evaluate(
    body: Annotated[EvaluateRequest, Body(openapi_examples=examples.EVALUATE)],
    core: CoreDep,
) -> EvaluateResponse:
    return evaluation.evaluate(core, body)
