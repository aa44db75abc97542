"""Self-contained HTML reports: a comparison's leaderboard, or one model version's evaluation.

A report is one HTML page that opens in a browser with no network. Charts are plotly figures
(hover, zoom); their JavaScript is plotly's own bundle, shipped by the ``plotly`` package. The
stored page holds only a marker where the bundle goes (``SCRIPT_MARKER``, 4.8 MB that a thousand
stored comparisons would otherwise repeat), and one where the dashboard puts its download link
(``DOWNLOAD_MARKER``). The page is finished in one of two ways: ``with_scripts`` inlines the
bundle (the JSON API's answer and the dashboard's download: a file that opens offline), or
``linked`` points a ``<script src>`` at the bundle served once as a cached asset (the dashboard's
page: 25 KB to send instead of 4.8 MB, the bundle read from the browser's cache after the first
report) and adds the link to the offline file.

Every text that comes from a user (dataset, label and model names) is HTML-escaped, and in chart
texts also stripped of what plotly would read as markup or TeX (``$...$``): a label name is only
ever shown, never parsed. Every metric name is shown with its direction (``↑`` higher is better,
``↓`` lower is better), in tables and on axes alike.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from typing import Any

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from app import __version__
from app.methods.catalog import get_method
from app.scoring import LOWER_IS_BETTER

SCRIPT_MARKER = "<!--labelserve:plotly-->"
DOWNLOAD_MARKER = "<!--labelserve:download-->"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1.5em; max-width: 1400px; color: #1f2328; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
table.board td:nth-child(2), table.board td:nth-child(3), table.board th:nth-child(2), table.board th:nth-child(3) { text-align: left; }
table.board td { white-space: nowrap; }
thead th { background: #f6f8fa; }
tr.best { background: #dafbe1; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; font-size: 0.9em; }
dl.facts dt { color: #57606a; } dl.facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
@media (max-width: 640px) { body { padding: 0.8em; } dl.facts { grid-template-columns: 1fr; } dl.facts dd { margin-bottom: 0.3em; } }
.note { color: #57606a; font-size: 0.9em; }
.scroll { overflow-x: auto; }
.chart { width: 100%; }
"""

#: at most this many labels are drawn in a per-label chart or table (the rest would be unreadable)
MAX_LABELS = 100
#: samples shown in the predicted-against-true distribution chart
_N_SAMPLES = 4


@dataclass(frozen=True)
class DatasetFacts:
    """What a report's header says about the data: enough to trace a saved report."""

    name: str
    id: str | None
    n: int
    d: int
    q: int
    #: mean labels per row; None for label distributions
    cardinality: float | None
    sha256: str | None = None

    @classmethod
    def of(cls, name: str, dataset_id: str | None, X: np.ndarray, Y: np.ndarray, *, multilabel: bool) -> DatasetFacts:
        cardinality = float(np.mean(np.sum(np.asarray(Y) > 0, axis=1))) if multilabel and len(Y) else None
        n, d = X.shape
        return cls(name=name, id=dataset_id, n=int(n), d=int(d), q=int(Y.shape[1]), cardinality=cardinality)


# --------------------------------------------------------------------------------- escaping
def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def chart_text(value: object, limit: int = 40) -> str:
    """A user's text made safe for a plotly label: HTML-escaped (plotly reads ``<b>``, ``<br>``)
    and with ``$`` as an entity (plotly would hand ``$...$`` to a TeX renderer)."""
    text = str(value)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return html.escape(text, quote=False).replace("$", "&#36;")


def direction(metric: str) -> str:
    """The metric's name with its arrow: ``↓`` lower is better, ``↑`` higher is better."""
    return f"{metric} {'↓' if metric in LOWER_IS_BETTER else '↑'}"


