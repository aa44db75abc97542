"""The API's routers, assembled: operations in the open, every other resource behind the optional key."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.deps import require_api_key
from app.api.errors import responses
from app.api.routes import compare, datasets, evaluate, jobs, methods, models, ops, predict, training

RESOURCES = (methods, datasets, training, jobs, models, predict, evaluate, compare)


def api_router(*, api_key: bool) -> APIRouter:
    """All routes; with ``api_key`` the resource routes demand the key (and declare 401/403)."""
    router = APIRouter()
    router.include_router(ops.router)
    for module in RESOURCES:
        if api_key:
            router.include_router(module.router, dependencies=[Depends(require_api_key)], responses=responses(401, 403))
        else:
            router.include_router(module.router)
    return router
