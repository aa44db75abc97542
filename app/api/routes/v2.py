"""The open inference protocol (V2, as KServe and Triton speak it over REST): model metadata,
readiness and inference, beside the native routes (its health routes are in ``ops``).

The protocol has its own error body, ``{"error": "..."}``, so these routes read and check their
input themselves instead of leaving it to FastAPI (whose errors have the native shape); the
request schema is still declared for the OpenAPI document. A cached reference with a small
body is answered on the event loop, as ``/predict`` does (``app.api.fast_path``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from app.db import session_scope
from app.errors import DomainError
from app.registry import Served
from app.schemas_v2 import ErrorOut, InferRequest, InferResponse, ModelMetadata, ModelReady
from app.services import inference
from app.services.prediction import Predictor

router = APIRouter(prefix="/v2/models", tags=["inference protocol (v2)"])
T = TypeVar("T")
INLINE_BYTES = 16 * 1024
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (400, "a malformed or unacceptable request"),
        (404, "no such model or version"),
        (409, "the model cannot be used"),
    )
}
_INFER_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": InferRequest.model_json_schema(ref_template="#/components/schemas/{model}")}
        },
    }
}


def _error(exc: DomainError) -> Response:
    status = 400 if exc.status_code == 422 else exc.status_code
    return Response(orjson.dumps({"error": exc.message}), status_code=status, media_type="application/json")


async def _with_session(request: Request, work: Callable[..., T], *args: Any) -> T:
    """``work(session, predictor, *args)`` in a worker thread with a database session."""

    def run() -> T:
        with session_scope(request.app.state.settings.resolved_database_url) as session:
            return work(session, request.app.state.predictor, *args)

    return await run_in_threadpool(run)


def _served(session: Any, predictor: Predictor, ref: str) -> Served:
    return predictor.served(session, ref)


def _metadata(session: Any, predictor: Predictor, ref: str) -> ModelMetadata:
    return inference.metadata(session, predictor.served(session, ref))


async def _model_metadata(request: Request, name: str, version: str | None) -> Response:
    try:
        out = await _with_session(request, _metadata, inference.reference(name, version))
    except DomainError as exc:
        return _error(exc)
    return Response(out.model_dump_json(), media_type="application/json")


async def _model_ready(request: Request, name: str, version: str | None) -> Response:
    try:
        ref = inference.reference(name, version)
        served = await _with_session(request, _served, ref)
    except DomainError as exc:
        return _error(exc)
    return Response(ModelReady(name=served.name, ready=True).model_dump_json(), media_type="application/json")


async def _infer(request: Request, name: str, version: str | None) -> Response:
    body = await request.body()
    try:
        ref = inference.reference(name, version)
        try:
            message = InferRequest.model_validate(orjson.loads(body))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            return _error(DomainError(_describe(exc)))
        predictor: Predictor = request.app.state.predictor
        _, served = predictor.refs.get(ref)
        if served is not None and len(body) <= INLINE_BYTES:
            out = inference.infer(served, message)
        elif served is not None:
            out = await run_in_threadpool(inference.infer, served, message)
        else:
            out = await _with_session(request, lambda s, p: inference.infer(p.served(s, ref), message))
    except DomainError as exc:
        return _error(exc)
    return Response(out.model_dump_json(exclude_none=True), media_type="application/json")


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return f"{where}: {first['msg']}" + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
    return f"the body is not JSON: {exc}"


@router.get("/{name}", response_model=ModelMetadata, responses=ERRORS)
async def model_metadata(name: str, request: Request) -> Response:
    """The model's inputs and outputs, and its versions (latest version, or `name@alias`)."""
    return await _model_metadata(request, name, None)


@router.get("/{name}/versions/{version}", response_model=ModelMetadata, responses=ERRORS)
async def version_metadata(name: str, version: str, request: Request) -> Response:
    """One version's inputs and outputs."""
    return await _model_metadata(request, name, version)


@router.get("/{name}/ready", response_model=ModelReady, responses=ERRORS)
async def model_ready(name: str, request: Request) -> Response:
    """200 with `ready: true` once the model is loaded and can answer; 404 when there is no such model."""
    return await _model_ready(request, name, None)


@router.get("/{name}/versions/{version}/ready", response_model=ModelReady, responses=ERRORS)
async def version_ready(name: str, version: str, request: Request) -> Response:
    """Whether that version can answer."""
    return await _model_ready(request, name, version)


@router.post("/{name}/infer", response_model=InferResponse, responses=ERRORS, openapi_extra=_INFER_BODY)
async def model_infer(name: str, request: Request) -> Response:
    """Inference on the latest version (or `name@alias`): the same numbers as `POST /predict`."""
    return await _infer(request, name, None)


@router.post(
    "/{name}/versions/{version}/infer", response_model=InferResponse, responses=ERRORS, openapi_extra=_INFER_BODY
)
async def version_infer(name: str, version: str, request: Request) -> Response:
    """Inference on one version."""
    return await _infer(request, name, version)
