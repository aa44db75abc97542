"""The Markdown documentation holds together: relative links lead somewhere, every setting is
documented, and the metrics page says the right direction for every metric.

The docs are plain Markdown read on the forge or in an editor (no site generator), so a broken
relative link or a stale anchor would only be noticed by a reader; these tests notice first.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import scoring
from app.config import Settings
from app.jobs.celery_backend import CelerySettings

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub derives: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.*?)\s*$", FENCE.sub("", page.read_text()), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def relative_links(page: Path) -> list[str]:
    targets = LINK.findall(FENCE.sub("", page.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # not http:, mailto:, ...


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_lead_to_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert not broken, broken


def test_no_page_cites_a_file_outside_the_repository() -> None:
    # the HTTP contract is docs/api.md; ../shared/data, the benchmark data folder, is a setting's default
    outside = re.compile(r"\bAPI\.md|\.\./shared/(?!data\b)")
    cited = {str(page.relative_to(ROOT)): outside.findall(page.read_text()) for page in PAGES}
    assert {page: found for page, found in cited.items() if found} == {}


def test_the_pages_are_reachable_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")}
    assert {page.resolve() for page in ROOT.glob("docs/*.md")} <= linked


def test_every_setting_is_on_the_configuration_page() -> None:
    section = (ROOT / "docs/configuration.md").read_text()
    names = set(Settings.model_fields) | set(CelerySettings.model_fields)
    missing = [f"LABELSERVE_{name.upper()}" for name in names if f"`LABELSERVE_{name.upper()}`" not in section]
    assert not missing, missing


def test_the_metrics_page_gives_every_metric_its_direction() -> None:
    rows = re.findall(r"^\| `(\w+)` \|.*\| (lower|higher) \|$", (ROOT / "docs/metrics.md").read_text(), re.MULTILINE)
    direction = dict(rows)
    assert len(direction) == len(rows)  # each metric described once
    assert set(direction) == set(scoring.MULTILABEL_METRICS) | set(scoring.LDL_METRICS)
    assert {name for name, way in direction.items() if way == "lower"} == scoring.LOWER_IS_BETTER