def _num(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def params_text(params: Mapping[str, Any]) -> str:
    """Parameters as one short text (``random_state`` left out); ``defaults`` when none were set.
    Used for every entry alike, so a table and a chart name the same entry the same way."""
    shown = {k: v for k, v in params.items() if k != "random_state"}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "defaults"


def entry_name(method: str, params: Mapping[str, Any]) -> str:
    """``method`` alone at its defaults, else ``method (k=5, ...)``: one rule for tables and charts."""
    text = params_text(params)
    return method if text == "defaults" else f"{method} ({text})"


# ----------------------------------------------------------------------------- page pieces
@cache
def bundle_digest() -> tuple[str, str]:
    """plotly's bundle as ``with_scripts`` inlines it (the whole ``<script>`` element), and the
    sha256 (base64) of its script: computed once, so that a Content-Security-Policy allowing the
    inlined bundle costs no hashing of 4.8 MB per page."""
    script = get_plotlyjs()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return f'<script type="text/javascript">{script}</script>', digest


def _plotly_bundle() -> str:
    return bundle_digest()[0]


@cache
def plotly_asset() -> tuple[str, bytes]:
    """The bundle as an asset: its file name (with plotly's version, so that a new release is a
    new address and the old one can be cached for good) and its bytes."""
    return f"plotly-{plotly.__version__}.min.js", get_plotlyjs().encode("utf-8")


def with_scripts(stored: str) -> str:
    """The stored page with plotly's bundle inlined in place of its marker: a file that opens offline."""
    return stored.replace(SCRIPT_MARKER, _plotly_bundle(), 1).replace(DOWNLOAD_MARKER, "", 1)


def linked(stored: str, script_src: str, download_href: str) -> str:
    """The stored page loading plotly's bundle from ``script_src``, with a link to the offline
    file at ``download_href`` (a page saved from the browser would need the server for its charts)."""
    script = f'<script type="text/javascript" src="{_esc(script_src)}"></script>'
    link = (
        f'<p class="note"><a href="{_esc(download_href)}" download>Download this report as one HTML file</a> '
        "(plotly's JavaScript inlined: it opens offline, charts and all).</p>"
    )
    if DOWNLOAD_MARKER not in stored:  # a report stored by 0.1.x
        stored = stored.replace("<main>", "<main>" + DOWNLOAD_MARKER, 1)
    return stored.replace(SCRIPT_MARKER, script, 1).replace(DOWNLOAD_MARKER, link, 1)


def page(title: str, facts: Sequence[tuple[str, str]], sections: Sequence[str]) -> str:
    """One complete HTML document; ``facts`` are (term, already-escaped HTML) pairs of the header."""
    header = "".join(f"<dt>{_esc(term)}</dt><dd>{value}</dd>" for term, value in facts)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_STYLE}</style>{SCRIPT_MARKER}</head><body><main>"
        f'<h1>{_esc(title)}</h1><dl class="facts">{header}</dl>{DOWNLOAD_MARKER}'
        + "".join(sections)
        + "</main></body></html>"
    )


@cache
def _white_template() -> dict[str, Any]:
    """plotly's ``plotly_white`` template as plain JSON, made once: naming it on a figure makes
    plotly copy and validate the whole template again (a third of a report's build time)."""
    return pio.templates["plotly_white"].to_plotly_json()


