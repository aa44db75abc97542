"""``RequestGate``: the API key and the upload limit, as the middlewares and the fast path ask them."""

from __future__ import annotations

from pathlib import Path

from app.api.gate import INVALID, MISSING, RequestGate, content_type_refusal
from app.config import Settings


def _gate(tmp_path: Path, api_key: str = "s3cret") -> RequestGate:
    settings = Settings(model_dir=tmp_path, api_key=api_key, max_upload_mb=1)
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
    key = [(b"x-api-key", b"s3cret")]
    assert gate.admits("/predict", key, b"1048576")
    assert not gate.admits("/predict", key, b"1048577")  # over the limit
    assert not gate.admits("/predict", key, None)  # undeclared length: the limit counts it
    assert not gate.admits("/predict", key, b"12x")
    assert not gate.admits("/predict", [(b"x-api-key", b"wrong")], b"10")
    assert gate.admits("/health", [], b"10")
    assert gate.too_large == "request body larger than LABELSERVE_MAX_UPLOAD_MB (1 MB)"


def test_two_content_types_are_not_admitted(tmp_path):
    """Which of two Content-Types describes the body is ambiguous: the fast path leaves such a
    request to ``UploadLimit``, which refuses it (400)."""
    gate = _gate(tmp_path, api_key="")
    one = [(b"content-type", b"application/json")]
    assert gate.admits("/predict", one, b"10") and content_type_refusal(one) is None
    two = [*one, (b"content-type", b"text/plain")]
    assert not gate.admits("/predict", two, b"10")
    assert content_type_refusal(two) == (
        "Content-Type: the request has 2 Content-Type headers (application/json, text/plain); "
        "send one, the media type of the body"
    )
