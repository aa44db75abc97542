"""The dashboard's side of the browser session (``app.api.browser``): the cookie, forms' CSRF
checks and the throttling of sign-ins.

Every page gives its browser a session (a signed cookie: ``HttpOnly``, ``SameSite=Strict``,
``Secure`` over HTTPS, path ``/ui``) if it has none, and its forms a CSRF token bound to that
session. With ``LABELSERVE_API_KEY`` set, ``/ui/login`` checks the key once and starts a new
session that records which key signed in (never the key); ``app.api.gate.ApiKeyGate`` accepts
it on ``/ui`` paths only, so a page of another site can never spend it on the JSON API.

A form that changes something counts only when it comes from a page of this host (its
``Origin``; without one, or with ``null``, its ``Referer``, as Django checks) and carries the
token of the browser's session: a token the server did not issue, or issued to another
session, is refused.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from app.api.browser import SESSION_COOKIE, Session, Sessions
from app.api.gate import UI_PREFIX, RequestGate, same_host

CSRF_FIELD = "csrf"


def sessions(request: Request) -> Sessions:
    gate: RequestGate = request.app.state.gate
    return gate.sessions


def current(request: Request) -> Session | None:
    """The browser's valid session, or None."""
    return sessions(request).read(request.cookies.get(SESSION_COOKIE))


def keep(request: Request, response: Response, cookie: str) -> None:
    """Set the session cookie ``cookie`` (a value of ``Sessions.new``) on ``response``."""
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=sessions(request).max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=UI_PREFIX,
    )


def forget(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path=UI_PREFIX)


def csrf_ok(request: Request, form: Mapping[str, object]) -> bool:
    """The request comes from a page of this host and the form carries its session's token."""
    origin = request.headers.get("origin")
    source = origin if origin and origin != "null" else request.headers.get("referer")
    if not source or not same_host(source, request.headers.get("host")):
        return False
    session, token = current(request), form.get(CSRF_FIELD)
    return session is not None and isinstance(token, str) and sessions(request).csrf_ok(session, token)


class LoginThrottle:
    """Failed sign-ins per client address over the last minute, in this process's memory: past
    ``LIMIT`` of them, the address's attempts are refused until the oldest is a minute old."""

    LIMIT = 10
    WINDOW = 60.0
    #: addresses remembered at most (the oldest forgotten first)
    CLIENTS = 10_000

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        failures = self._failures.get(client)
        now = time.monotonic()
        if failures is None or len(failures) < self.LIMIT or failures[0] <= now - self.WINDOW:
            return None
        return max(1, math.ceil(failures[0] + self.WINDOW - now))

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= self.CLIENTS:
            del self._failures[next(iter(self._failures))]
        self._failures.setdefault(client, deque(maxlen=self.LIMIT)).append(time.monotonic())

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)
