"""Shared FastAPI dependencies: the application core, database sessions, paging, typed path parameters, auth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Query, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.api.access import caller_of
from app.api.gate import RequestGate
from app.config import Settings
from app.core import Core
from app.registry.refs import ALIAS_MAX_LENGTH, ALIAS_PATTERN, ID_PATTERN, MAX_DB_INT, NAME_PATTERN
from app.services.keys import Caller, Key
from app.services.paging import PageParams
from app.storage.store import Store


# The getters of app state are ``async``: FastAPI runs a plain ``def`` dependency in a worker
# thread, a hop per dependency per request for an attribute read. The sessions stay ``def``:
# opening and closing one may wait on the database, which must not block the event loop.
async def core_dep(request: Request) -> Core:
    return request.app.state.core


# The sessions end when the route's function returns, before the response is sent
# (``scope="function"``): by default FastAPI ends a dependency with ``yield`` after the response,
# so a write was committed after the client had been told it succeeded, and a read session's end
# that failed (its PostgreSQL backend terminated) raised "Exception in ASGI application".
def session_dep(request: Request) -> Iterator[Session]:
    """A read-write session for the request (on SQLite it takes the write lock when it begins)."""
    core: Core = request.app.state.core
    with core.database.session() as session:
        yield session


def reading_dep(request: Request) -> Iterator[Session]:
    """A read-only session, for routes that only read: it never waits for the write lock."""
    core: Core = request.app.state.core
    with core.database.reading() as session:
        yield session


async def settings_dep(request: Request) -> Settings:
    return request.app.state.core.settings


async def store_dep(request: Request) -> Store:
    return request.app.state.core.store


async def caller_dep(request: Request) -> Caller:
    return caller_of(request)


_bearer = HTTPBearer(auto_error=False, description="the API key as a Bearer token")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


async def require_api_key(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    header: Annotated[str | None, Security(_header)],
) -> None:
    """Demand an API key (of a role that may call the route) as a Bearer token or an X-API-Key header.

    Installed only when keys are configured, so the OpenAPI document declares the security
    schemes exactly when the server enforces them. Async: a sync dependency would cost every
    guarded request a hop to a worker thread (``ApiKeyGate`` has checked the key already).
    ``bearer`` and ``header`` are the security schemes the document declares; the check reads
    the same headers through the request gate (``app.api.gate``), the one place of the rule.
    """
    gate: RequestGate = request.app.state.gate  # the rule the middleware applied, asked again
    decided = gate.decide(request.method, request.scope["path"], request.scope["headers"])
    if not isinstance(decided, Key):
        code, message = decided
        raise HTTPException(code, message, headers={"WWW-Authenticate": "Bearer"} if code == 401 else None)


CoreDep = Annotated[Core, Depends(core_dep)]
SessionDep = Annotated[Session, Depends(session_dep, scope="function")]
ReadingDep = Annotated[Session, Depends(reading_dep, scope="function")]
# the upload route's (``routes/datasets.py``): the two parts of the core it uses
SettingsDep = Annotated[Settings, Depends(settings_dep)]
StoreDep = Annotated[Store, Depends(store_dep)]
# who is calling: the key's name and role (services record the name on what it does)
CallerDep = Annotated[Caller, Depends(caller_dep)]


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
