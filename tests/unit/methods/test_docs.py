"""The estimators' documentation: numpydoc sections on every estimator, examples that run, one page per method."""

from __future__ import annotations

import doctest
import inspect
import re
from pathlib import Path

import pytest

from app.methods.catalog import catalog, method_modules
from app.methods.params_doc import END, START, table_block

ROOT = Path(__file__).resolve().parents[3]
#: The paper methods (the baseline wrappers are not covered yet).
SPECS = [s for s in catalog().values() if s.id in {"dmknn", "elcfs", "ghc-dr", "ldlkm", "mlknn", "trans-ovk"}]


@pytest.mark.parametrize("module", method_modules(), ids=lambda m: m.__name__)
def test_examples_run(module):
    """Every ``Examples`` section of app/methods is a doctest (tiny data, so this stays fast)."""
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_estimators_have_numpydoc_sections_listing_every_parameter(spec):
    doc = inspect.getdoc(spec.estimator) or ""
    for section in ("Parameters", "Attributes", "Examples"):
        assert re.search(rf"^{section}\n-{{{len(section)}}}$", doc, re.MULTILINE), section
    params = doc.split("Parameters\n----------", 1)[1].split("Attributes\n----------", 1)[0]
    documented = set(re.findall(r"^(\w+) : ", params, re.MULTILINE))
    assert documented == set(spec.params.model_fields)
    assert ">>> " in doc.split("Examples\n--------", 1)[1]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_each_method_has_its_page(spec):
    page = ROOT / "docs" / "methods" / f"{spec.id}.md"
    text = page.read_text(encoding="utf-8")
    for heading in ("## What it does", "## Readings and why", "## Reproduction"):
        assert heading in text


@pytest.mark.parametrize("spec", list(catalog().values()), ids=lambda s: s.id)
def test_every_catalog_method_has_a_page_whose_parameters_are_its_declaration(spec):
    """What it is, parameters, outputs, cost; the parameter table is the rendering of the current
    ``Params`` declaration (``python -m app.methods.params_doc docs/methods`` rewrites it)."""
    text = (ROOT / "docs" / "methods" / f"{spec.id}.md").read_text(encoding="utf-8")
    for heading in ("## What it does", "## Parameters", "## Outputs", "## Cost"):
        assert heading in text, heading
    assert text.count(START) == 1 and text.count(END) == 1
    assert table_block(spec) in text, "stale parameter table: run python -m app.methods.params_doc docs/methods"
    outputs = text.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{output}`" in outputs for output in spec.outputs)
    index = (ROOT / "docs" / "methods" / "README.md").read_text(encoding="utf-8")
    assert f"({spec.id}.md)" in index


def test_code_points_only_inside_the_repository():
    """No comment or docstring cites a document outside the repository (spec numbers, shared files)."""
    pattern = re.compile(r"spec \d|spec's|\bspec [A-Z]\d|shared/|seed \d{3}|paper \d{3}|\(A\d+\b|\bA\d+[:;)]")
    offenders = []
    for path in sorted((ROOT / "app" / "methods").glob("*.py")) + [ROOT / "app" / "scoring.py"]:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
