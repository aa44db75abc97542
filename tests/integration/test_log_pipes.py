"""The request log's writes from several processes sharing one pipe: whole lines, never interleaved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # Python subprocesses


def test_lines_of_processes_sharing_one_pipe_never_interleave(tmp_path):
    """Two real processes log long lines in batches to one pipe; every line read back is whole."""
    script = textwrap.dedent(
        """
        import asyncio, logging, sys
        from app.runtime.observability import BatchedLines, JsonFormatter
        handler = BatchedLines(fd=1, delay=0.001)
        handler.setFormatter(JsonFormatter())
        async def main():
            for n in range(3000):
                handler.handle(logging.makeLogRecord({"msg": "x", "who": sys.argv[1], "n": n, "pad": "y" * 700}))
                if n % 300 == 0:
                    await asyncio.sleep(0.002)
            await asyncio.sleep(0.05)
        asyncio.run(main())
        handler.flush()
        """
    )
    r, w = os.pipe()
    procs = [
        subprocess.Popen([sys.executable, "-c", script, who], cwd=ROOT, stdout=w, stderr=subprocess.PIPE)
        for who in ("a", "b")
    ]
    os.close(w)
    with os.fdopen(r, "rb") as out:
        data = out.read()
    for proc in procs:
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    lines = [json.loads(line) for line in data.splitlines()]
    for who in ("a", "b"):
        assert [e["n"] for e in lines if e["who"] == who] == list(range(3000))
