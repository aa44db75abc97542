"""One error body for the whole API, and the OpenAPI declarations that go with it.

Every error answer is ``{"detail": ...}``:

* 422 (the request's content is invalid, whether FastAPI's schema validation or a service's rule
  found it): ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}, ...]}``, FastAPI's own
  shape, with ``loc`` naming the input (``["body", "params", "k"]``, ``["query", "limit"]``).
* every other 4xx (401, 403, 404, 405, 409, 413, 429 with ``Retry-After``), 503 (``Retry-After``)
  and 507: ``{"detail": "message"}``, where the message starts with the name of the body or
  query field at fault when there is one (``"dataset_id: dataset 'x' not found"``).

Services raise the domain errors of ``app.errors``; the handlers here are the only place that
turns them into HTTP answers.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from app.errors import DomainError, InvalidFields, InvalidInput, RetryLater, tidy_pydantic
from app.storage.db_errors import RETRY_AFTER_SECONDS, is_disk_full_error, is_transient
from app.storage.store import DISK_FULL, is_disk_full

log = logging.getLogger("labelserve.api")

DATABASE_BUSY = "the database is briefly unavailable (connection lost or busy); retry the request in a moment"


class ValidationItem(BaseModel):
    """One invalid input."""

    loc: list[str | int] = Field(description='where the input is: ["body", "params", "k"], ["query", "limit"], ...')
    msg: str = Field(description="what is wrong with it, and the valid choices where there are some")
    type: str = Field(description="the kind of error (missing, extra_forbidden, value_error, ...)")


class ValidationBody(BaseModel):
    """422: what was invalid, one item per problem."""

    detail: list[ValidationItem] = Field(description="one item per problem")


class ErrorBody(BaseModel):
    """Any other error: a message for a human."""

    detail: str = Field(description="the message, starting with the field at fault when there is one")


_DESCRIPTIONS = {
    400: "the body could not be read as JSON (or multipart form data)",
    401: "missing, unknown or revoked API key (only when API keys are configured)",
    403: "the API key's role may not do this: the message names the role needed (only when API keys are configured)",
    404: "an id, name, version or alias that does not exist",
    409: "the request clashes with the current state (a dataset name several datasets have, a model still in "
    "its first training, a resource in use or missing from the store)",
    413: "the request body is larger than LABELSERVE_MAX_UPLOAD_MB",
    422: "the request's content is invalid",
    429: "a bound on pending work is reached (queued jobs of this API key, or waiting requests): retry after "
    "Retry-After seconds; nothing was stored",
    503: "the database or the job broker is briefly unavailable (connection lost or busy): retry after "
    "Retry-After seconds; a refused job submit stored nothing",
    507: "no room left in the store or the database: nothing was stored",
}


def responses(*codes: int, success: dict[int | str, dict[str, Any]] | None = None) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entry of a route: the error statuses it can answer, and any ``success``
    status besides its default one (a 200 beside a 201, a 202 for work queued)."""
    declared: dict[int | str, dict[str, Any]] = {**(success or {})}
    for code in sorted(codes):
        declared[code] = {"model": ValidationBody if code == 422 else ErrorBody, "description": _DESCRIPTIONS[code]}
    return declared


def _items(exc: InvalidInput) -> list[dict[str, Any]]:
    if isinstance(exc, InvalidFields):
        return [{"loc": list(loc), "msg": msg, "type": kind} for loc, msg, kind in exc.errors]
    return [{"loc": list(exc.loc), "msg": exc.message, "type": exc.error_type}]


def _field_name(loc: tuple[str | int, ...]) -> str:
    """``("body", "feature_selector", "model")`` -> ``feature_selector.model``; "" for a path
    parameter, which the message names already (``model 'm' has no version 3``)."""
    if not loc or loc[0] == "path":
        return ""
    parts = loc[1:] if loc[0] in ("body", "query", "header") else loc
    return ".".join(str(p) for p in parts)


async def domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    return domain_error_response(exc)


def domain_error_response(exc: DomainError) -> JSONResponse:
    """The answer to a domain error; also what the prediction fast path sends for a reference
    already refused (``app.api.fast_path``), so that both paths give the same bytes."""
    if isinstance(exc, InvalidInput) and exc.status_code == 422:  # not its 413 subclass of too-large data
        return JSONResponse({"detail": _items(exc)}, status_code=exc.status_code)
    name = _field_name(exc.loc)
    message = f"{name}: {exc.message}" if name else exc.message
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RetryLater) else None
    return JSONResponse({"detail": message}, status_code=exc.status_code, headers=headers)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, kept to ``loc``, ``msg`` and ``type``.

    The rejected ``input`` is not echoed back: it can be bytes of an upload that are not text,
    and the client has it anyway.
    """
    assert isinstance(exc, RequestValidationError)
    items = [{"loc": list(loc), "msg": msg, "type": kind} for loc, msg, kind in tidy_pydantic(exc.errors())]
    return JSONResponse({"detail": items}, status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 unknown path, 405, 401/403 of the API key) in the same shape.

    A 405's ``Allow`` lists every method the OpenAPI document gives the path: Starlette would name
    only those of the one route it tried, and FastAPI has a route per method.
    """
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        exc = HTTPException(405, exc.detail, headers={"Allow": ", ".join(_allowed(request))})
    return await http_exception_handler(request, exc)


def _allowed(request: Request) -> list[str]:
    path = request.url.path
    for template, operations in request.app.openapi()["paths"].items():
        if compile_path(template)[0].match(path):
            return sorted(method.upper() for method in operations)
    return []


async def storage_error(request: Request, exc: Exception) -> JSONResponse:
    """A full disk under the database or the store is a 507 saying so; a transient database
    error (``app.storage.db_errors``) a 503 with ``Retry-After``; any other failure of the database or
    the file system stays a 500 without its internals (SQL, paths) in the body."""
    if is_disk_full(exc) or is_disk_full_error(exc):
        return JSONResponse({"detail": DISK_FULL}, status_code=507)
    if is_transient(exc):  # a dropped connection, a lock timeout: the same request succeeds soon
        log.warning("transient database error", exc_info=(type(exc), exc, exc.__traceback__))
        return JSONResponse(
            {"detail": DATABASE_BUSY},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    log.error("unexpected error", exc_info=(type(exc), exc, exc.__traceback__))
    return JSONResponse({"detail": "internal error; the server log has the details"}, status_code=500)


def install(api: FastAPI) -> None:
    """Register the handlers: domain errors, request validation and HTTP errors, once for every route."""
    api.add_exception_handler(DomainError, domain_error)
    api.add_exception_handler(RequestValidationError, validation_error)
    api.add_exception_handler(HTTPException, http_error)
    api.add_exception_handler(OSError, storage_error)
    api.add_exception_handler(SQLAlchemyError, storage_error)
