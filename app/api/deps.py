"""Shared FastAPI dependencies: settings, database session, store, runner, model cache, paging, auth."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Query, Request, Security, status
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope
from app.jobs.base import JobRunner
from app.observability import Metrics
from app.registry import ALIAS_MAX_LENGTH, ALIAS_PATTERN, ID_PATTERN, MAX_DB_INT, NAME_PATTERN, ModelCache
from app.services.paging import PageParams
from app.store import Store


# The getters of app state are ``async``: FastAPI runs a plain ``def`` dependency in a worker
# thread, a hop per dependency per request for an attribute read. The session stays ``def``:
# opening and closing it may wait on the database, which must not block the event loop.
async def settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def session_dep(request: Request) -> Iterator[Session]:
    with session_scope(request.app.state.settings.resolved_database_url) as session:
        yield session


async def store_dep(request: Request) -> Store:
    return request.app.state.store


async def runner_dep(request: Request) -> JobRunner:
    return request.app.state.runner


async def cache_dep(request: Request) -> ModelCache:
    return request.app.state.model_cache


async def metrics_dep(request: Request) -> Metrics:
    return request.app.state.metrics


_bearer = HTTPBearer(auto_error=False, description="the API key as a Bearer token")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


async def require_api_key(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    header: Annotated[str | None, Security(_header)],
) -> None:
    """Demand ``LABELSERVE_API_KEY`` as a Bearer token or an X-API-Key header.

    Installed only when a key is configured, so the OpenAPI document declares the security
    schemes exactly when the server enforces them. Async: a sync dependency would cost every
    guarded request a hop to a worker thread (``ApiKeyGate`` has checked the key already).
    """
    expected: str = request.app.state.settings.api_key
    given = header if header is not None else bearer.credentials if bearer is not None else None
    if given is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "invalid API key")


SettingsDep = Annotated[Settings, Depends(settings_dep)]
SessionDep = Annotated[Session, Depends(session_dep)]
StoreDep = Annotated[Store, Depends(store_dep)]
RunnerDep = Annotated[JobRunner, Depends(runner_dep)]
CacheDep = Annotated[ModelCache, Depends(cache_dep)]
MetricsDep = Annotated[Metrics, Depends(metrics_dep)]


async def page_params(
    limit: Annotated[int, Query(ge=1, le=1000, description="page size")] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_DB_INT, description="items to skip")] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


PageDep = Annotated[PageParams, Depends(page_params)]

ModelName = Annotated[str, Path(pattern=NAME_PATTERN, description="model name")]
VersionNumber = Annotated[int, Path(ge=1, le=MAX_DB_INT, description="version number")]
AliasName = Annotated[
    str,
    Path(
        pattern=ALIAS_PATTERN,
        max_length=ALIAS_MAX_LENGTH,
        description="alias: letters, digits, '-' or '_', not only digits",
    ),
]
DatasetId = Annotated[str, Path(min_length=1, max_length=255, description="dataset id, or a unique dataset name")]
JobId = Annotated[str, Path(pattern=ID_PATTERN, description="job id")]
