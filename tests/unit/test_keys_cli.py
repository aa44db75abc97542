"""``labelserve keys add`` / ``remove``: a key printed once, its hash in the file, and revocation."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.client.cli import cli
from app.config import get_settings
from app.services.keys import KeyStore, Role, digest, read_entries

runner = CliRunner()


def test_add_prints_the_key_alone_and_the_server_accepts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "keys.jsonl"
    monkeypatch.setenv("LABELSERVE_API_KEYS_FILE", str(path))
    get_settings.cache_clear()
    try:
        added = runner.invoke(cli, ["keys", "add", "shop", "--role", "predict"])
    finally:
        get_settings.cache_clear()
    assert added.exit_code == 0, added.stderr
    key = added.stdout.strip()
    assert "added key 'shop' (role predict)" in added.stderr and key not in added.stderr
    [entry] = read_entries(path)
    assert (entry.name, entry.role, entry.sha256) == ("shop", Role.PREDICT, digest(key))
    assert KeyStore(path, None).identify(key.encode()) is not None


def test_wrong_usage_exits_2_and_an_unknown_name_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "keys.jsonl"
    assert runner.invoke(cli, ["keys", "add", "ci", "--role", "train", "--file", str(path)]).exit_code == 0
    cases = [
        (["keys", "add", "ci", "--role", "train", "--file", str(path)], 2, "name 'ci' is already in"),
        (["keys", "add", "x", "--role", "boss", "--file", str(path)], 2, "'boss' is not one of read, predict"),
        (["keys", "remove", "nobody", "--file", str(path)], 4, "no key named 'nobody'"),
    ]
    for args, code, words in cases:
        result = runner.invoke(cli, args)
        assert result.exit_code == code and words in result.stderr, (args, result.stderr)
    monkeypatch.delenv("LABELSERVE_API_KEYS_FILE", raising=False)
    get_settings.cache_clear()
    try:
        result = runner.invoke(cli, ["keys", "add", "y", "--role", "read"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2 and "give --file or set LABELSERVE_API_KEYS_FILE" in result.stderr
    removed = runner.invoke(cli, ["keys", "remove", "ci", "--file", str(path)])
    assert removed.exit_code == 0 and read_entries(path) == []
