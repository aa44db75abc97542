"""The API's routers, assembled: operations in the open, every other resource behind the optional key."""

from __future__ import annotations

import functools

from fastapi import APIRouter, Depends
from starlette.routing import BaseRoute

from app.api.deps import require_api_key
from app.api.errors import responses
from app.api.routes import audit, compare, datasets, evaluate, jobs, methods, models, ops, predict, training
from app.api.v2 import routes as v2

# Requests are matched against the routes in this order, one route after another: the
# prediction routes come first so that the hot path is matched at once rather than after every
# other route. The order of the docs comes from ``TAGS``, not from this.
RESOURCES = (predict, v2, methods, datasets, training, jobs, models, evaluate, compare, audit)

# The sections of the docs, in the order a new user meets them.
TAGS = [
    {"name": "methods", "description": "The methods this server can train, with their parameters and outputs."},
    {"name": "datasets", "description": "Upload datasets (CSV, ARFF with Mulan XML, LIBSVM, MAT) and manage them."},
    {
        "name": "training",
        "description": "Train a method (or `auto`) on a dataset: a job that registers a model version.",
    },
    {
        "name": "jobs",
        "description": "Follow, cancel and fetch the results of trainings, batch predictions, comparisons.",
    },
    {"name": "models", "description": "The registry: models, immutable versions, aliases, reports."},
    {"name": "prediction", "description": "Label sets, rankings, distributions or selected features as JSON."},
    {"name": "evaluation", "description": "The standard metrics of a version on a dataset with known labels."},
    {"name": "comparison", "description": "Cross-validate several methods on a dataset: a leaderboard and a report."},
    {"name": "inference protocol (v2)", "description": "The KServe / Triton V2 REST protocol on the same models."},
    {"name": "operations", "description": "Liveness, readiness and Prometheus metrics (never behind the API key)."},
    {"name": "audit", "description": "Who moved aliases and deleted versions, models and datasets (admin keys)."},
]


def routes() -> list[BaseRoute]:
    """Every route of the resource and operations routers, as declared (for the fast path, which
    needs the route objects of the requests it answers and imports no router)."""
    return [route for module in (*RESOURCES, ops) for route in module.router.routes]


@functools.cache
def api_router(*, api_key: bool) -> APIRouter:
    """All routes; with ``api_key`` the resource routes demand the key (and declare 401/403).

    Built once per process for each value of ``api_key``: FastAPI keeps the validators it builds
    for each route on the included router, and the routers hold no state of an app (the routes
    read the app's from the request), so every app of the process shares them (an app costs
    1 ms to make instead of 50: the test suite makes hundreds)."""
    router = APIRouter()
    for module in RESOURCES:
        if api_key:
            router.include_router(module.router, dependencies=[Depends(require_api_key)], responses=responses(401, 403))
        else:
            router.include_router(module.router)
    router.include_router(ops.router)
    return router
