"""Reports are single self-contained HTML pages: charts inlined, no network resources, names
escaped and never parsed, every metric with its direction, selectors apart from classifiers."""

from __future__ import annotations

import csv
import io
import re

import numpy as np

from app.evaluation import cross_validation, reports
from tests.helpers import assert_self_contained, make_distribution, make_multilabel

#: a label matplotlib's mathtext parser refused (issue 24, item 4), and one plotly would read as markup
HOSTILE = [r"$\undefinedcmd$", "<b>bold</b>", "three"]


def _facts(X: np.ndarray, Y: np.ndarray, multilabel: bool = True) -> reports.DatasetFacts:
    return reports.DatasetFacts.of("data <x>", "abcd", X, Y, multilabel=multilabel)


def _served(page: str) -> str:
    return reports.with_scripts(page)


def test_compare_report_has_a_traceable_header_directions_and_a_csv() -> None:
    X, Y = make_multilabel(n=60, d=8, q=3)
    board = cross_validation.rank(
        cross_validation.cross_validate(X, Y, "multilabel", [("br", {}), ("mlknn", {"k": 99})], cv=3), "hamming_loss"
    )
    page = _served(
        reports.compare_report(
            data=_facts(X, Y),
            metric="hamming_loss",
            cv=3,
            seed=17,
            metric_names=["average_precision", "hamming_loss"],
            leaderboard=board,
            Y=Y,
            label_names=HOSTILE,
        )
    )
    assert assert_self_contained(page) == 2  # metric bars, per-label heat map
    cardinality = float(np.mean(Y.sum(axis=1)))
    assert "n = 60 rows, d = 8 features, q = 3 labels" in page and f"label cardinality {cardinality:.2f}" in page
    assert "3-fold cross-validation, 1 repeat, seed 17" in page and "labelserve " in page and " UTC" in page
    assert '<th scope="col">average_precision ↑</th>' in page and '<th scope="col">hamming_loss ↓</th>' in page
    assert "mean ± std over folds, ranked by hamming_loss ↓" in page
    assert "data &lt;x&gt;" in page and "Failed" in page and "mlknn (k=99)" in page
    assert "Feature selectors" not in page
    # the leaderboard downloads from the page itself, as CSV with one row per entry
    encoded = re.search(r'download="leaderboard.csv" href="data:text/csv;base64,([^"]+)"', page)
    assert encoded is not None
    rows = list(csv.reader(io.StringIO(__import__("base64").b64decode(encoded.group(1)).decode())))
    assert rows[0][:3] == ["rank", "method", "parameters"] and [r[1] for r in rows[1:]] == ["br", "mlknn"]
    assert rows[1][2] == "defaults" and rows[2][2] == "k=99"


def test_label_names_are_shown_not_parsed() -> None:
    X, Y = make_multilabel(n=40, d=5, q=3)
    board = cross_validation.cross_validate(X, Y, "multilabel", [("br", {})], cv=2)
    page = reports.compare_report(
        data=_facts(X, Y),
        metric="average_precision",
        cv=2,
        seed=0,
        metric_names=["average_precision"],
        leaderboard=board,
        Y=Y,
        label_names=HOSTILE,
    )
    assert r"&#36;\\undefinedcmd&#36;" in page  # in the chart's JSON: no TeX delimiters left
    assert "&lt;b&gt;bold&lt;" in page and "<b>bold" not in page
    version = reports.version_report(
        title="v1", task="multilabel", scores={"hamming_loss": 0.1}, label_names=HOSTILE, Y=Y, Yhat=Y
    )
    assert assert_self_contained(_served(version)) == 1
    assert r"$\undefinedcmd$" in version  # in the table, where HTML shows it as text


def test_selectors_have_their_own_section_and_a_curve_to_all_features() -> None:
    X, Y = make_multilabel(n=60, d=10, q=3)
    board = cross_validation.cross_validate(
        X, Y, "multilabel", [("br", {}), ("mi-filter", {"estimator": "binned"})], cv=3, random_state=0
    )
    page = _served(
        reports.compare_report(
            data=_facts(X, Y),
            metric="average_precision",
            cv=3,
            seed=0,
            metric_names=["average_precision"],
            leaderboard=cross_validation.rank(board, "average_precision"),
            Y=Y,
            label_names=["a", "b", "c"],
        )
    )
    assert assert_self_contained(page) == 3  # classifier bars, heat map, selector curve
    classifiers, selectors = page.split("<h2>Feature selectors</h2>")
    assert "mi-filter (estimator=binned)" not in classifiers.split("<h2>Classifiers</h2>")[1].split("<script")[0]
    assert "mi-filter" in selectors and "br" not in selectors.split('<table class="board">')[1].split("</table>")[0]
    entry = next(e for e in board if e.method == "mi-filter")
    assert min(entry.curve) == 0.05 and max(entry.curve) == 1.0
    assert "all features" in selectors  # the reference line's annotation
    support = Y.sum(axis=0).astype(int)
    assert all(f"(n={s})" in classifiers for s in support)  # each label's support on the heat map


def test_confusion_counts_per_label() -> None:
    Y = np.array([[1, 0], [1, 1], [0, 0], [0, 1]])
    Yhat = np.array([[1, 1], [0, 1], [0, 0], [1, 1]])
    np.testing.assert_array_equal(reports.confusion_counts(Y, Yhat), [[1, 1, 1, 1], [2, 1, 0, 1]])
    np.testing.assert_allclose(reports.per_label_f1(Y, Yhat), [0.5, 0.8])
    page = reports.version_report(
        title="v", task="multilabel", scores={"hamming_loss": 0.25}, label_names=["x", "y"], Y=Y, Yhat=Yhat
    )
    assert "<td>2</td><td>2</td><td>1</td><td>0</td><td>1</td><td>0.800</td>" in page  # y first: support 2, F1 0.8


def test_version_report_of_a_blend_shows_member_shares() -> None:
    page = reports.version_report(
        title="blend",
        task="selection",
        scores={"average_precision": 0.5},
        label_names=[],
        members=[("br", {}, 1.0), ("rf", {"n_estimators": 50}, 3.0)],
        curve={0.05: 0.4, 0.2: 0.5, 1.0: 0.55},
        facts=[("trained on", "train (<code>x</code>)")],
    )
    assert page.index("rf") < page.index("<td>br</td>")  # largest share first
    assert "75.0%" in page and "25.0%" in page and "n_estimators=50" in page and "trained on" in page


def test_compare_and_version_reports_of_distributions() -> None:
    X, D = make_distribution(n=40)
    board = cross_validation.cross_validate(X, D, "distribution", [("aa-knn", {})], cv=2)
    page = _served(
        reports.compare_report(
            data=_facts(X, D, multilabel=False),
            metric="chebyshev",
            cv=2,
            seed=1,
            metric_names=["chebyshev"],
            leaderboard=board,
            Y=D,
            label_names=list("abcd"),
        )
    )
    assert assert_self_contained(page) == 3  # bars, per-label error heat map, sample distributions
    assert "chebyshev ↓" in page and "label cardinality" not in page
    page = _served(
        reports.version_report(
            title="v1",
            task="distribution",
            scores={"chebyshev": 0.1, "kl": float("nan")},
            label_names=list("abcd"),
            Y=D,
            P=np.full_like(D, 0.25),
        )
    )
    assert assert_self_contained(page) == 2 and "<td>-</td>" in page  # undefined metric shown as "-"