def _chart(fig: go.Figure, height: int = 420) -> str:
    fig.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
        font={"family": "system-ui, sans-serif", "size": 12},
    )
    spec = fig.to_dict()  # validated as it was built; the template joins it as the JSON it already is
    spec["layout"]["template"] = _white_template()
    return '<div class="chart">' + pio.to_html(
        spec, full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True},
        validate=False,
    ) + "</div>"  # fmt: skip


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], best_row: int | None = 0, caption: str = "", css: str = ""
) -> str:
    """An HTML table; ``header`` is plain text (escaped here), ``rows`` already-escaped HTML cells."""
    head = "".join(f'<th scope="col">{_esc(h)}</th>' for h in header)
    body = "".join(
        f"<tr{' class=best' if i == best_row else ''}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
        for i, row in enumerate(rows)
    )
    cap = f"<caption class=note>{_esc(caption)}</caption>" if caption else ""
    attribute = f' class="{css}"' if css else ""
    # a table wider than the window scrolls in its box, which the keyboard can reach (tabindex)
    region = f'tabindex="0" role="region" aria-label="{_esc(caption or ", ".join(header))}"'
    return (
        f'<div class="scroll" {region}><table{attribute}>{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def csv_text(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _download(text: str, filename: str, label: str) -> str:
    """A link that downloads ``text`` from the page itself (so it works in a saved file too)."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f'<p><a download="{_esc(filename)}" href="data:text/csv;base64,{data}">{_esc(label)}</a></p>'


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _dataset_facts(data: DatasetFacts) -> list[tuple[str, str]]:
    facts = [("dataset", _esc(data.name) + (f" (<code>{_esc(data.id)}</code>)" if data.id else ""))]
    if data.sha256:
        facts.append(("dataset sha256", f"<code>{_esc(data.sha256)}</code>"))
    size = f"n = {data.n} rows, d = {data.d} features, q = {data.q} labels"
    if data.cardinality is not None:
        size += f", label cardinality {data.cardinality:.2f}"
    return [*facts, ("size", _esc(size))]


# ----------------------------------------------------------------------------------- charts
def metric_bars(rows: Sequence[tuple[str, float | None, float | None]], metric: str) -> str:
    """One bar per entry with its standard deviation over folds as the error bar."""
    names = [chart_text(r[0], 60) for r in rows]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[r[1] for r in rows],
            error_y={"type": "data", "array": [r[2] or 0.0 for r in rows]},
            marker_color="#4c72b0",
            hovertemplate="%{x}<br>%{y:.4f} ± %{error_y.array:.4f}<extra></extra>",
        )
    )
    fig.update_layout(title=f"{direction(metric)} by method (mean ± std over folds)", yaxis_title=direction(metric))
    return _chart(fig)


def label_heatmap(
    values: np.ndarray, methods: Sequence[str], labels: Sequence[str], support: np.ndarray, metric: str
) -> str:
    """A label x method heat map of a per-label score; each label's row names its support. With
    one method (a version's report), one bar a label: a one-column heat map reads worse."""
    shown = min(len(labels), MAX_LABELS)
    rows = [f"{chart_text(labels[j], 30)} (n={int(support[j])})" for j in range(shown)]
    reverse = metric in LOWER_IS_BETTER
    title = f"per-label {direction(metric)}" + (
        f" (first {shown} of {len(labels)} labels)" if shown < len(labels) else ""
    )
    if len(methods) == 1:
        bars = go.Figure(
            go.Bar(
                x=values[:shown, 0].tolist(),
                y=rows,
                orientation="h",
                marker_color="#4c72b0",
                hovertemplate="%{y}<br>" + metric + " %{x:.3f}<extra></extra>",
            )
        )
        bars.update_layout(title=title, xaxis_title=direction(metric), yaxis={"autorange": "reversed"})
        return _chart(bars, height=max(360, 22 * shown + 160))
    fig = go.Figure(
        go.Heatmap(
            z=values[:shown].tolist(),
            x=[chart_text(m, 40) for m in methods],
            y=rows,
            colorscale="Viridis",
            reversescale=reverse,
            colorbar={"title": {"text": direction(metric)}},
            hovertemplate="%{y}<br>%{x}<br>" + metric + " %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(title=title, yaxis={"autorange": "reversed"})
    return _chart(fig, height=max(360, 22 * shown + 160))


def fraction_curves(curves: Mapping[str, Mapping[float, Sequence[float]]]) -> str:
    """Downstream average precision against the fraction of features kept, one line per selector,
    with the all-features score (the fraction 1.0) as a dashed reference line."""
    fig = go.Figure()
    reference: list[float] = []
    for name, curve in curves.items():
        fractions = sorted(curve)
        means = [float(np.mean(curve[f])) for f in fractions]
        stds = [float(np.std(curve[f])) for f in fractions]
        fig.add_trace(
            go.Scatter(
                x=[100 * f for f in fractions],
                y=means,
                error_y={"type": "data", "array": stds},
                mode="lines+markers",
                name=chart_text(name),
                hovertemplate="%{x:.0f}% of features<br>AP %{y:.4f}<extra>" + chart_text(name) + "</extra>",
            )
        )
        if 1.0 in curve:
            reference.extend(curve[1.0])
    if reference:
        fig.add_hline(
            y=float(np.mean(reference)),
            line_dash="dash",
            line_color="#57606a",
            annotation_text="all features",
            annotation_position="bottom right",
        )
    fig.update_layout(
        title="downstream ML-kNN average precision ↑ against the features kept",
        xaxis={"title": "features kept (% of d)", "range": [0, 102], "ticksuffix": "%"},
        yaxis_title="average_precision ↑",
    )
    return _chart(fig)


def distributions(D: np.ndarray, P: np.ndarray, labels: Sequence[str], rows: Sequence[int] | None = None) -> str:
    """Predicted against true label distributions for a few samples (grouped bars, one panel each)."""
    picked = list(rows) if rows is not None else [int(r) for r in np.linspace(0, len(D) - 1, min(_N_SAMPLES, len(D)))]
    names = [chart_text(n, 12) for n in labels[:MAX_LABELS]]
    c = len(names)
    fig = make_subplots(rows=1, cols=len(picked), subplot_titles=[f"sample {r}" for r in picked], shared_yaxes=True)
    for i, r in enumerate(picked):
        for values, label, color in ((D[r, :c], "true", "#55a868"), (P[r, :c], "predicted", "#4c72b0")):
            fig.add_trace(
                go.Bar(
                    x=names, y=values.tolist(), name=label, marker_color=color, showlegend=i == 0, legendgroup=label
                ),
                row=1,
                col=i + 1,
            )
    fig.update_layout(title="predicted against true distributions", barmode="group")
    return _chart(fig, height=380)


# ------------------------------------------------------------------------- per-label scores
def per_label_f1(Y: np.ndarray, Yhat: np.ndarray) -> np.ndarray:
    """F1 of each label's predicted set (0 where a label is never true nor predicted)."""
    Y, Yhat = np.asarray(Y) > 0, np.asarray(Yhat) > 0
    tp = np.sum(Y & Yhat, axis=0)
    denominator = np.sum(Y, axis=0) + np.sum(Yhat, axis=0)
    return np.divide(2.0 * tp, denominator, out=np.zeros(Y.shape[1]), where=denominator > 0)


def per_label_abs_error(D: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Mean absolute error of each label's predicted share (distribution learners)."""
    return np.asarray(np.mean(np.abs(np.asarray(D) - np.asarray(P)), axis=0))


def confusion_counts(Y: np.ndarray, Yhat: np.ndarray) -> np.ndarray:
    """(q, 4) counts per label: true positives, false positives, false negatives, true negatives."""
    Y, Yhat = np.asarray(Y) > 0, np.asarray(Yhat) > 0
    return np.stack(
        [np.sum(Y & Yhat, 0), np.sum(~Y & Yhat, 0), np.sum(Y & ~Yhat, 0), np.sum(~Y & ~Yhat, 0)], axis=1
    ).astype(np.int64)


# ---------------------------------------------------------------------------------- reports
def leaderboard_rows(leaderboard: Sequence[Any], metric_names: Sequence[str]) -> tuple[list[str], list[list[object]]]:
    """The leaderboard as plain values (the CSV download and ``?format=csv``): one row per entry."""
    header = ["rank", "method", "parameters"]
    for name in metric_names:
        header += [f"{name} mean", f"{name} std"]
    header += ["fit seconds", "error"]
    rows: list[list[object]] = []
    for i, entry in enumerate(leaderboard, 1):
        row: list[object] = [i, entry.method, params_text(entry.params)]
        for name in metric_names:
            row += [_num(entry.mean(name), 6), _num(entry.std(name), 6)]
        row += [_num(float(np.mean(entry.fit_seconds)) if entry.fit_seconds else None, 3), entry.error or ""]
        rows.append(row)
    return header, rows


def _leaderboard_table(entries: Sequence[Any], metric_names: Sequence[str], metric: str) -> str:
    header = ["#", "method", "parameters", *[direction(m) for m in metric_names], "fit seconds"]
    rows = []
    for i, entry in enumerate(entries, 1):
        cells = [str(i), _esc(entry.method), _esc(params_text(entry.params))]
        for name in metric_names:
            cells.append(f"{_num(entry.mean(name))} ± {_num(entry.std(name))}")
        cells.append(_num(float(np.mean(entry.fit_seconds)) if entry.fit_seconds else None, 2))
        rows.append(cells)
    return table(header, rows, caption=f"mean ± std over folds, ranked by {direction(metric)}; best first", css="board")


def compare_report(
    *,
    data: DatasetFacts,
    metric: str,
    cv: int,
    seed: int,
    metric_names: Sequence[str],
    leaderboard: Sequence[Any],
    Y: np.ndarray,
    label_names: Sequence[str],
    job_id: str | None = None,
) -> str:
    """The HTML page of a comparison: a header that traces it, then classifiers (or distribution
    learners) and selectors in sections of their own.

    ``leaderboard`` holds ``app.evaluation.cross_validation.Entry`` objects, best first; ``Y`` is the dataset's
    targets (for the per-label heat map of the out-of-fold predictions). Selectors are scored
    through ML-kNN on their top features, so they are never ranked beside the classifiers.
    """
    facts = [
        *_dataset_facts(data),
        ("protocol", _esc(f"{cv}-fold cross-validation, 1 repeat, seed {seed}")),
        ("ranked by", _esc(direction(metric))),
        ("server", _esc(f"labelserve {__version__}")),
        ("date", _esc(_stamp())),
    ]
    if job_id:
        facts.insert(0, ("job", f"<code>{_esc(job_id)}</code>"))
    header, rows = leaderboard_rows(leaderboard, metric_names)
    sections = [_download(csv_text(header, rows), "leaderboard.csv", "Download the leaderboard (CSV)")]
    learners = [e for e in leaderboard if not _is_selector(e)]
    selectors = [e for e in leaderboard if _is_selector(e)]
    failed = [e for e in leaderboard if e.error]
    if learners:
        sections += _learner_sections(learners, metric_names, metric, Y, label_names)
    if selectors:
        sections += _selector_sections(selectors, metric_names)
    if failed:
        sections.append(
            '<h2>Failed</h2><p class="note">'
            + "; ".join(f"{_esc(entry_name(e.method, e.params))}: {_esc(e.error)}" for e in failed)
            + "</p>"
        )
    return page(f"Comparison on {data.name}", facts, sections)


def _is_selector(entry: Any) -> bool:
    spec = get_method(entry.method)
    return bool(entry.curve) or (spec is not None and spec.task == "selection")


def _learner_sections(
    entries: Sequence[Any], metric_names: Sequence[str], metric: str, Y: np.ndarray, label_names: Sequence[str]
) -> list[str]:
    ok = [e for e in entries if not e.error]
    sections = ["<h2>Classifiers</h2>" if any(e.oof_labels is not None for e in ok) else "<h2>Learners</h2>"]
    sections.append(_leaderboard_table(entries, metric_names, metric))
    bars = [(entry_name(e.method, e.params), e.mean(metric), e.std(metric)) for e in ok]
    if bars:
        sections.append(metric_bars(bars, metric))
    predicted = [e for e in ok if e.oof_scores is not None]
    if not predicted:
        return sections
    names = [entry_name(e.method, e.params) for e in predicted]
    if predicted[0].oof_labels is not None:
        labelled = [e for e in predicted if e.oof_labels is not None]
        values = np.stack([per_label_f1(Y, e.oof_labels) for e in labelled], axis=1)
        support = np.sum(np.asarray(Y) > 0, axis=0)
        sections += [
            "<h3>Per label, out-of-fold</h3>",
            label_heatmap(values, [entry_name(e.method, e.params) for e in labelled], label_names, support, "F1"),
        ]
    else:
        values = np.stack([per_label_abs_error(Y, e.oof_scores) for e in predicted], axis=1)
        support = np.round(np.sum(np.asarray(Y), axis=0), 1)
        sections += [
            "<h3>Per label, out-of-fold</h3>",
            label_heatmap(values, names, label_names, support, "mean_absolute_error"),
            distributions(Y, predicted[0].oof_scores, label_names),
        ]
    return sections


def _selector_sections(entries: Sequence[Any], metric_names: Sequence[str]) -> list[str]:
    ranking = "average_precision"
    sections = [
        "<h2>Feature selectors</h2>",
        '<p class="note">Scored by what they are for: ML-kNN (k=10) trained on each selector\'s top 20% of '
        "features, with the classifiers' metrics; the curve shows the average precision from 5% to 100% of "
        "the features (100%: every feature, the same for every selector).</p>",
        _leaderboard_table(entries, metric_names, ranking),
    ]
    curves = {entry_name(e.method, e.params): e.curve for e in entries if e.curve and not e.error}
    if curves:
        sections.append(fraction_curves(curves))
    return sections


def version_report(
    *,
    title: str,
    task: str,
    scores: Mapping[str, float | None],
    label_names: Sequence[str],
    facts: Sequence[tuple[str, str]] = (),
    members: Sequence[tuple[str, Mapping[str, Any], float]] = (),
    Y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    Yhat: np.ndarray | None = None,
    P: np.ndarray | None = None,
    curve: Mapping[float, float] | None = None,
    note: str = "",
) -> str:
    """The HTML page of one version evaluated on one dataset.

    ``facts`` are the header's (term, escaped HTML) pairs (version, training data, evaluated data,
    libraries); ``members`` a blend's (method, params, weight) triples, shown as shares.
    """
    rows = [[_esc(direction(name)), _num(value)] for name, value in scores.items()]
    sections = ["<h2>Metrics</h2>", table(["metric", "value"], rows, best_row=None)]
    if note:
        sections.append(f'<p class="note">{_esc(note)}</p>')
    if members:
        total = sum(w for _, _, w in members) or 1.0
        member_rows = [
            [_esc(m), _esc(params_text(p)), f"{100 * w / total:.1f}%"]
            for m, p, w in sorted(members, key=lambda t: -t[2])
        ]
        sections += ["<h2>Blend members</h2>", table(["method", "parameters", "share of the blend"], member_rows, None)]
    if task == "multilabel" and Y is not None and Yhat is not None:
        sections += _confusion_section(np.asarray(Y), np.asarray(Yhat), label_names)
    elif task == "distribution" and Y is not None and P is not None:
        support = np.round(np.sum(np.asarray(Y), axis=0), 1)
        sections += [
            "<h2>Per label</h2>",
            label_heatmap(
                per_label_abs_error(Y, P)[:, None], ["this version"], label_names, support, "mean_absolute_error"
            ),
            distributions(Y, P, label_names),
        ]
    elif task == "selection" and curve:
        sections += [
            "<h2>Downstream average precision against the features kept</h2>",
            fraction_curves({"selected features": {f: [v] for f, v in curve.items()}}),
        ]
    stamped = [*facts, ("server", _esc(f"labelserve {__version__}")), ("date", _esc(_stamp()))]
    return page(title, stamped, sections)


def _confusion_section(Y: np.ndarray, Yhat: np.ndarray, label_names: Sequence[str]) -> list[str]:
    counts = confusion_counts(Y, Yhat)
    f1 = per_label_f1(Y, Yhat)
    support = counts[:, 0] + counts[:, 2]
    shown = min(len(label_names), MAX_LABELS)
    order = np.argsort(-support, kind="stable")[:shown]
    rows = [
        [f'<span class="text">{_esc(label_names[j])}</span>', str(support[j]), *map(str, counts[j]), _num(f1[j], 3)]
        for j in order
    ]
    note = f"most frequent {shown} of {len(label_names)} labels" if shown < len(label_names) else "every label"
    return [
        "<h2>Per label: confusion counts</h2>",
        table(
            ["label", "support", "true pos.", "false pos.", "false neg.", "true neg.", "F1 ↑"],
            rows,
            best_row=None,
            caption=f"{note}, most frequent first",
        ),
        label_heatmap(f1[:, None], ["this version"], label_names, support, "F1"),
    ]
