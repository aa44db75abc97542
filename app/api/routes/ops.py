"""Operations: liveness, readiness and Prometheus metrics (never behind the API key), also in
the open inference protocol's form (``/v2/health/live``, ``/v2/health/ready``, and the server
metadata ``/v2`` that a V2 client reads first)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from app import __version__
from app.api.v2.messages import BINARY_EXTENSION, Live, Ready, ServerMetadata
from app.core import Core
from app.services.maintenance import readiness

router = APIRouter(tags=["operations"])


class Readiness(BaseModel):
    """Whether this process can serve: the database answers, the model store is writable and the
    job backend can queue jobs."""

    status: str = Field(description="ready or not ready")
    database: str = Field(description="ok or unreachable")
    model_store: str = Field(description="ok, not writable, or low on disk space (below LABELSERVE_MIN_FREE_MB)")
    job_backend: str = Field(description="ok, or unreachable (the Celery broker: jobs cannot be queued)")


@router.get("/health")
async def health() -> dict[str, str]:
    # on the event loop: a plain ``def`` took two hops to the thread pool, each a turn of a busy
    # loop (docs/reliability.md, the unknown-model flood)
    return {"status": "ok"}


@router.get(
    "/ready",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "the database, the model store or the job backend is not usable, or the store is low on space",
        }
    },
)
async def ready(request: Request, response: Response) -> Readiness:
    readiness = await _readiness(request)
    if readiness.status != "ready":
        response.status_code = 503
    return readiness


async def _readiness(request: Request) -> Readiness:
    checks = await run_in_threadpool(readiness, request.app.state.core)
    return Readiness(
        status="ready" if checks.ready else "not ready",
        database="ok" if checks.database else "unreachable",
        model_store="not writable" if not checks.writable else "low on disk space" if checks.low_on_space else "ok",
        job_backend="ok" if checks.queueable else "unreachable",
    )


@router.get("/v2", tags=["inference protocol (v2)"])
def v2_server_metadata() -> ServerMetadata:
    """The V2 protocol's server metadata: name, version, and the protocol extensions spoken."""
    return ServerMetadata(version=__version__, extensions=[BINARY_EXTENSION])


@router.get("/v2/health/live", tags=["inference protocol (v2)"])
def v2_live() -> Live:
    """The V2 protocol's liveness: the process answers."""
    return Live(live=True)


@router.get(
    "/v2/health/ready",
    tags=["inference protocol (v2)"],
    responses={503: {"model": Ready, "description": "the database, the model store or the job backend is not usable"}},
)
async def v2_ready(request: Request, response: Response) -> Ready:
    """The V2 protocol's readiness: the same checks as `/ready`."""
    ready = (await _readiness(request)).status == "ready"
    if not ready:
        response.status_code = 503
    return Ready(ready=ready)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"description": "Prometheus text exposition format", "content": {CONTENT_TYPE_LATEST: {}}}},
)
def prometheus_metrics(request: Request) -> Response:
    core: Core = request.app.state.core
    core.metrics.store_free_bytes.set(core.store.free_bytes())
    return Response(generate_latest(core.metrics.registry), media_type=CONTENT_TYPE_LATEST)
