"""``app.services.keys``: the keys file, its reading again when it changes, and the roles' order."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from app.services import keys
from app.services.keys import Key, KeyFileError, KeyStore, Role, add_key, digest, read_entries, remove_key


def _line(name: str, role: str, key: str) -> str:
    return json.dumps({"name": name, "role": role, "sha256": digest(key)}) + "\n"


def _changed(store: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the store look at its file at the next request (it looks once a second at most)."""
    monkeypatch.setattr(store, "_next_check", 0.0)


def test_each_role_allows_the_ones_before_it():
    assert [r.value for r in Role] == ["read", "predict", "train", "admin"]
    assert Role.TRAIN.allows(Role.PREDICT) and Role.TRAIN.allows(Role.TRAIN)
    assert not Role.PREDICT.allows(Role.TRAIN) and Role.ADMIN.allows(Role.READ)


def test_the_file_and_the_single_key_are_one_store(tmp_path: Path):
    path = tmp_path / "keys.jsonl"
    path.write_text("# the CI's key\n\n" + _line("ci", "predict", "k-ci"))
    store = KeyStore(path, "k-default")
    assert store.identify(b"k-ci") == Key("ci", Role.PREDICT)
    assert store.identify(b"k-default") == Key("default", Role.ADMIN)
    assert store.identify(b"k-other") is None


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"name": "ci", "role": "boss", "sha256": "' + "a" * 64 + '"}\n', "line 1: not a key entry (role:"),
        ('{"name": "ci", "role": "read", "key": "k"}\n', "line 1: not a key entry"),
        ("ci read abc\n", "line 1: not a key entry"),
        (_line("default", "read", "k"), "line 1: the name 'default' is LABELSERVE_API_KEY's"),
        (_line("ci", "read", "k1") + _line("ci", "train", "k2"), "line 2: the same name as 'ci'"),
        (_line("ci", "read", "k1") + _line("ops", "admin", "k1"), "line 2: the same key as 'ci'"),
    ],
)
def test_a_file_that_does_not_parse_names_the_line(tmp_path: Path, content: str, words: str):
    path = tmp_path / "keys.jsonl"
    path.write_text(content)
    with pytest.raises(KeyFileError) as error:
        KeyStore(path, None)
    assert words in str(error.value), str(error.value)


def test_a_missing_file_or_the_single_key_twice_is_refused_at_start(tmp_path: Path):
    with pytest.raises(KeyFileError, match="is not a file"):
        KeyStore(tmp_path / "nowhere.jsonl", None)
    path = tmp_path / "keys.jsonl"
    path.write_text(_line("ci", "read", "k-default"))
    with pytest.raises(KeyFileError, match="the key of 'ci' is LABELSERVE_API_KEY's"):
        KeyStore(path, "k-default")


def test_the_file_is_read_again_when_it_changes(tmp_path: Path, monkeypatch, caplog):
    path = tmp_path / "keys.jsonl"
    path.write_text(_line("ci", "predict", "k-ci") + _line("ops", "admin", "k-ops"))
    store = KeyStore(path, None)
    path.write_text(_line("ops", "admin", "k-ops"))  # ci revoked
    assert store.identify(b"k-ci") == Key("ci", Role.PREDICT)  # looked at once a second at most
    _changed(store, monkeypatch)
    assert store.identify(b"k-ci") is None and store.identify(b"k-ops") == Key("ops", Role.ADMIN)
    with caplog.at_level(logging.ERROR, "labelserve.keys"):
        path.write_text("not json\n")
        _changed(store, monkeypatch)
        assert store.identify(b"k-ops") == Key("ops", Role.ADMIN)  # the keys read before stay
    assert "not re-read" in caplog.text
    os.remove(path)
    _changed(store, monkeypatch)
    assert store.identify(b"k-ops") is None  # no file: none of its keys


def test_the_reload_is_throttled_to_a_stat_a_second(tmp_path: Path, monkeypatch):
    path = tmp_path / "keys.jsonl"
    path.write_text(_line("ci", "read", "k"))
    store = KeyStore(path, None)
    looked: list[object] = []
    monkeypatch.setattr(keys, "_signature", lambda p: looked.append(p))
    for _ in range(100):
        store.identify(b"k")
    assert looked == []


def test_add_prints_a_new_key_once_and_appends_its_hash(tmp_path: Path):
    path = tmp_path / "keys.jsonl"
    path.write_text("# no newline at the end")
    key = add_key(path, "ci", Role.PREDICT)
    assert key.startswith("lsk_") and len(key) > 40 and key not in path.read_text()
    assert [(e.name, e.role, e.sha256) for e in read_entries(path)] == [("ci", Role.PREDICT, digest(key))]
    other = add_key(tmp_path / "new.jsonl", "ops", Role.ADMIN)
    assert (tmp_path / "new.jsonl").stat().st_mode & 0o777 == 0o600 and other != key
    for name, words in (("ci", "already in"), ("default", "reserved"), ("no spaces", "1 to 64 letters")):
        with pytest.raises(KeyFileError, match=words):
            add_key(path, name, Role.READ)


def test_remove_revokes_one_key_and_keeps_the_rest(tmp_path: Path):
    path = tmp_path / "keys.jsonl"
    path.write_text("# keys\n" + _line("ci", "predict", "k-ci") + _line("ops", "admin", "k-ops"))
    path.chmod(0o640)
    assert remove_key(path, "ci") and not remove_key(path, "ci")
    assert path.read_text() == "# keys\n" + _line("ops", "admin", "k-ops")
    assert path.stat().st_mode & 0o777 == 0o640
