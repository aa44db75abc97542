"""``app.storage.registry_token``: a change written by any process is read at once, mapped or not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.storage import registry_token
from app.storage.registry_token import LOCAL_FILESYSTEMS, RegistryToken, filesystem_type


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    if filesystem_type(tmp_path) not in LOCAL_FILESYSTEMS:
        pytest.skip(f"{tmp_path} is on {filesystem_type(tmp_path)}, not a local file system")
    return tmp_path


def test_the_file_system_type_is_read_from_the_mount_table(tmp_path: Path) -> None:
    assert filesystem_type(Path("/proc/self")) == "proc"
    assert filesystem_type(tmp_path) is not None


def test_no_token_before_the_first_change_then_a_new_one_per_change(local_dir: Path) -> None:
    token = RegistryToken(local_dir / "registry.token")
    assert token.read() == b""
    seen = set()
    for _ in range(20):
        token.publish()
        seen.add(token.read())
    assert len(seen) == 20 and all(len(t) == 32 for t in seen)
    assert token._map is not None  # read from memory


def test_a_file_replaced_behind_the_service_is_noticed(local_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(registry_token, "RECHECK_SECONDS", 0.05)
    path = local_dir / "registry.token"
    token = RegistryToken(path)
    token.publish()
    before = token.read()
    replacement = local_dir / "restored"
    replacement.write_bytes(b"f" * 32)
    os.replace(replacement, path)  # a new file under the name: the mapping still shows the old one
    time.sleep(0.1)
    assert token.read() == b"f" * 32 != before
    path.unlink()
    time.sleep(0.1)
    assert token.read() == b""
