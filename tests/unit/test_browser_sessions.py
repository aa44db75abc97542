"""The dashboard's sessions: the server's secret in the store, signed session cookies, CSRF tokens
bound to a session, and the throttling of wrong keys."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from itsdangerous import URLSafeTimedSerializer

from app.api.browser import Session, Sessions
from app.config import Settings
from app.services.keys import digest
from app.storage.secret_key import FILENAME, stored_secret
from app.ui import session as ui_session


def test_the_secret_is_made_once_private_and_shared(tmp_path: Path) -> None:
    with ProcessPoolExecutor(4) as pool:  # processes starting at once agree on one secret
        secrets = set(pool.map(stored_secret, [tmp_path / "store"] * 8))
    assert len(secrets) == 1 and len(secrets.pop()) == 64
    path = tmp_path / "store" / FILENAME
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == [FILENAME]  # no temporary file left
    path.write_text("short")
    with pytest.raises(RuntimeError, match="holds no secret"):
        stored_secret(tmp_path / "store")


def _sessions(tmp_path: Path, api_key: str | None = "k1", secret_key: str | None = None) -> Sessions:
    return Sessions(Settings(model_dir=tmp_path, api_key=api_key, secret_key=secret_key, session_hours=1))


def test_session_cookies_are_signed_expire_and_name_the_key_they_signed_in_with(tmp_path: Path) -> None:
    sessions = _sessions(tmp_path)
    sessions.open()
    assert (tmp_path / FILENAME).exists() and sessions.max_age == 3600
    raw = "raw-key-Qx7vLm2Zp9"  # long enough that a random signature cannot contain it
    k1, k2 = digest(raw), digest("k2")
    anonymous, cookie = sessions.new()
    assert sessions.read(cookie) == anonymous and not sessions.bound_to(anonymous, k1) and not anonymous.name
    signed, cookie = sessions.new("ci", k1)
    assert signed.id != anonymous.id and sessions.read(cookie) == signed and sessions.bound_to(signed, k1)
    payload = str(URLSafeTimedSerializer("any").loads_unsafe(cookie)[1])  # what the cookie carries
    assert signed.name == "ci" and raw not in cookie + payload and k1 not in cookie + payload
    assert signed.key not in (k1, raw)
    assert _sessions(tmp_path).read(cookie) == signed  # another process on the same store
    assert not sessions.bound_to(signed, k2)  # another key (the name given another secret): signed out
    assert _sessions(tmp_path, secret_key="s" * 40).read(cookie) is None  # another secret
    tampered = cookie[:-2] + ("AA" if not cookie.endswith("AA") else "BB")
    for bad in (None, "", "x", tampered, cookie.replace(".", "", 1)):
        assert sessions.read(bad) is None, bad
    sessions.max_age = -1  # older than the sessions' age: expired
    assert sessions.read(cookie) is None
    assert not sessions.bound_to(None, k1) and not sessions.bound_to(Session("x", ""), k1)


def test_csrf_tokens_are_bound_to_their_session(tmp_path: Path) -> None:
    sessions = _sessions(tmp_path, secret_key="s" * 40)
    one, _ = sessions.new()
    two, _ = sessions.new()
    token = sessions.csrf_token(one)
    assert sessions.csrf_ok(one, token) and sessions.csrf_token(one) == token
    assert not sessions.csrf_ok(two, token)
    assert not _sessions(tmp_path, secret_key="t" * 40).csrf_ok(one, token)
    for forged in ("", "x", token[:-1], one.id, "A" * len(token)):
        assert not sessions.csrf_ok(one, forged), forged


def test_wrong_keys_are_throttled_for_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(ui_session.time, "monotonic", lambda: now[0])
    throttle = ui_session.LoginThrottle()
    for _ in range(9):
        throttle.failed("a")
        now[0] += 1
    assert throttle.retry_after("a") is None
    throttle.failed("a")  # the tenth within a minute
    assert throttle.retry_after("a") == 51 and throttle.retry_after("b") is None
    now[0] += 50.5
    assert throttle.retry_after("a") == 1
    now[0] += 0.5  # the oldest failure is a minute old
    assert throttle.retry_after("a") is None
    for _ in range(10):
        throttle.failed("a")
    throttle.succeeded("a")
    assert throttle.retry_after("a") is None
    monkeypatch.setattr(ui_session.LoginThrottle, "CLIENTS", 3)
    for client in "wxyz":
        throttle.failed(client)
    assert set(throttle._failures) == {"x", "y", "z"}  # the oldest address is forgotten first
