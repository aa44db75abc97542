"""Reports are single self-contained HTML pages: plots embedded, no network resources, names escaped."""

from __future__ import annotations

import numpy as np

from app import reports, selection
from tests.helpers import assert_self_contained, make_distribution, make_multilabel


def test_compare_report_of_classifiers_and_selectors() -> None:
    X, Y = make_multilabel(n=60, d=8, q=3)
    names = ["<b>label</b>", "two", "three"]
    board = selection.rank(
        selection.cross_validate(X, Y, "multilabel", [("br", {}), ("mlknn", {"k": 99})], cv=3), "average_precision"
    )
    page = reports.compare_report(
        title="compare <x>",
        metric="average_precision",
        cv=3,
        metric_names=["average_precision", "macro_f1"],
        leaderboard=board,
        Y=Y,
        label_names=names,
    )
    found = assert_self_contained(page)
    assert len([r for r in found.refs if r[0] == "img"]) == 2  # metric bars, per-label scores
    assert "compare &lt;x&gt;" in page and "Failed: mlknn" in page

    sel = selection.cross_validate(X, Y, "multilabel", [("mi-filter", {"estimator": "binned"})], cv=3)
    page = reports.compare_report(
        title="selectors",
        metric="average_precision",
        cv=3,
        metric_names=["average_precision"],
        leaderboard=sel,
        Y=Y,
        label_names=names,
    )
    assert len(assert_self_contained(page).refs) == 2  # metric bars, AP against fraction


def test_compare_and_version_reports_of_distributions() -> None:
    X, D = make_distribution(n=40)
    board = selection.cross_validate(X, D, "distribution", [("aa-knn", {})], cv=2)
    page = reports.compare_report(
        title="ldl",
        metric="chebyshev",
        cv=2,
        metric_names=["chebyshev"],
        leaderboard=board,
        Y=D,
        label_names=list("abcd"),
    )
    assert len(assert_self_contained(page).refs) == 2
    page = reports.version_report(
        title="v1",
        task="distribution",
        scores={"chebyshev": 0.1, "kl": float("nan")},
        label_names=list("abcd"),
        Y=D,
        P=np.full_like(D, 0.25),
    )
    found = assert_self_contained(page)
    assert len(found.refs) == 1 and "<td>-</td>" in page  # undefined metric shown as "-"
