"""The ASGI application: ``app.main:app``.

Start-up migrates the schema or checks that it is current (``app.storage.db.prepare_schema``), opens
the store, starts the job runner and settles jobs a previous process left unfinished. Every
route but the operations ones and the docs sits behind the optional API keys, each route behind
the role it needs (``app.api.access``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount, Route

import app as package
from app import ui
from app.api import errors
from app.api.fast_path import PredictFastPath
from app.api.gate import ApiKeyGate, CrossSiteGate, RequestGate, UploadLimit
from app.api.headers import SecurityHeaders
from app.api.router import TAGS, api_router, routes
from app.api.routes import ops
from app.config import Settings, get_settings
from app.core import Core
from app.jobs.local import stop_process_helpers
from app.jobs.queue import JobCounts
from app.jobs.runner import make_runner
from app.runtime.allocator import keep_freed_memory
from app.runtime.gc_freeze import freeze_startup_objects
from app.runtime.observability import Metrics, RequestMetrics, access_log, configure_logging
from app.services.maintenance import Sweeper
from app.services.warming import Warmer
from app.storage.db import prepare_schema

if TYPE_CHECKING:
    from app.api.v2.grpc_server import GrpcServer


def create_app(settings: Settings | None = None, *, owns_process: bool = False) -> FastAPI:
    """The application; ``owns_process``: it is the process's one app (``app.main:app`` under
    uvicorn), so its shutdown also stops the process's multiprocessing helpers."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level, batched=settings.batched_logs)
        if settings.tune_allocator:
            keep_freed_memory()
        settings.model_dir.mkdir(parents=True, exist_ok=True)
        gate.sessions.open()
        prepare_schema(settings)
        core = api.state.core = Core.open(settings, api.state.metrics)
        core.metrics.registry.register(JobCounts(core.database))
        core.attach_runner(make_runner(core))
        core.runner.recover()
        sweeper = Sweeper(core).start()
        warmer = Warmer(core).start() if settings.warm_new_versions else None
        grpc_server: GrpcServer | None = None
        try:
            if settings.grpc_port is not None:  # a port that cannot be bound fails the start, cleanly
                grpc_server = await _start_grpc(api, settings.grpc_port)
            if settings.gc_freeze:
                freeze_startup_objects()  # full collections skip what lives as long as the process
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop()
            if warmer is not None:
                warmer.stop()
            sweeper.stop()
            core.runner.shutdown()
            if owns_process:
                stop_process_helpers()
            for handler in access_log.handlers:  # the request log's last batch, before the loop ends
                handler.flush()

    # The Swagger UI and ReDoc assets are served by the service itself (from the fastapi-offline
    # package), so /docs and /redoc work on a host with no route to a CDN; POST /predict meets
    # the hot path in front of every middleware below (app.api.fast_path).
    api = FastAPIOffline(
        title="labelserve",
        version=package.__version__,
        description="Multi-label classification, label distribution learning and multi-label "
        "feature selection behind a REST API, with a versioned model registry.",
        lifespan=lifespan,
        openapi_tags=TAGS,
        # operation ids are the route functions' names, unique in the app: a generated client's
        # functions are then upload_dataset, predict, ... rather than upload_dataset_datasets_post
        generate_unique_id_function=lambda route: route.name,
        swagger_ui_parameters={"persistAuthorization": True, "displayRequestDuration": True},
    )
    api.state.settings = settings
    api.state.metrics = Metrics()
    errors.install(api)
    api.include_router(api_router(api_key=settings.has_api_keys))
    # Open: the operations routes, and the documentation (the openapi.json, the docs pages
    # FastAPIOffline registers outside the schema, and the mount serving their assets), listed
    # before the dashboard's routes (also outside the schema) are added; the dashboard's own gate
    # is its login page and assets (app.ui.session).
    open_paths = [getattr(route, "path", "") for route in ops.router.routes]
    docs_pages = [r.path for r in api.routes if isinstance(r, APIRoute | Route) and not r.include_in_schema]
    open_paths += docs_pages
    open_prefixes = [f"{r.path}/" for r in api.routes if isinstance(r, Mount)]
    ui.install(api)
    open_paths += ["/", "/ui/login"]
    open_prefixes += [f"{ui.STATIC_PATH}/"]
    gate = api.state.gate = RequestGate.of(settings, open_paths, open_prefixes, [*routes(), *ui.page_routes()])
    api.add_middleware(UploadLimit, gate=gate)
    api.add_middleware(ApiKeyGate if gate.keys is not None else CrossSiteGate, gate=gate)
    api.add_middleware(TrustedHostMiddleware, allowed_hosts=gate.allowed_hosts, www_redirect=False)
    api.add_middleware(RequestMetrics)
    # the docs pages inline a script of their own, allowed by its hash (app.api.headers)
    api.add_middleware(SecurityHeaders, hashed_paths=[p for p in docs_pages if p != api.openapi_url])
    if settings.fast_path:  # outermost: it makes the checks of the layers inside itself
        api.add_middleware(PredictFastPath, routes=routes())
    return api


async def _start_grpc(api: FastAPI, port: int) -> GrpcServer:
    """The V2 protocol's gRPC service on ``port``, on this process's core, keys and event loop.

    Imported here, only when it is configured: its message classes are registered in protobuf's
    one pool under the protocol's names (``inference.*``), which another package's copy of the
    protocol (``tritonclient.grpc``) also claims, so a process that never serves gRPC never holds them.
    """
    from app.api.v2 import grpc_server

    return await grpc_server.start(api.state.core, api.state.gate, api.state, port)


app = create_app(owns_process=True)
