"""``RequestGate``: the API keys, their roles, the upload limit, the Host names and other sites'
requests, as the middlewares and the fast path ask them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Route
from starlette.types import Message

from app.api.browser import SESSION_COOKIE
from app.api.gate import INVALID, MISSING, RequestGate, content_type_refusal, same_host
from app.config import Settings
from app.runtime import server
from app.services.keys import Key, Role, add_key, digest, remove_key

HOST = (b"host", b"localhost:8000")


def _gate(tmp_path: Path, api_key: str = "s3cret", **settings: object) -> RequestGate:
    configured = Settings(model_dir=tmp_path, api_key=api_key, max_upload_mb=1, **settings)
    routes = [
        Route("/predict", lambda _: None, methods=["POST"]),
        Route("/models/{name}", lambda _: None, methods=["GET", "DELETE"]),
        Route("/ui/models/{name}/delete", lambda _: None, methods=["POST"]),
    ]
    return RequestGate.of(configured, open_paths=["/health"], open_prefixes=["/static/"], routes=routes)


def test_the_key_is_demanded_except_on_open_paths(tmp_path):
    gate = _gate(tmp_path)
    assert gate.is_open("/health") and gate.is_open("/static/app.js")
    assert not gate.is_open("/predict") and not gate.is_open("/healthz")
    admin = Key("default", Role.ADMIN)
    assert gate.authenticate("/predict", []) == (401, MISSING)
    assert gate.authenticate("/predict", [(b"x-api-key", b"wrong")]) == (401, INVALID)
    assert gate.authenticate("/predict", [(b"x-api-key", b"s3cret")]) == admin
    assert gate.authenticate("/predict", [(b"authorization", b"Bearer s3cret")]) == admin
    assert gate.authenticate("/predict", [(b"authorization", b"Basic s3cret")]) == (401, MISSING)


def test_the_dashboard_session_counts_on_ui_paths_only_with_its_key_role_and_while_the_key_lasts(tmp_path):
    keys = tmp_path / "keys.jsonl"
    reader = add_key(keys, "dash", Role.READ)
    gate = _gate(tmp_path, api_keys_file=keys)
    assert gate.keys is not None

    def session_of(name: str, key: str) -> list[tuple[bytes, bytes]]:
        cookie = gate.sessions.new(name, digest(key))[1]
        return [(b"cookie", f"{SESSION_COOKIE}={cookie}".encode())]

    dash = session_of("dash", reader)
    assert gate.authenticate("/ui/models", dash) == Key("dash", Role.READ)
    assert gate.authenticate("/models", dash) == (401, MISSING)  # never on the JSON API
    refused = gate.decide("POST", "/ui/models/m/delete", dash)  # the key's role applies: not admin
    assert isinstance(refused, tuple) and refused[0] == 403 and "'admin'" in refused[1]
    assert gate.authenticate("/ui/models", session_of("default", "s3cret")) == Key("default", Role.ADMIN)
    assert gate.authenticate("/ui/models", session_of("dash", "another")) == (401, MISSING)  # bound to the key
    assert gate.authenticate("/ui/models", [(b"cookie", b"labelserve_ui_key=s3cret")]) == (401, MISSING)  # no raw key
    assert gate.authenticate("/ui/models", [(b"cookie", f"{SESSION_COOKIE}={gate.sessions.new()[1]}".encode())]) == (
        401,
        MISSING,
    )  # a session not signed in
    remove_key(keys, "dash")
    gate.keys._next_check = 0  # past the reload interval
    assert gate.authenticate("/ui/models", dash) == (401, MISSING)  # revoked: its sessions end
    again = add_key(keys, "dash", Role.ADMIN)  # the name given another key
    gate.keys._next_check = 0
    assert gate.authenticate("/ui/models", dash) == (401, MISSING)
    assert gate.authenticate("/ui/models", session_of("dash", again)) == Key("dash", Role.ADMIN)


def test_an_empty_key_is_no_key(tmp_path):
    gate = _gate(tmp_path, api_key="")
    assert gate.keys is None and gate.is_open("/predict")


def test_a_key_of_a_role_below_the_route_is_refused_403_naming_both(tmp_path):
    keys = tmp_path / "keys.jsonl"
    reader = add_key(keys, "dash", Role.READ)
    gate = _gate(tmp_path, api_keys_file=keys)
    headers = [(b"x-api-key", reader.encode())]
    assert gate.decide("GET", "/models/m", headers) == Key("dash", Role.READ)
    assert gate.decide("DELETE", "/models/m", headers) == (
        403,
        "this key (name 'dash', role 'read') may not DELETE /models/m: it needs the 'admin' role",
    )
    assert gate.decide("POST", "/predict", headers)[0] == 403
    assert not gate.admits("POST", "/predict", headers, b"10")
    assert gate.decide("PATCH", "/models/m", headers) == Key("dash", Role.READ)  # no route: the router's 405


def test_admits_only_what_both_layers_would_let_through(tmp_path):
    gate = _gate(tmp_path)
    key = [HOST, (b"x-api-key", b"s3cret")]
    assert gate.admits("POST", "/predict", key, b"1048576")
    assert not gate.admits("POST", "/predict", key, b"1048577")  # over the limit
    assert not gate.admits("POST", "/predict", key, None)  # undeclared length: the limit counts it
    assert not gate.admits("POST", "/predict", key, b"12x")
    assert not gate.admits("POST", "/predict", [HOST, (b"x-api-key", b"wrong")], b"10")
    assert not gate.admits("POST", "/predict", key[1:], b"10")  # no Host: TrustedHostMiddleware answers 400
    assert gate.admits("GET", "/health", [HOST], b"10")
    assert gate.too_large == "request body larger than LABELSERVE_MAX_UPLOAD_MB (1 MB)"


def test_two_content_types_are_not_admitted(tmp_path):
    """Which of two Content-Types describes the body is ambiguous: the fast path leaves such a
    request to ``UploadLimit``, which refuses it (400)."""
    gate = _gate(tmp_path, api_key="")
    one = [HOST, (b"content-type", b"application/json")]
    assert gate.admits("POST", "/predict", one, b"10") and content_type_refusal(one) is None
    two = [*one, (b"content-type", b"text/plain")]
    assert not gate.admits("POST", "/predict", two, b"10")
    assert content_type_refusal(two[1:]) == (
        "Content-Type: the request has 2 Content-Type headers (application/json, text/plain); "
        "send one, the media type of the body"
    )


def test_the_default_hosts_and_ipv6_literals(tmp_path):
    assert Settings(model_dir=tmp_path, allowed_hosts=None).trusted_hosts == ["localhost", "127.0.0.1", "[::1]"]
    assert Settings(model_dir=tmp_path, allowed_hosts="").trusted_hosts == ["localhost", "127.0.0.1", "[::1]"]
    given = " Labelserve.Example.org, ::1,[fe80::1],*.internal "
    assert Settings(model_dir=tmp_path, allowed_hosts=given).trusted_hosts == [
        "labelserve.example.org",
        "[::1]",
        "[fe80::1]",
        "*.internal",
    ]


HOSTS = [
    "localhost", "localhost:8000", "LOCALHOST:80", "127.0.0.1:1", "[::1]", "[::1]:8000", "api.internal",
    "a.b.internal:9", "internal", "evil.example", "localhost.evil.example", "evil.localhost", "localhost:",
    "localhost:x", "localhost:80:80", "[::1", "[::2]:80", "::1", "", "127.0.0.1.nip.io",
]  # fmt: skip


@pytest.mark.parametrize("allowed", ["localhost,127.0.0.1,::1,*.internal", "*"])
def test_the_fast_path_never_admits_a_host_the_middleware_refuses(tmp_path, allowed):
    """``host_admitted`` is the fast path's copy of TrustedHostMiddleware's test: it may leave a
    request to the middleware, never take one the middleware would refuse."""
    gate = _gate(tmp_path, api_key="", allowed_hosts=allowed)

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    middleware = TrustedHostMiddleware(app, allowed_hosts=gate.allowed_hosts, www_redirect=False)

    def middleware_status(host: str) -> int:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"host", host.encode())] if host else []}
        asyncio.run(middleware(scope, None, send))  # type: ignore[arg-type]
        return sent[0]["status"]

    for host in HOSTS:
        assert gate.host_admitted(host.encode() if host else None) == (middleware_status(host) == 200), host


def test_other_sites_may_not_change_anything_on_a_keyless_server(tmp_path):
    gate = _gate(tmp_path, api_key="")

    def refused(method: str, path: str, origin: bytes | None, host: bytes = b"localhost:8000") -> bool:
        headers = {b"host": host, **({b"origin": origin} if origin is not None else {})}
        return gate.cross_site_refusal(method, path, headers) is not None

    assert refused("POST", "/datasets", b"http://evil.example")
    assert refused("DELETE", "/models/m", b"null")
    assert refused("PUT", "/models/m/aliases/a", b"http://localhost:8001")  # another port: another origin
    assert refused("PATCH", "/x", b"http://localhost.evil.example:8000")
    assert not refused("POST", "/datasets", None)  # curl, the CLI, the Python client
    assert not refused("POST", "/datasets", b"http://localhost:8000")  # the docs' "Try it out"
    assert not refused("POST", "/datasets", b"HTTP://LOCALHOST:8000")
    assert not refused("GET", "/datasets", b"http://evil.example")  # reads stay the browser's CORS business
    assert not refused("POST", "/ui/train", b"http://evil.example")  # the dashboard's forms check themselves
    assert not _gate(tmp_path).cross_site_refusal("POST", "/datasets", {b"origin": b"null"})  # a key: it decides
    assert not gate.admits("POST", "/predict", [HOST, (b"origin", b"http://evil.example")], b"10")
    assert gate.admits("POST", "/predict", [HOST, (b"origin", b"http://localhost:8000")], b"10")
    assert same_host("https://a.example/x?y", "a.example") and not same_host("null", "null")


def test_serve_answers_its_specific_bind_address(monkeypatch):
    monkeypatch.delenv("LABELSERVE_ALLOWED_HOSTS", raising=False)
    server.get_settings.cache_clear()
    for host in ("0.0.0.0", "::", "127.0.0.1", "localhost"):
        server.allow_bind_host(host)
        assert "LABELSERVE_ALLOWED_HOSTS" not in os.environ, host
    server.allow_bind_host("10.1.2.3")
    assert server.get_settings().trusted_hosts == ["localhost", "127.0.0.1", "[::1]", "10.1.2.3"]
    monkeypatch.setenv("LABELSERVE_ALLOWED_HOSTS", "labelserve.example.org")
    server.get_settings.cache_clear()
    server.allow_bind_host("10.1.2.4")  # set explicitly: left as it is
    assert server.get_settings().trusted_hosts == ["labelserve.example.org"]
    server.get_settings.cache_clear()
