"""Running the API under uvicorn: one process, or several behind one port.

With several workers uvicorn binds one listening socket in the supervisor and every worker
accepts from it; under keep-alive load the worker that wakes first accepts a whole burst of new
connections and the others stay idle (docs/benchmarks.md, serving). Here each worker listens on a
socket of its own, all bound to the same address with ``SO_REUSEPORT``, and the kernel spreads
new connections across them. The supervisor stays uvicorn's (start, restart, signals): it passes
the workers a ``PerWorkerSocket``, bound but never listening, so the port is reserved and a
taken port fails at start; pickled into each spawned worker, it becomes that worker's own socket
on the same address.
"""

from __future__ import annotations

import os
import socket

from app.config import DEFAULT_ALLOWED_HOSTS, get_settings
from app.storage.db import migrate

# the app logs every request itself, as a JSON line with the route template and the duration
# (app.runtime.observability.RequestMetrics); uvicorn's plain-text access line would be a second one
APP = "app.main:app"


class PerWorkerSocket(socket.socket):
    """A socket that each process it is sent to replaces with its own, bound to the same address."""

    def __reduce__(self) -> tuple[object, tuple[int, tuple[object, ...]]]:
        return (bind_reuse_port, (self.family, self.getsockname()))


def bind_reuse_port(family: int, address: tuple[object, ...]) -> socket.socket:
    """A new socket bound to ``address`` with ``SO_REUSEPORT`` (listening starts in uvicorn)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    sock.set_inheritable(True)
    return sock


def reserve(host: str, port: int) -> PerWorkerSocket:
    """The supervisor's socket: bound with ``SO_REUSEPORT``, not listening (it accepts nothing)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = PerWorkerSocket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def allow_bind_host(host: str) -> None:
    """Answer the Host name of a specific bind address too, when ``LABELSERVE_ALLOWED_HOSTS`` is
    unset: the app (this process's or each worker's) reads the variable this sets."""
    if host in ("", "0.0.0.0", "::", *DEFAULT_ALLOWED_HOSTS) or get_settings().allowed_hosts:
        return
    os.environ["LABELSERVE_ALLOWED_HOSTS"] = ",".join([*DEFAULT_ALLOWED_HOSTS, host])
    get_settings.cache_clear()


def grpc_on_host(host: str) -> None:
    """Bind the gRPC service (when ``LABELSERVE_GRPC_PORT`` is set) to the interface the HTTP API
    listens on, unless ``LABELSERVE_GRPC_HOST`` says otherwise: the app reads the variable this sets."""
    if "LABELSERVE_GRPC_HOST" in os.environ:
        return
    os.environ["LABELSERVE_GRPC_HOST"] = host
    get_settings.cache_clear()


def serve(host: str, port: int, workers: int) -> None:
    """Serve the API on ``host:port`` with ``workers`` processes (and the V2 protocol's gRPC
    service on ``LABELSERVE_GRPC_PORT`` when it is set, in the same processes)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    allow_bind_host(host)
    grpc_on_host(host)
    if workers <= 1:
        uvicorn.run(APP, host=host, port=port, access_log=False)
        return
    config = uvicorn.Config(APP, host=host, port=port, workers=workers, access_log=False)
    sock = reserve(host, port)
    # Workers that migrate at start-up would race to create the same tables on a new database
    # (one of them failed to start): the supervisor migrates once first, the workers then find
    # the schema current.
    settings = get_settings()
    if settings.migrate_at_startup:
        migrate(settings.resolved_database_url)
    Multiprocess(config, sockets=[sock]).run()
