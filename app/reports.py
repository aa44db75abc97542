"""Self-contained HTML reports: a comparison's leaderboard, or one model version's evaluation.

A report is one HTML page that opens in a browser with no network: the style is inline and every
plot is a matplotlib PNG embedded as a base64 ``data:`` URI. Plots are drawn on ``Figure``
objects directly (no ``pyplot`` state), so reports can be built from any thread. Every text that
comes from a user (dataset, label and model names) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import average_precision_score, f1_score

from app.metrics import LOWER_IS_BETTER

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.best { background: #eef6ee; }
img { max-width: 100%; display: block; margin: 1em 0; }
.note { color: #666; font-size: 0.9em; }
"""

#: at most this many labels are drawn in a per-label plot (the rest would be unreadable)
_MAX_LABELS = 60
#: samples shown in the predicted-against-true distribution plot
_N_SAMPLES = 4


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def page(title: str, sections: Sequence[str], subtitle: str = "") -> str:
    """One complete HTML document."""
    head = f"<h1>{_esc(title)}</h1>" + (f'<p class="note">{_esc(subtitle)}</p>' if subtitle else "")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>"
        + head
        + "".join(sections)
        + "</body></html>"
    )


# ------------------------------------------------------------------------------------ plots
def metric_bars(rows: Sequence[tuple[str, float | None, float | None]], metric: str) -> str:
    """One bar per method with its standard deviation as the error bar."""
    names = [r[0] for r in rows]
    means = [r[1] if r[1] is not None else np.nan for r in rows]
    stds = [r[2] if r[2] is not None else 0.0 for r in rows]
    fig = Figure(figsize=(max(4.0, 0.7 * len(rows) + 2), 3.2))
    ax = fig.add_subplot()
    ax.bar(range(len(rows)), means, yerr=stds, capsize=4, color="#4c72b0")
    ax.set_xticks(range(len(rows)), names, rotation=30, ha="right")
    ax.set_ylabel(metric + (" (lower is better)" if metric in LOWER_IS_BETTER else ""))
    ax.set_title(f"{metric} by method (mean and std over folds)")
    finite = [m for m in means if np.isfinite(m)]
    if finite and metric not in LOWER_IS_BETTER:
        ax.set_ylim(max(0.0, min(finite) - 0.1), min(1.0, max(finite) + 0.05) if max(finite) <= 1 else None)
    return _png(fig)


