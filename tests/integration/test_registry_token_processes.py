"""``app.storage.registry_token`` across processes: a change another process writes is read at once."""

from __future__ import annotations

import subprocess
import sys
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

pytestmark = pytest.mark.slow  # a second Python process


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    if filesystem_type(tmp_path) not in LOCAL_FILESYSTEMS:
        pytest.skip(f"{tmp_path} is on {filesystem_type(tmp_path)}, not a local file system")
    return tmp_path


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
