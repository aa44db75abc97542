"""The open inference protocol (V2, as KServe and Triton speak it over REST): model metadata,
readiness and inference, beside the native routes (its health routes are in ``ops``).

The protocol has its own error body, ``{"error": "..."}``, so these routes read and check their
input themselves instead of leaving it to FastAPI (whose errors have the native shape); the
request schema is still declared for the OpenAPI document. An inference with a JSON body and a
resolved reference is answered before it gets here (``app.api.fast_path``); the route answers
the others, and every error, with a cached reference still on the event loop, as is the error
of a reference refused since the registry last changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.api.offload import INLINE_BYTES, large_body_limiter
from app.api.v2 import binary, inference
from app.api.v2.messages import ErrorOut, InferRequest, InferResponse, ModelMetadata, ModelReady
from app.core import Core
from app.errors import DomainError
from app.services.prediction import served as lookup

router = APIRouter(prefix="/v2/models", tags=["inference protocol (v2)"])
T = TypeVar("T")
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (400, "a malformed or unacceptable request"),
        (404, "no such model or version"),
        (409, "the model cannot be used"),
    )
}


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its ``$defs`` substituted where they are used (the messages are not
    recursive), so that it can sit in the OpenAPI document on its own."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(dict(defs[node["$ref"].rsplit("/", 1)[1]]))
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return dict(walk(schema))


_INFER_BODY = {
    "required": True,
    "description": "JSON; or, with the binary tensor data extension, the JSON inference header followed by "
    "the inputs' raw bytes, the header's length in the `Inference-Header-Content-Length` header",
    "content": {
        "application/json": {"schema": _inline(InferRequest.model_json_schema())},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    },
}
#: an inference's answers: JSON (``InferResponse``), or with binary outputs the JSON header and their bytes
INFER_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    413: {"model": ErrorOut, "description": "the outputs would hold more than LABELSERVE_MAX_ANSWER_CELLS cells"},
    200: {
        "description": "the outputs; with binary outputs asked, the JSON header (its length in the "
        "`Inference-Header-Content-Length` header) followed by their raw bytes",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
}
_PARAMETERS = {"name": "the model name, or name@alias", "version": "a version number of the model"}


def _openapi(*params: str, body: bool = False) -> dict[str, Any]:
    """The path parameters (and body) of a route, declared for the docs only: the routes read
    them from the request, so that no input can fail FastAPI's validation, whose 422 body is
    not the protocol's."""
    extra: dict[str, Any] = {
        "parameters": [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}, "description": _PARAMETERS[p]}
            for p in params
        ]
    }
    if body:
        extra["requestBody"] = _INFER_BODY
    return extra


def _path(request: Request) -> tuple[str, str | None]:
    return request.path_params["name"], request.path_params.get("version")


def _error(exc: DomainError) -> Response:
    status = 400 if exc.status_code == 422 else exc.status_code
    return Response(orjson.dumps({"error": exc.message}), status_code=status, media_type="application/json")


async def _in_thread(request: Request, ref: str, work: Callable[[Core, str], T]) -> T:
    """``work(core, ref)`` in a worker thread; it opens what database sessions it needs itself
    (the reference is resolved in one closed before the model loads: ``prediction.served``).

    A reference refused since the registry last changed raises its error here, on the event
    loop: a flood of requests naming an unknown model otherwise takes the shared thread pool
    that every route with a session needs.
    """
    core: Core = request.app.state.core
    refused = core.refs.refusal(ref)
    if refused is not None:
        raise refused
    return await run_in_threadpool(work, core, ref)


async def _model_metadata(request: Request, name: str, version: str | None) -> Response:
    try:
        out = await _in_thread(request, inference.reference(name, version), inference.model_metadata)
    except DomainError as exc:
        return _error(exc)
    return Response(out.model_dump_json(), media_type="application/json")


async def _model_ready(request: Request, name: str, version: str | None) -> Response:
    # A reference this process holds resolved and loaded is ready: answered on the event loop, as
    # orchestrators poll readiness while the process serves (a worker thread's answer waits for
    # turns of a busy loop: the unknown-model flood of docs/reliability.md).
    try:
        ref = inference.reference(name, version)
        core: Core = request.app.state.core
        _, served = core.refs.get(ref)
        if served is None:
            served = await _in_thread(request, ref, lookup)
    except DomainError as exc:
        return _error(exc)
    return Response(ModelReady(name=served.name, ready=True).model_dump_json(), media_type="application/json")


async def _infer(request: Request, name: str, version: str | None) -> Response:
    body = await request.body()
    header_length = request.headers.get("inference-header-content-length")
    try:
        ref = inference.reference(name, version)
        core: Core = request.app.state.core
        _, served = core.refs.get(ref)
        cells = core.settings.max_answer_cells
        if served is not None and len(body) <= INLINE_BYTES:
            out = binary.answer(served, body, header_length, cells)
        elif served is not None:
            limiter = large_body_limiter(request.app.state)
            out = await anyio.to_thread.run_sync(binary.answer, served, body, header_length, cells, limiter=limiter)
        else:
            out = await _in_thread(request, ref, lambda c, r: binary.answer(lookup(c, r), body, header_length, cells))
    except DomainError as exc:
        return _error(exc)
    return Response(out.body, headers={k.decode(): v.decode() for k, v in out.headers()})


@router.get("/{name}", response_model=ModelMetadata, responses=ERRORS, openapi_extra=_openapi("name"))
async def model_metadata(request: Request) -> Response:
    """The model's inputs and outputs, and its versions (latest version, or `name@alias`)."""
    return await _model_metadata(request, *_path(request))


@router.get(
    "/{name}/versions/{version}",
    response_model=ModelMetadata,
    responses=ERRORS,
    openapi_extra=_openapi("name", "version"),
)
async def version_metadata(request: Request) -> Response:
    """One version's inputs and outputs."""
    return await _model_metadata(request, *_path(request))


@router.get("/{name}/ready", response_model=ModelReady, responses=ERRORS, openapi_extra=_openapi("name"))
async def model_ready(request: Request) -> Response:
    """200 with `ready: true` once the model can answer; 404 when there is no such model."""
    return await _model_ready(request, *_path(request))


@router.get(
    "/{name}/versions/{version}/ready",
    response_model=ModelReady,
    responses=ERRORS,
    openapi_extra=_openapi("name", "version"),
)
async def version_ready(request: Request) -> Response:
    """Whether that version can answer."""
    return await _model_ready(request, *_path(request))


@router.post(
    "/{name}/infer", response_model=InferResponse, responses=INFER_RESPONSES, openapi_extra=_openapi("name", body=True)
)
async def model_infer(request: Request) -> Response:
    """Inference on the latest version (or `name@alias`): the same numbers as `POST /predict`."""
    return await _infer(request, *_path(request))


@router.post(
    "/{name}/versions/{version}/infer",
    response_model=InferResponse,
    responses=INFER_RESPONSES,
    openapi_extra=_openapi("name", "version", body=True),
)
async def version_infer(request: Request) -> Response:
    """Inference on one version."""
    return await _infer(request, *_path(request))
