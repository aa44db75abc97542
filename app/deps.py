"""Shared FastAPI dependencies: settings, database session, store, runner, model cache, auth."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope
from app.jobs.runner import JobRunner
from app.registry import MAX_DB_INT, ModelCache
from app.store import Store


def settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def session_dep(request: Request) -> Iterator[Session]:
    with session_scope(request.app.state.settings.resolved_database_url) as session:
        yield session


def store_dep(request: Request) -> Store:
    return request.app.state.store


def runner_dep(request: Request) -> JobRunner:
    return request.app.state.runner


def cache_dep(request: Request) -> ModelCache:
    return request.app.state.model_cache


def require_api_key(request: Request) -> None:
    """With ``LABELSERVE_API_KEY`` set, demand it as a Bearer token or an X-API-Key header."""
    expected = request.app.state.settings.api_key
    if not expected:
        return
    given = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if given is None and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
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


def page_params(limit: int = 100, offset: int = 0) -> tuple[int, int]:
    if not 1 <= limit <= 1000:
        raise HTTPException(422, "limit: must be between 1 and 1000")
    if not 0 <= offset <= MAX_DB_INT:
        raise HTTPException(422, f"offset: must be between 0 and {MAX_DB_INT}")
    return limit, offset


PageDep = Annotated[tuple[int, int], Depends(page_params)]