def per_label_scores(Y: np.ndarray, S: np.ndarray | None, Yhat: np.ndarray | None, labels: Sequence[str]) -> str:
    """Per-label average precision (from scores) and F1 (from label sets), one pair of bars per label."""
    Y = np.asarray(Y) > 0
    q = Y.shape[1]
    shown = list(range(min(q, _MAX_LABELS)))
    ap = np.full(q, np.nan)
    if S is not None:
        for j in shown:
            if Y[:, j].any() and not Y[:, j].all():
                ap[j] = average_precision_score(Y[:, j], S[:, j])
    f1 = np.full(q, np.nan)
    if Yhat is not None:
        f1 = f1_score(Y, np.asarray(Yhat) > 0, average=None, zero_division=0.0)
    fig = Figure(figsize=(max(5.0, 0.35 * len(shown) + 2), 3.4))
    ax = fig.add_subplot()
    x = np.arange(len(shown))
    ax.bar(x - 0.2, ap[shown], width=0.4, label="average precision", color="#4c72b0")
    ax.bar(x + 0.2, f1[shown], width=0.4, label="F1", color="#dd8452")
    ax.set_xticks(x, [str(labels[j])[:20] for j in shown], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    title = "per-label scores" + (f" (first {len(shown)} of {q} labels)" if q > len(shown) else "")
    ax.set_title(title)
    return _png(fig)


def fraction_curves(curves: Mapping[str, Mapping[float, Sequence[float]]]) -> str:
    """Downstream average precision against the fraction of features kept, one line per selector."""
    fig = Figure(figsize=(5.5, 3.4))
    ax = fig.add_subplot()
    for name, curve in curves.items():
        fractions = sorted(curve)
        means = [float(np.mean(curve[f])) for f in fractions]
        stds = [float(np.std(curve[f])) for f in fractions]
        ax.errorbar(fractions, means, yerr=stds, marker="o", capsize=3, label=name)
    ax.set_xlabel("fraction of features kept")
    ax.set_ylabel("ML-kNN average precision")
    ax.set_title("downstream average precision against features kept")
    ax.legend(fontsize=8)
    return _png(fig)


def distributions(D: np.ndarray, P: np.ndarray, labels: Sequence[str], rows: Sequence[int] | None = None) -> str:
    """Predicted against true label distributions for a few samples (grouped bars)."""
    rows = list(rows) if rows is not None else list(np.linspace(0, len(D) - 1, min(_N_SAMPLES, len(D)), dtype=int))
    fig = Figure(figsize=(3.2 * len(rows), 3.0))
    c = D.shape[1]
    x = np.arange(c)
    for i, r in enumerate(rows):
        ax = fig.add_subplot(1, len(rows), i + 1)
        ax.bar(x - 0.2, D[r], width=0.4, label="true", color="#55a868")
        ax.bar(x + 0.2, P[r], width=0.4, label="predicted", color="#4c72b0")
        ax.set_xticks(x, [str(n)[:10] for n in labels], rotation=60, ha="right", fontsize=7)
        ax.set_title(f"sample {r}", fontsize=9)
        if i == 0:
            ax.legend(fontsize=7)
    return _png(fig)


# ----------------------------------------------------------------------------------- tables
def table(header: Sequence[str], rows: Sequence[Sequence[str]], best_row: int | None = 0) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join(
        f"<tr{' class=best' if i == best_row else ''}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
        for i, row in enumerate(rows)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _params(params: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in params.items() if k != "random_state"}
    return _esc(", ".join(f"{k}={v}" for k, v in shown.items()) or "defaults")


# ---------------------------------------------------------------------------------- reports
def compare_report(
    *,
    title: str,
    metric: str,
    cv: int,
    metric_names: Sequence[str],
    leaderboard: Sequence[Any],
    Y: np.ndarray,
    label_names: Sequence[str],
) -> str:
    """The HTML page of a comparison: leaderboard table and the plots fitting its entries.

    ``leaderboard`` holds ``app.selection.Entry`` objects, best first; ``Y`` is the dataset's
    targets (for the out-of-fold per-label scores and distributions). The best classifier gets
    its per-label scores, the best distribution learner a few predicted distributions, and
    selectors their downstream average precision against the fraction of features kept.
    """
    header = ["method", "parameters", *[f"{m} (mean ± std)" for m in metric_names], "fit seconds"]
    rows = []
    for entry in leaderboard:
        cells = [_esc(entry.method), _params(entry.params)]
        for name in metric_names:
            cells.append(f"{_num(entry.mean(name))} ± {_num(entry.std(name))}")
        cells.append(_num(float(np.mean(entry.fit_seconds)) if entry.fit_seconds else None, 2))
        rows.append(cells)
    sections = [f"<h2>Leaderboard (ranked by {_esc(metric)})</h2>", table(header, rows)]
    failed = [e for e in leaderboard if e.error]
    if failed:
        sections.append(
            '<p class="note">Failed: ' + "; ".join(f"{_esc(e.method)}: {_esc(e.error)}" for e in failed) + "</p>"
        )
    ok = [e for e in leaderboard if not e.error]
    bars = [(e.method + (f" [{_params(e.params)}]" if e.params else ""), e.mean(metric), e.std(metric)) for e in ok]
    if bars:
        sections += ["<h2>Metric per method</h2>", metric_bars(bars, metric)]
    learners = [e for e in ok if e.oof_scores is not None]
    if learners:
        best = learners[0]
        if best.oof_labels is not None:
            sections += [
                f"<h2>Per-label scores of the best classifier ({_esc(best.method)}, out-of-fold)</h2>",
                per_label_scores(Y, best.oof_scores, best.oof_labels, label_names),
            ]
        else:
            sections += [
                f"<h2>Predicted against true distributions ({_esc(best.method)}, out-of-fold)</h2>",
                distributions(Y, best.oof_scores, label_names),
            ]
    selectors = {e.method: e.curve for e in ok if e.curve}
    if selectors:
        sections += [
            "<h2>Selectors: downstream average precision against the fraction of features</h2>",
            fraction_curves(selectors),
        ]
    note = f"{cv}-fold cross-validation on the dataset; best first. Selectors: ML-kNN (k=10) on their top features."
    return page(title, sections, subtitle=note)


def version_report(
    *,
    title: str,
    task: str,
    scores: Mapping[str, float | None],
    label_names: Sequence[str],
    Y: np.ndarray | None = None,
    S: np.ndarray | None = None,
    Yhat: np.ndarray | None = None,
    P: np.ndarray | None = None,
    curve: Mapping[float, float] | None = None,
    note: str = "",
) -> str:
    """The HTML page of one version evaluated on one dataset."""
    rows = [[_esc(name), _num(value)] for name, value in scores.items()]
    sections = ["<h2>Metrics</h2>", table(["metric", "value"], rows, best_row=None)]
    if note:
        sections.append(f'<p class="note">{_esc(note)}</p>')
    if task == "multilabel" and Y is not None:
        sections += ["<h2>Per-label scores</h2>", per_label_scores(Y, S, Yhat, label_names)]
    elif task == "distribution" and Y is not None and P is not None:
        sections += ["<h2>Predicted against true distributions</h2>", distributions(Y, P, label_names)]
    elif task == "selection" and curve:
        sections += [
            "<h2>Downstream average precision against the fraction of features</h2>",
            fraction_curves({"selected features": {f: [v] for f, v in curve.items()}}),
        ]
    return page(title, sections)
