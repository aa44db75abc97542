"""The dashboard's browser session: the API key kept in an HttpOnly cookie, and CSRF tokens.

When ``LABELSERVE_API_KEY`` is set, ``/ui/login`` asks for the key once and keeps it in an
HttpOnly, ``SameSite=Strict`` cookie; ``app.api.gate.ApiKeyGate`` accepts that cookie on ``/ui``
paths only (the JSON API keeps demanding a header, so a page of another site can never spend
it). Forms that change something carry a CSRF token that must equal the token cookie (the
double-submit pattern), and a request whose ``Origin`` names another host is refused.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from app.api.gate import KEY_COOKIE, UI_PREFIX

CSRF_COOKIE = "labelserve_csrf"
CSRF_FIELD = "csrf"


def csrf_token(request: Request) -> str:
    """The browser's CSRF token, or a new one (``remember_csrf`` sets it on the response)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    return token if 20 <= len(token) <= 100 else secrets.token_urlsafe(32)


def remember_csrf(request: Request, response: Response, token: str) -> None:
    if request.cookies.get(CSRF_COOKIE) != token:
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=UI_PREFIX)


def csrf_ok(request: Request, form: Mapping[str, object]) -> bool:
    """The form's token equals the cookie's, and the request comes from a page of this host."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
        return False
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = form.get(CSRF_FIELD)
    return bool(cookie) and isinstance(given, str) and hmac.compare_digest(given.encode(), cookie.encode())


def keep_key(response: Response, key: str, secure: bool) -> None:
    response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict", secure=secure, path=UI_PREFIX)


def forget_key(response: Response) -> None:
    response.delete_cookie(KEY_COOKIE, path=UI_PREFIX)
