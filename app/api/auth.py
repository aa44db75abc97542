"""The API key, checked before anything reads the request body.

FastAPI reads (and for multipart, spools and parses) a request's body before it runs the route's
dependencies, so a dependency alone would make an unauthenticated 48 MB upload cost its full
transfer and parse. This ASGI middleware answers 401/403 from the headers alone; the
``require_api_key`` dependency stays on the routes for the OpenAPI security declaration.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

from app.ui.session import KEY_COOKIE, is_ui_path

MISSING = "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
INVALID = "invalid API key"


class ApiKeyGate:
    """Demand ``api_key`` on every HTTP path except ``open_paths`` and paths under ``open_prefixes``
    (operations, docs pages and their assets, the dashboard's login page and assets). On the
    dashboard's ``/ui`` paths the key may also come from its HttpOnly cookie (``app.ui.session``);
    a page asked for without it is redirected to ``/ui/login``."""

    def __init__(
        self, app: ASGIApp, api_key: str, open_paths: Iterable[str], open_prefixes: Iterable[str] = ()
    ) -> None:
        self.app = app
        self.expected = api_key.encode()
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = tuple(open_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in self.open_paths or path.startswith(self.open_prefixes):
            await self.app(scope, receive, send)
            return
        given = given_key(scope["headers"])
        if given is None and is_ui_path(path):
            # the dashboard's pages: the key from the HttpOnly cookie /ui/login set, else the login page
            given = ui_cookie_key(scope["headers"])
            if given is None or not hmac.compare_digest(given, self.expected):
                await _to_login(send)
                return
        if given is None:
            await _reject(send, 401, MISSING, [(b"www-authenticate", b"Bearer")])
        elif not hmac.compare_digest(given, self.expected):
            await _reject(send, 403, INVALID, [])
        else:
            await self.app(scope, receive, send)


def given_key(raw_headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The key a request carries (``X-API-Key``, else a bearer token), or None."""
    headers = dict(raw_headers)
    if b"x-api-key" in headers:
        return bytes(headers[b"x-api-key"])
    scheme, _, credentials = bytes(headers.get(b"authorization", b"")).partition(b" ")
    if scheme.lower() == b"bearer" and credentials.strip():
        return credentials.strip()
    return None


def ui_cookie_key(raw_headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The key the dashboard's cookie carries (only ever read on ``/ui`` paths)."""
    cookies = SimpleCookie()
    for name, value in raw_headers:
        if name == b"cookie":
            try:
                cookies.load(value.decode("latin-1"))
            except CookieError:
                return None
    morsel = cookies.get(KEY_COOKIE)
    return morsel.value.encode() if morsel is not None and morsel.value else None


async def _to_login(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", b"/ui/login"), (b"content-length", b"0"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _reject(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),  # the unread body must not be taken for the next request
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
