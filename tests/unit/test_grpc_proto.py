"""The committed gRPC code of the V2 protocol is what its committed ``.proto`` generates, with
the command written at the top of the ``.proto`` (``grpcio-tools``, pinned in the dev extra)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "app/api/v2/proto/grpc_predict_v2.proto"
GENERATED = ("grpc_predict_v2_pb2.py", "grpc_predict_v2_pb2.pyi", "grpc_predict_v2_pb2_grpc.py")


def _command() -> list[str]:
    """The protoc arguments of the command the ``.proto`` gives (its comment lines after 'with:')."""
    text = PROTO.read_text()
    lines = text[text.index("Regenerate") :].split("with:", 1)[1].splitlines()[1:3]
    command = " ".join(re.sub(r"^//\s*", "", line).rstrip("\\ ") for line in lines)
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/python", "-m", "grpc_tools.protoc"], words
    return words[3:]


def test_the_committed_code_is_what_the_proto_generates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc")  # the dev extra's
    copy = tmp_path / PROTO.relative_to(ROOT)
    copy.parent.mkdir(parents=True)
    copy.write_bytes(PROTO.read_bytes())
    monkeypatch.chdir(tmp_path)  # the command runs from the repository's root: here, a copy of the .proto
    assert protoc.main(["protoc", *_command()]) == 0
    for name in GENERATED:
        made = (copy.parent / name).read_text()
        assert made == (PROTO.parent / name).read_text(), f"{name} is stale: run the command at the top of {PROTO.name}"
