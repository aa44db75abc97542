"""The gRPC server of the V2 protocol, in the API's process and on its event loop (started and
stopped by the app's lifespan when ``LABELSERVE_GRPC_PORT`` is set).

It serves ``inference.GRPCInferenceService`` (``app.api.v2.grpc_service``) and the standard
health service ``grpc.health.v1.Health``, whose status (of the server, ``""``, and of the
inference service) is SERVING exactly when ``GET /ready`` would answer 200: checked again at
each ``Check``, and every ``WATCH_SECONDS`` for ``Watch`` streams. A message larger than
``LABELSERVE_MAX_UPLOAD_MB`` is refused by gRPC itself (``RESOURCE_EXHAUSTED``). With several
API processes (``labelserve serve --workers N``) each binds the same port: gRPC sets
``SO_REUSEPORT``, and the kernel spreads connections over them, as for HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from starlette.datastructures import State

from app.api.gate import RequestGate
from app.api.v2.grpc_service import InferenceServicer
from app.api.v2.proto import grpc_predict_v2_pb2_grpc as pb_grpc
from app.core import Core
from app.services.maintenance import readiness

log = logging.getLogger("labelserve.api")
#: the services whose health is reported: the server as a whole, and the inference service
SERVICES = ("", "inference.GRPCInferenceService")
#: how often the health status is checked again for ``Watch`` streams
WATCH_SECONDS = 5.0
#: seconds calls in flight get to finish when the server stops
STOP_GRACE_SECONDS = 5.0


class Health(health.aio.HealthServicer):
    """``grpc.health.v1``: SERVING exactly when this process is ready (``maintenance.readiness``)."""

    def __init__(self, core: Core) -> None:
        super().__init__()
        self._core = core

    async def refresh(self) -> bool:
        ready = (await anyio.to_thread.run_sync(readiness, self._core)).ready
        status = health_pb2.HealthCheckResponse.SERVING if ready else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in SERVICES:
            await self.set(service, status)
        return ready

    async def Check(self, request: Any, context: Any) -> Any:
        if request.service in SERVICES:
            await self.refresh()
        return await super().Check(request, context)

    async def watch(self) -> None:
        """Check readiness every ``WATCH_SECONDS`` (what ``Watch`` streams see change) until cancelled."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                await self.refresh()
            except Exception:  # a check that fails is logged; the next one comes anyway
                log.exception("gRPC health check failed")


@dataclass
class GrpcServer:
    """A started gRPC server and its health checker."""

    server: Any
    health: Health
    watcher: asyncio.Task[None]
    address: str

    async def stop(self) -> None:
        """Report NOT_SERVING, then stop, letting calls in flight finish for a few seconds."""
        await self.health.enter_graceful_shutdown()
        self.watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.watcher
        await self.server.stop(STOP_GRACE_SECONDS)


def address(host: str, port: int) -> str:
    """``host:port`` as gRPC binds it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def start(core: Core, gate: RequestGate, state: State, port: int) -> GrpcServer:
    """The V2 protocol's gRPC service and the health service, listening on ``grpc_host:port``."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", gate.max_body_bytes)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(core, gate, state), server)
    checker = Health(core)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    bound = address(core.settings.grpc_host, port)
    server.add_insecure_port(bound)  # raises when the address cannot be bound: the API does not start
    await server.start()
    await checker.refresh()
    log.info("gRPC service listening", extra={"address": bound})
    return GrpcServer(server, checker, asyncio.create_task(checker.watch()), bound)
