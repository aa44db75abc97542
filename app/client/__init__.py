"""The Python client of the HTTP API (``Client``) and the ``labelserve`` command built on it.

``Client`` and ``ApiError`` are imported from ``app.client.http`` on first use: the command's
modules are in this package too, and one that needs no client (``labelserve --version``, a
``--help``) starts without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.client.http import ApiError, Client

__all__ = ["DEFAULT_URL", "ApiError", "Client"]

# the server a client or a command talks to when neither it nor LABELSERVE_URL names one
DEFAULT_URL = "http://127.0.0.1:8000"


def __getattr__(name: str) -> Any:
    if name in ("ApiError", "Client"):
        from app.client import http

        return getattr(http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
