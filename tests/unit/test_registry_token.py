"""``app.storage.registry_token``: a change written by any process is read at once, mapped or not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.storage import registry_token
from app.storage.registry_token import LOCAL_FILESYSTEMS, RegistryToken, filesystem_type

ROOT = Path(__file__).resolve().parents[2]
WRITER = "import sys; from pathlib import Path; from app.storage.registry_token import RegistryToken\n" + (
    "token = RegistryToken(Path(sys.argv[1]))\n"
    "for line in sys.stdin:\n"
    "    token.publish(); print(token.read().decode(), flush=True)\n"
)


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


@pytest.mark.parametrize("mapped", [True, False])
def test_a_change_written_by_another_process_is_read_at_once(local_dir: Path, monkeypatch, mapped: bool) -> None:
    if not mapped:  # as on NFS: every read opens the file
        monkeypatch.setattr(registry_token, "filesystem_type", lambda path: "nfs4")
    path = local_dir / "registry.token"
    reader = RegistryToken(path)
    RegistryToken(path).publish()
    reader.read()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        for _ in range(50):
            writer.stdin.write("\n")
            writer.stdin.flush()
            written = writer.stdout.readline().strip().encode()
            assert reader.read() == written  # no delay: the write returned before the line came
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    assert (reader._map is not None) is mapped


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
