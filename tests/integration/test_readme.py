"""The README's walk-through, run verbatim against a real server so it cannot drift.

The fenced ``bash`` (and ``python``) blocks between the ``walkthrough:start`` and
``walkthrough:end`` markers run in order as one script, in a folder holding a copy of
``samples/`` (as the repository root does), against ``labelserve serve`` on a free port. The only
change to their text is the base URL. ``curl`` is made to fail on an HTTP error status (and print
the body), so every request of the walk-through must succeed, not just run.

What the README shows as an answer must be the answer: a comment line ``# => ...`` (with
continuation lines ``#    ...``) is an expectation, checked against what the commands since the
previous expectation printed. ``…`` stands for anything, whitespace is ignored, and a decimal
number matches any number that rounds to it (the README shows ``0.667`` where the server sends ``0.6666666666666666``).
Values that change from run to run are shown as ``# e.g. ...`` and not checked.

Afterwards the folder holds nothing but ``samples/`` (the walk-through writes its HTML reports to
``mktemp -d``, here inside the test's own temporary folder) and the Swagger UI's request examples
still succeed against the same server: the walk-through must not delete what they use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.api import examples
from tests.helpers import live_server

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8000"
PREAMBLE = """set -euo pipefail
curl() { command curl --fail-with-body --show-error "$@"; echo; }
"""
EXPECT = "# => "
CONTINUED = "#    "
MARK = "@@expectation {}@@"
NUMBER = re.compile(r"-?\d+\.\d+")


def walkthrough_blocks(text: str | None = None) -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text() if text is None else text
    section = text[text.index("<!-- walkthrough:start") : text.index("<!-- walkthrough:end -->")]
    return re.findall(r"^```(bash|python)\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)


def with_markers(body: str, language: str, expected: list[str]) -> str:
    """``body`` with each expectation replaced by a command printing its marker (appended to ``expected``)."""
    lines: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(EXPECT):
            expected.append(stripped[len(EXPECT) :])
            marker = MARK.format(len(expected) - 1)
            lines.append(f"echo '{marker}'" if language == "bash" else f"print({marker!r}, flush=True)")
        elif stripped.startswith(CONTINUED) and lines and "@@expectation" in lines[-1]:
            expected[-1] += stripped[len(CONTINUED) :].strip()
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def as_script(blocks: list[tuple[str, str]], url: str) -> tuple[str, list[str]]:
    """The walk-through as one bash script, and the expectations its markers stand for."""
    parts = [PREAMBLE]
    expected: list[str] = []
    for language, body in blocks:
        body = with_markers(body.replace(README_URL, url), language, expected)
        parts.append(body if language == "bash" else f"python3 - <<'PYTHON'\n{body}PYTHON\n")
    return "\n".join(parts), expected


def pattern(expected: str) -> tuple[re.Pattern[str], list[str]]:
    """A regex for ``expected`` (``…`` = anything) and the decimal numbers it captures, in order."""
    pieces: list[str] = []
    numbers: list[str] = []
    for i, fragment in enumerate(expected.split("…")):
        if i:
            pieces.append(".*?")
        at = 0
        for number in NUMBER.finditer(fragment):
            pieces.append(re.escape(fragment[at : number.start()]))
            pieces.append(r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
            numbers.append(number.group())
            at = number.end()
        pieces.append(re.escape(fragment[at:]))
    return re.compile("".join(pieces), flags=re.DOTALL), numbers


def shows(output: str, expected: str) -> bool:
    """Whether ``output`` holds ``expected``, each decimal of it rounded as the README writes it.

    Whitespace is left out of both, so an expectation may wrap anywhere and Python's reprs (with
    spaces) and compact JSON (without) are shown alike."""
    regex, numbers = pattern(re.sub(r"\s+", "", expected))
    for match in regex.finditer(re.sub(r"\s+", "", output)):
        if all(
            abs(float(got) - float(want)) <= 0.5 * 10.0 ** -len(want.split(".")[1]) + 1e-12
            for got, want in zip(match.groups(), numbers, strict=True)
        ):
            return True
    return False


def unmet(output: str, expected: list[str]) -> list[str]:
    """The expectations the output between their markers does not show, with what it showed."""
    failures = []
    rest = output
    for i, want in enumerate(expected):
        segment, found, rest = rest.partition(MARK.format(i) + "\n")
        if not found:
            failures.append(f"expectation {i} never reached: {want}")
            break
        if not shows(segment, want):
            failures.append(f"README shows: {want}\nthe commands printed: {segment.strip()[-1500:]}")
    return failures


def test_the_walkthrough_has_the_steps_it_promises() -> None:
    blocks = walkthrough_blocks()
    script = "\n".join(body for _, body in blocks)
    assert len(blocks) >= 8 and {language for language, _ in blocks} == {"bash", "python"}
    for step in ("/datasets", "/train", "/jobs/", "/predict", "/evaluate", "/models", "labelserve train"):
        assert step in script, step
    for output in ('"output":"labels"', '"output":"ranking"', '"output":"distribution"', '"output":"features"'):
        assert any(output in line for line in script.splitlines() if line.strip().startswith(EXPECT)), output
    assert "/work/shared" not in script and "../shared" not in script  # only files it makes or ships
    for path in re.findall(r"@(samples/[\w./-]+)|(samples/[\w./-]+)", script):
        assert (ROOT / (path[0] or path[1])).is_file(), path


def test_expectations_match_rounded_numbers_and_elisions_only() -> None:
    output = '{"id":"abc","scores":{"happy":0.6666666666666666,"calm":0.5283},"n":10}\n'
    assert shows(output, '{"id":"abc",…"happy":0.667,"calm":0.528}…')
    assert shows(output, '"n":10}')
    assert not shows(output, '"happy":0.668')  # off in the last shown digit
    assert not shows(output, '"happy":0.67,"calm":0.53…"n":11')
    assert not shows(output, '"calm":0.528…"happy":0.667')  # order matters
    assert shows("k must be an integer\n", "k must be an\n integer") and not shows("k must\n", "k may")
    script, expected = as_script([("bash", 'curl -s $B/x\n# => {…\n#    "n":10}\necho done\n')], README_URL)
    assert expected == ['{…"n":10}'] and "echo '@@expectation 0@@'" in script and "echo done" in script
    assert unmet(output + MARK.format(0) + "\n", expected) == []
    assert unmet('{"n":1}\n' + MARK.format(0) + "\n", expected) != []


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walk-through uses curl")
def test_readme_walkthrough_runs_verbatim_and_shows_its_answers(tmp_path: Path) -> None:
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "samples", work / "samples")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with live_server(tmp_path) as url:
        script, expected = as_script(walkthrough_blocks(), url)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOME": str(tmp_path),
            "TMPDIR": str(scratch),
            "COLUMNS": "120",
        }
        result = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
        swagger = [
            (path, name, httpx.post(f"{url}{path}", json=example["value"], timeout=60))
            for path, family in (("/predict", examples.PREDICT), ("/evaluate", examples.EVALUATE))
            for name, example in family.items()
        ]
    assert len(expected) >= 15
    failures = unmet(result.stdout, expected)
    assert not failures, "\n\n".join(failures)
    assert sorted(os.listdir(work)) == ["samples"]  # nothing written into the checkout
    reports = list(scratch.glob("*/*.html"))
    assert sorted(report.name for report in reports) == ["compare.html", "toy-auto.html"]
    assert all(report.read_text().lstrip().lower().startswith("<!doctype html") for report in reports)
    broken = [(path, name, answer.text[:300]) for path, name, answer in swagger if answer.status_code != 200]
    assert not broken, broken
