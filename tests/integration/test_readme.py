"""The README's walk-through, run verbatim against a real server so it cannot drift.

The fenced ``bash`` (and ``python``) blocks between the ``walkthrough:start`` and
``walkthrough:end`` markers run in order as one script, in a folder holding a copy of
``samples/`` (as the repository root does), against ``labelserve serve`` on a free port. The only
change to their text is the base URL. ``curl`` is made to fail on an HTTP error status (and print
the body), so every request of the walk-through must succeed, not just run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import live_server

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8000"
PREAMBLE = """set -euo pipefail
curl() { command curl --fail-with-body --show-error "$@"; echo; }
"""


def walkthrough_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("<!-- walkthrough:start") : text.index("<!-- walkthrough:end -->")]
    return re.findall(r"^```(bash|python)\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)


def as_script(blocks: list[tuple[str, str]], url: str) -> str:
    parts = [PREAMBLE]
    for language, body in blocks:
        body = body.replace(README_URL, url)
        parts.append(body if language == "bash" else f"python3 - <<'PYTHON'\n{body}PYTHON\n")
    return "\n".join(parts)


def test_the_walkthrough_has_the_steps_it_promises() -> None:
    blocks = walkthrough_blocks()
    script = "\n".join(body for _, body in blocks)
    assert len(blocks) >= 8 and {language for language, _ in blocks} == {"bash", "python"}
    for step in ("/datasets", "/train", "/jobs/", "/predict", "/evaluate", "/models", "labelserve train"):
        assert step in script, step
    assert "/work/shared" not in script and "../shared" not in script  # only files it makes or ships
    for path in re.findall(r"@(samples/[\w./-]+)|(samples/[\w./-]+)", script):
        assert (ROOT / (path[0] or path[1])).is_file(), path


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walk-through uses curl")
def test_readme_walkthrough_runs_verbatim(tmp_path: Path) -> None:
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "samples", work / "samples")
    with live_server(tmp_path) as url:
        script = as_script(walkthrough_blocks(), url)
        env_path = f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}"
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env={"PATH": env_path, "HOME": str(tmp_path), "COLUMNS": "120"},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    out = result.stdout
    assert '"id":"75c45770f7ed1dc3"' in out and '"kind":"distribution"' in out
    assert out.count('"status":"succeeded"') >= 6
    assert '"output":"features"' in out and '"downstream"' in out
    assert "toy-cli@1" in out and "succeeded None" not in out
    assert '"platform":"labelserve"' in out and '"model_name":"toy-mlknn"' in out  # the V2 protocol
