"""The shape of ``app``: every module under an import contract, ARCHITECTURE.md's layer list the
contract's, and the limits a newcomer relies on (a short top level, no module past 800 lines)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest brings tomli on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for path in APP.rglob("*.py")
    )


def _named(contract: dict) -> list[str]:
    """The modules a contract names (a layer's siblings, sources, independent modules)."""
    names = [name.strip() for layer in contract.get("layers", []) for name in re.split(r"[|:]", layer)]
    names += contract.get("source_modules", []) + contract.get("modules", [])
    return [name for name in names if name]


def _covers(pattern: str, module: str) -> bool:
    if pattern.endswith(".*"):
        return module.startswith(pattern[:-1])
    return module == pattern or module.startswith(pattern + ".")


def test_every_module_of_app_is_under_a_contract_that_names_it():
    named = [name for contract in CONTRACTS if contract["type"] != "acyclic_siblings" for name in _named(contract)]
    uncovered = [m for m in _modules() if m != "app" and not any(_covers(p, m) for p in named)]
    assert uncovered == []


def test_every_top_level_package_and_module_is_in_the_layers():
    layers = next(c for c in CONTRACTS if c["id"] == "layers")["layers"]
    in_layers = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    top = {f"app.{p.stem}" for p in APP.glob("*.py") if p.stem != "__init__"}
    top |= {f"app.{p.name}" for p in APP.iterdir() if (p / "__init__.py").exists()}
    assert top == in_layers


def test_the_layers_of_architecture_md_are_the_contract():
    layers = next(c for c in CONTRACTS if c["id"] == "layers")["layers"]
    shown = re.search(r"```layers\n(.*?)```", (ROOT / "ARCHITECTURE.md").read_text(), re.S)
    assert shown is not None, "ARCHITECTURE.md has no ```layers block"
    assert shown.group(1).splitlines() == layers


def test_the_top_level_is_short_and_no_module_there_is_named_like_one_in_a_package():
    top = sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 10, top
    # domain errors beside their HTTP mapping (app/errors.py, app/api/errors.py) are the convention
    nested = {p.stem for p in APP.glob("*/**/*.py")} - {"__init__", "errors"}
    assert sorted(set(top) & nested) == []


def test_no_module_passes_800_lines():
    long = {str(p.relative_to(ROOT)): n for p in APP.rglob("*.py") if (n := len(p.read_text().splitlines())) > 800}
    assert long == {}


def test_no_function_passes_80_lines():
    import ast

    long = [
        f"{p.relative_to(ROOT)}:{node.name}"
        for p in APP.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80
    ]
    assert long == []


def test_unit_tests_start_no_app_and_no_subprocess():
    """Those belong in tests/api (the ASGI app) and tests/integration (processes)."""
    starts = re.compile(r"\b(create_app|TestClient|subprocess|Popen)\b")
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "unit").rglob("*.py") if starts.search(p.read_text())]
    assert found == [str(Path(__file__).relative_to(ROOT))]  # this file names them
