"""The ``labelserve`` command starts without what it does not need: ``--version`` and ``--help``
import neither the client (httpx) nor NumPy, SciPy, pydantic, rich or any server module, and a
simple call imports the client and nothing else of those (benchmarks/cli_startup.py measures the
time; docs/cli.md records it).

typer 0.29 and later convert every option through pydantic (pyproject.toml keeps typer below it):
in an environment with such a typer the pydantic checks fail.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

HEAVY = ("numpy", "scipy", "pandas", "pydantic", "rich", "fastapi", "starlette", "sqlalchemy")
TYPER = "an import the command should not make (with typer 0.29+, pydantic: pyproject.toml keeps typer below 0.29)"
TRANSPORT = ("httpx", "httpcore")
CLIENT = ("app.client.http", "app.client.arrays")
# the modules of app any command imports: its own and the upload options
COMMAND = ("app.client.cli", "app.upload_options")


def imported(*args: str) -> set[str]:
    """Every module ``labelserve ARGS`` imports (``python -X importtime``)."""
    command = [sys.executable, "-X", "importtime", "-m", "app.client.cli", *args]
    lines = subprocess.run(command, capture_output=True, text=True, timeout=60).stderr.splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


def under(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {name for name in modules if any(name == root or name.startswith(f"{root}.") for root in roots)}


@pytest.mark.parametrize(
    "args", [["--version"], ["--help"], ["datasets", "upload", "--help"], ["compare", "--help"]], ids=" ".join
)
def test_version_and_help_import_no_client_and_nothing_heavy(args: list[str]) -> None:
    modules = imported(*args)
    assert under(modules, HEAVY + TRANSPORT + CLIENT) == set(), TYPER
    assert under(modules, ("app",)) == {"app", "app.client"} | under(modules, COMMAND)


def test_a_call_imports_the_client_and_nothing_heavy() -> None:
    modules = imported("--url", "http://127.0.0.1:9", "datasets", "list")  # a closed port: exit 6
    assert {"httpx", "app.client.http"} <= modules
    assert under(modules, HEAVY) == set(), TYPER  # rich neither: httpx's own command line is not imported
    assert under(modules, ("app",)) == {"app", "app.client"} | under(modules, COMMAND + CLIENT)
