"""``RequestGate``: the API key, the upload limit, the Host names and other sites' requests, as the
middlewares and the fast path ask them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import Message

from app.api.gate import INVALID, MISSING, RequestGate, content_type_refusal, same_host
from app.config import Settings
from app.runtime import server

HOST = (b"host", b"localhost:8000")


def _gate(tmp_path: Path, api_key: str = "s3cret", allowed_hosts: str | None = None) -> RequestGate:
    settings = Settings(model_dir=tmp_path, api_key=api_key, max_upload_mb=1, allowed_hosts=allowed_hosts)
    return RequestGate.of(settings, open_paths=["/health"], open_prefixes=["/static/"])


def test_the_key_is_demanded_except_on_open_paths(tmp_path):
    gate = _gate(tmp_path)
    assert gate.is_open("/health") and gate.is_open("/static/app.js")
    assert not gate.is_open("/predict") and not gate.is_open("/healthz")
    assert gate.key_refusal([]) == (401, MISSING)
    assert gate.key_refusal([(b"x-api-key", b"wrong")]) == (403, INVALID)
    assert gate.key_refusal([(b"x-api-key", b"s3cret")]) is None
    assert gate.key_refusal([(b"authorization", b"Bearer s3cret")]) is None
    assert gate.key_refusal([(b"authorization", b"Basic s3cret")]) == (401, MISSING)


def test_an_empty_key_is_no_key(tmp_path):
    gate = _gate(tmp_path, api_key="")
    assert gate.api_key is None and gate.is_open("/predict")


def test_admits_only_what_both_layers_would_let_through(tmp_path):
    gate = _gate(tmp_path)
    key = [HOST, (b"x-api-key", b"s3cret")]
    assert gate.admits("/predict", key, b"1048576")
    assert not gate.admits("/predict", key, b"1048577")  # over the limit
    assert not gate.admits("/predict", key, None)  # undeclared length: the limit counts it
    assert not gate.admits("/predict", key, b"12x")
    assert not gate.admits("/predict", [HOST, (b"x-api-key", b"wrong")], b"10")
    assert not gate.admits("/predict", key[1:], b"10")  # no Host: TrustedHostMiddleware answers 400
    assert gate.admits("/health", [HOST], b"10")
    assert gate.too_large == "request body larger than LABELSERVE_MAX_UPLOAD_MB (1 MB)"


def test_two_content_types_are_not_admitted(tmp_path):
    """Which of two Content-Types describes the body is ambiguous: the fast path leaves such a
    request to ``UploadLimit``, which refuses it (400)."""
    gate = _gate(tmp_path, api_key="")
    one = [HOST, (b"content-type", b"application/json")]
    assert gate.admits("/predict", one, b"10") and content_type_refusal(one) is None
    two = [*one, (b"content-type", b"text/plain")]
    assert not gate.admits("/predict", two, b"10")
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
    assert not gate.admits("/predict", [HOST, (b"origin", b"http://evil.example")], b"10")
    assert gate.admits("/predict", [HOST, (b"origin", b"http://localhost:8000")], b"10")
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
