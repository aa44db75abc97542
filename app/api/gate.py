"""The request gate: the API keys, the role each route needs, the upload size limit and the Host
names, declared once.

``RequestGate`` holds the rules (built from ``Settings``, the app's open paths and its routes in
``create_app``, kept on ``app.state.gate``): the keys are ``app.services.keys.KeyStore``'s, the
role a route needs ``app.api.access``'s table. These places apply them and none restates them:

* ``ApiKeyGate``, an ASGI middleware, answers 401 (no key, or one it does not know) and 403 (a
  key whose role may not call the route) from the headers alone, before anything reads
  the body: FastAPI reads (and for multipart, spools and parses) a request's body before it runs
  the route's dependencies, so a dependency alone would make an unauthenticated 48 MB upload cost
  its full transfer and parse. The ``require_api_key`` dependency stays on the routes for the
  OpenAPI security declaration, and asks the same gate. The key that authenticated is left in the
  request's scope (``access.KEY_SCOPE``), where ``access.caller_of`` finds the caller's name.
* ``CrossSiteGate``, on a server without keys, answers 403 to a request that would change
  something (POST, PUT, PATCH, DELETE) on the JSON API and names another site in its ``Origin``:
  a browser sending a page's cross-site "simple" request (a form, a multipart upload), which no
  CORS preflight stops. Clients other than browsers send no ``Origin`` and pass.
* ``UploadLimit``, an ASGI middleware, enforces ``LABELSERVE_MAX_UPLOAD_MB`` while the body
  streams in: the declared Content-Length is checked first, and the bytes actually received are
  counted as they arrive, so a lying or chunked client is cut off at the limit too. It also
  refuses a body with more than one Content-Type header (400, ``content_type_refusal``): which
  one describes the body is ambiguous, and the layers read it differently (Starlette's headers
  the first, the fast path the last), so the same request was answered by one and refused by
  the other.
* Starlette's ``TrustedHostMiddleware`` answers 400 to a ``Host`` not in ``allowed_hosts``
  (``LABELSERVE_ALLOWED_HOSTS``): a page of a name rebound to this server's address (DNS
  rebinding) is same-origin with it for the browser, but names itself in ``Host``.
* The prediction fast path (``app.api.fast_path``) takes a request only when ``admits`` says all
  of these would let it through (the key's role included), and otherwise leaves it to them to refuse.

The dashboard's pages (``/ui``) may instead carry the signed session cookie its login page
issues (``app.api.browser``), which names the key that signed in and is bound to it: the gate
applies that key's role, as long as the server still has that key (``session_key``); a page asked
for without a valid one is redirected to ``/ui/login``. The JSON API never accepts the cookie, so a page of another site can never spend it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.access import KEY_SCOPE, RouteRoles
from app.api.browser import SESSION_COOKIE, Sessions
from app.config import Settings
from app.services.keys import Key, KeyStore

MISSING = "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
INVALID = "invalid API key (unknown or revoked)"
CROSS_SITE = (
    "cross-site request refused: a page of another site (Origin: {origin}) may not change anything on this "
    "server; send the request without an Origin header, as API clients do"
)
#: the path prefix under which the dashboard's session cookie counts as a credential
UI_PREFIX = "/ui"
#: the methods of requests that change something
CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class RequestGate:
    """Who may call what, from where, under which Host name, and how large a body may be.

    ``keys`` is None when the server has none (an empty ``LABELSERVE_API_KEY`` is no key, and no
    ``LABELSERVE_API_KEYS_FILE``); ``open_paths`` and paths under ``open_prefixes`` (operations,
    docs pages and their assets) never need one; ``roles`` says which role each route needs.
    ``allowed_hosts`` are ``TrustedHostMiddleware``'s patterns; ``sessions`` reads the dashboard's
    session cookies.
    """

    keys: KeyStore | None
    max_upload_mb: float
    sessions: Sessions
    allowed_hosts: tuple[str, ...]
    open_paths: frozenset[str] = frozenset()
    open_prefixes: tuple[str, ...] = ()
    roles: RouteRoles = field(default_factory=RouteRoles)

    @classmethod
    def of(
        cls,
        settings: Settings,
        open_paths: Iterable[str] = (),
        open_prefixes: Iterable[str] = (),
        routes: Iterable[BaseRoute] = (),
    ) -> RequestGate:
        return cls(
            keys=KeyStore.of(settings),
            max_upload_mb=settings.max_upload_mb,
            sessions=Sessions(settings),
            allowed_hosts=tuple(settings.trusted_hosts),
            open_paths=frozenset(open_paths),
            open_prefixes=tuple(open_prefixes),
            roles=RouteRoles(routes),
        )

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def too_large(self) -> str:
        return f"request body larger than LABELSERVE_MAX_UPLOAD_MB ({self.max_upload_mb:g} MB)"

    def is_open(self, path: str) -> bool:
        """Whether ``path`` is served without the key (always, when the server has none)."""
        return self.keys is None or path in self.open_paths or path.startswith(self.open_prefixes)

    def authenticate(self, path: str, headers: list[tuple[bytes, bytes]]) -> Key | tuple[int, str]:
        """The key a guarded request carries (a header; on a dashboard path without one, the key
        its signed-in session names), or the 401 refusing it: no key, or one the server does not know."""
        given = given_key(headers)
        if given is None:
            signed_in = self.session_key(path, headers)
            return (401, MISSING) if signed_in is None else signed_in
        key = self.keys.identify(given) if self.keys is not None else None
        return (401, INVALID) if key is None else key

    def session_key(self, path: str, headers: Iterable[tuple[bytes, bytes]]) -> Key | None:
        """The key a dashboard page's session signed in with, when ``path`` is a dashboard page and
        that key is still the server's: the session names the key and is bound to an HMAC of its
        SHA-256, so a key revoked, or given another secret under the same name, ends its sessions."""
        if not is_ui_path(path) or self.keys is None:
            return None
        session = self.sessions.read(cookie(headers, SESSION_COOKIE))
        if session is None or not session.key:
            return None
        found = self.keys.named(session.name)
        if found is None:
            return None
        key, sha256 = found
        return key if self.sessions.bound_to(session, sha256) else None

    def cross_site_refusal(self, method: str, path: str, headers: Mapping[bytes, bytes]) -> str | None:
        """The message refusing a request that would change something on the JSON API of a server
        without keys and whose ``Origin`` is another site's (or ``null``), else None. The
        dashboard's forms have their own, stricter check (``app.ui.session.csrf_ok``)."""
        origin = headers.get(b"origin")
        if self.keys is not None or origin is None or method not in CHANGING or is_ui_path(path):
            return None
        text = origin.decode("latin-1")
        return None if same_host(text, headers.get(b"host", b"").decode("latin-1")) else CROSS_SITE.format(origin=text)

    def host_admitted(self, host: bytes | None) -> bool:
        """Whether ``TrustedHostMiddleware`` would answer this ``Host``: one of ``allowed_hosts``,
        or under a ``*.`` pattern's domain. The fast path's question; anything this does not
        recognise goes to the middleware, which decides."""
        if "*" in self.allowed_hosts:
            return True
        if host is None:
            return False
        text = host.decode("latin-1").lower()
        colon = text.find(":", text.find("]") + 1 if text.startswith("[") else 0)  # past an IPv6 literal
        name, port = (text, "") if colon < 0 else (text[:colon], text[colon + 1 :])
        if not name or (colon >= 0 and not port.isdigit()):
            return False
        return any(name == p or (p.startswith("*.") and name.endswith(p[1:])) for p in self.allowed_hosts)

    def decide(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> Key | tuple[int, str]:
        """The key admitting a guarded request, or the status and message refusing it (401, or
        403 when the key's role may not call the route)."""
        key = self.authenticate(path, headers)
        if not isinstance(key, Key):
            return key
        refusal = self.roles.refusal(key, method, path)
        return key if refusal is None else (403, refusal)

    def admits(self, method: str, path: str, headers: list[tuple[bytes, bytes]], length: bytes | None) -> bool:
        """Whether every layer would let this request through: an allowed ``Host``, a declared
        length (``length``, the Content-Length header) within the limit, one Content-Type at most,
        and if ``path`` needs one a key whose role may call it, or, on a server without keys, no
        other site's ``Origin``. The fast path's question, answered without refusing anything."""
        if length is None or not length.isdigit() or int(length) > self.max_body_bytes:
            return False
        if content_type_refusal(headers) is not None:
            return False
        named = dict(headers)
        if not self.host_admitted(named.get(b"host")) or self.cross_site_refusal(method, path, named) is not None:
            return False
        return self.is_open(path) or isinstance(self.decide(method, path, headers), Key)


def given_key(raw_headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The key a request carries (``X-API-Key``, else a bearer token), or None."""
    headers = dict(raw_headers)
    if b"x-api-key" in headers:
        return bytes(headers[b"x-api-key"])
    scheme, _, credentials = bytes(headers.get(b"authorization", b"")).partition(b" ")
    if scheme.lower() == b"bearer" and credentials.strip():
        return credentials.strip()
    return None


def content_type_refusal(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The message refusing a request with more than one Content-Type header, or None.

    HTTP gives a message one Content-Type (RFC 9110, section 8.3); with two, which one describes
    the body is a guess, and the layers guessed differently.
    """
    given = [value.decode("latin-1") for name, value in headers if name == b"content-type"]
    if len(given) < 2:
        return None
    return (
        f"Content-Type: the request has {len(given)} Content-Type headers ({', '.join(given)}); "
        "send one, the media type of the body"
    )


def is_ui_path(path: str) -> bool:
    return path == UI_PREFIX or path.startswith(UI_PREFIX + "/")


def same_host(url: str, host: str | None) -> bool:
    """Whether ``url`` (an ``Origin`` or ``Referer``) names the host of ``host`` (the request's
    ``Host`` header, port included). ``null``, the origin of sandboxed and local pages, names none."""
    return bool(host) and url != "null" and urlsplit(url).netloc.lower() == (host or "").lower()


def cookie(raw_headers: Iterable[tuple[bytes, bytes]], wanted: str) -> str | None:
    """The value of the request's cookie ``wanted``, or None."""
    cookies: SimpleCookie = SimpleCookie()
    for name, value in raw_headers:
        if name == b"cookie":
            try:
                cookies.load(value.decode("latin-1"))
            except CookieError:
                return None
    morsel = cookies.get(wanted)
    return morsel.value if morsel is not None and morsel.value else None


class ApiKeyGate:
    """Demand a key on every HTTP path the gate does not leave open, of a role that may call it."""

    def __init__(self, app: ASGIApp, gate: RequestGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.gate.is_open(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        decided = self.gate.decide(scope["method"], path, scope["headers"])
        if isinstance(decided, Key):
            scope[KEY_SCOPE] = decided
            await self.app(scope, receive, send)
            return
        refusal = decided
        if refusal[0] == 401 and is_ui_path(path):
            await _to_login(send)
            return
        status, message = refusal
        # the unread body must not be taken for the next request
        headers = [(b"connection", b"close"), *([(b"www-authenticate", b"Bearer")] if status == 401 else [])]
        await _reject(send, status, message, headers)


class CrossSiteGate:
    """On a server without a key, refuse (403) a request that would change something on the JSON
    API and that a page of another site sent (``RequestGate.cross_site_refusal``)."""

    def __init__(self, app: ASGIApp, gate: RequestGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.gate.cross_site_refusal(scope["method"], scope["path"], dict(scope["headers"]))
            if refusal is not None:
                await _reject(send, 403, refusal, [(b"connection", b"close")])
                return
        await self.app(scope, receive, send)


class UploadLimit:
    """Answer 413 to a POST or PUT whose body is larger than the gate allows, and 400 to one with
    more than one Content-Type header."""

    def __init__(self, app: ASGIApp, gate: RequestGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT"):
            await self.app(scope, receive, send)
            return
        ambiguous = content_type_refusal(scope["headers"])
        if ambiguous is not None:
            await _reject(send, 400, ambiguous, [])
            return
        limit, message = self.gate.max_body_bytes, self.gate.too_large
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _reject(send, 413, message, [])
            return
        received = 0
        rejected = False

        async def counting_receive() -> Message:
            # Past the limit, answer 413 at once and tell the app the client went away; the
            # app's own (error) response is then dropped by ``guarded_send``.
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message_in = await receive()
            if message_in["type"] == "http.request":
                received += len(message_in.get("body", b""))
                if received > limit:
                    rejected = True
                    await _reject(send, 413, message, [])
                    return {"type": "http.disconnect"}
            return message_in

        async def guarded_send(message_out: Message) -> None:
            if not rejected:
                await send(message_out)

        await self.app(scope, counting_receive, guarded_send)


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
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
