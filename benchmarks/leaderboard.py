"""The leaderboard: every method and ``auto`` on every benchmark set, official splits.

Protocol. Multi-label sets: Mulan's official train/test files (emotions, scene, yeast, birds,
flags, genbase, medical) and the Yahoo sets' 2000/3000 split. Label distribution sets have no
official split: a seeded 80/20 split (``random_state=0``). Features are min-max scaled on the
training part (the scaling applied to the test part as is). Every method runs at its defaults
(an unseeded default seeded 0, as ``auto`` seeds its candidates);
``auto`` runs ``app.evaluation.choice.select`` at its defaults (iterative stratification; 10 folds
repeated up to 3 times under 1000 training rows, else 5 folds) on the training part only, then
fits its winner on the whole training part; the test part is used only for the figures below.
Its time is given as wall seconds and CPU seconds (all threads of the process), with the load
average when it started: the machine is shared, so wall seconds are upper bounds. Selectors are
scored by ML-kNN (k=10) on their top 20% of features.

Cost limits (2 shared cores): ``trans-ovk`` only on sets with at most 700 training rows and 300
features; ``ghc-dr`` only on the Mulan sets; the nearest-neighbour ``mi-filter`` estimator only on
the Mulan sets with at most 300 features (it took 198 s on birds, 19 labels x 260 features, and
scales with labels x features; the binned ``mi-filter`` runs everywhere).

    nice .venv/bin/python -m benchmarks.leaderboard                 # everything; resumes
    nice .venv/bin/python -m benchmarks.leaderboard --sets emotions SJAFFE
    nice .venv/bin/python -m benchmarks.leaderboard --tables-only   # rewrite the tables
    nice .venv/bin/python -m benchmarks.leaderboard --auto-only     # re-run auto only (see below)
    nice .venv/bin/python -m benchmarks.leaderboard --paired emotions rf  # is auto's gap test noise?
    nice .venv/bin/python -m benchmarks.leaderboard --paired-all    # that for every set: "its SE"

Raw results (one JSON file per set and task) go to ``benchmarks/results/leaderboard/`` (not
committed) and are reused on the next run; the summary tables go to ``benchmarks/leaderboard.md``.

``--auto-only`` re-runs ``auto`` alone (after a change to the selection) without the raw results:
the single-method figures and the selector table are read back from the committed
``leaderboard.md`` (``from_table``: three decimals, as printed; only the columns the tables show),
and each set's raw file is written with them and the new ``auto`` result (a set whose raw file
already has an ``auto`` of this selection, ``AUTO_VERSION``, is skipped, so it resumes). The label
distribution methods are cheap and printed with too few decimals for the ratio column, so on those
sets every method runs again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from app import scoring
from app.evaluation import choice, cross_validation
from app.methods.blend import BLENDS, Blend
from app.methods.catalog import get_method
from app.methods.mlknn import MLkNN
from app.methods.numerics import FeatureScaling
from app.methods.thresholds import LearnedThresholdMixin
from benchmarks import datasets

ROOT = Path(__file__).resolve().parent
RAW = ROOT / "results" / "leaderboard"
TABLES = ROOT / "leaderboard.md"

CLASSIFIERS = ("br", "ecc", "rf", "gbm", "mlknn", "dmknn", "trans-ovk")
LDL = ("aa-knn", "sa-maxent", "ldlkm")
SELECTORS = ("mi-filter", "mi-filter/binned", "elcfs", "ghc-dr")
ML_SETS = datasets.MULAN_SETS + datasets.YAHOO_SETS
LDL_SETS = datasets.LDL_SETS
SELECTION_SETS = datasets.MULAN_SETS + datasets.YAHOO_SETS
#: the selection ``auto`` runs: 2 = with ensemble selection (a blend when it beats every candidate),
#: 3 = a blend kept only when it leads the best single method by more than the standard error of the
#: folds, 4 = that rule for label distributions only, 5 = a classifier blend's label sets with the
#: never-empty fallback where it raised micro-F1 on the out-of-fold scores, 6 = the candidates
#: raced over the folds and the repeats run while they could move the choice (issue 40)
AUTO_VERSION = 6


def _split(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if name in datasets.YAHOO_SETS:
        tr, te = datasets.load_yahoo(name, "train"), datasets.load_yahoo(name, "test")
        parts = (tr.X, tr.Y, te.X, te.Y)
    elif name in datasets.MULAN_SETS:
        tr, te = datasets.load_mulan(name, "train"), datasets.load_mulan(name, "test")
        parts = (tr.X, tr.Y, te.X, te.Y)
    else:
        ds = datasets.load_ldl(name)
        Xtr, Xte, Ytr, Yte = train_test_split(np.array(ds.X), np.array(ds.Y), test_size=0.2, random_state=0)
        parts = (Xtr, Ytr, Xte, Yte)
    Xtr, Ytr, Xte, Yte = (np.array(p, dtype=np.float64) for p in parts)
    scaling = FeatureScaling.minmax(Xtr, constant="zero")
    return scaling.transform(Xtr), Ytr, scaling.transform(Xte), Yte


def _allowed(method: str, name: str, n: int, d: int) -> bool:
    if method == "trans-ovk":
        return n <= 700 and d <= 300
    if method == "mi-filter":  # the nearest-neighbour estimator: minutes per label on wide sets
        return name in datasets.MULAN_SETS and d <= 300
    if method == "ghc-dr":
        return name in datasets.MULAN_SETS
    return True


def _build(method: str) -> Any:
    """The method at its defaults; a default ``random_state`` of None (``ldlkm``: a fresh seed per
    fit, which the service records) is 0 here, as ``auto`` seeds its candidates, so that the table
    is the same on every run (``ldlkm`` on SJAFFE had moved between 0.132 and 0.137)."""
    if method == "mi-filter/binned":
        return get_method("mi-filter").build({"estimator": "binned"})  # type: ignore[union-attr]
    spec = get_method(method)
    assert spec is not None
    field = spec.params.model_fields.get("random_state")
    return spec.build({"random_state": 0} if field is not None and field.default is None else {})


def _classify(name: str) -> dict[str, Any]:
    Xtr, Ytr, Xte, Yte = _split(name)
    out: dict[str, Any] = {"n": len(Xtr), "d": Xtr.shape[1], "q": Ytr.shape[1], "methods": {}}
    out["true_empty_share"] = float(np.mean((Yte > 0).sum(axis=1) == 0))
    for method in CLASSIFIERS:
        if not _allowed(method, name, *Xtr.shape):
            continue
        started = time.perf_counter()
        model = _build(method).fit(Xtr, Ytr)
        seconds = time.perf_counter() - started
        out["methods"][method] = {**_scored(model, Xte, Yte), "fit_seconds": seconds}
        print(f"  {name} {method}: AP {out['methods'][method]['average_precision']:.4f} ({seconds:.1f} s)", flush=True)
    out["auto"] = _classify_auto(Xtr, Ytr, Xte, Yte, name)
    return out


def _scored(model: Any, Xte: np.ndarray, Yte: np.ndarray) -> dict[str, Any]:
    """Every metric of a classifier's default label sets and scores, its label-set figures, and
    for a method that learns its threshold (``app.methods.thresholds``) the same label-set metrics
    at the plain 0.5 rule (the earlier default: the same fitted scores, thresholded at 0.5)."""
    S, P = model.decision_function(Xte), model.predict(Xte)
    out: dict[str, Any] = {**scoring.multilabel_metrics(Yte, P, S), **_label_sets(Yte, P)}
    if isinstance(model, LearnedThresholdMixin):
        half = model.predict(Xte, threshold=0.5)
        out["learned_threshold"] = model.threshold_
        out["fill_empty"] = model.fill_empty_
        out["at_half"] = {
            "micro_f1": scoring.micro_f1(Yte, half),
            "macro_f1": scoring.macro_f1(Yte, half),
            **_label_sets(Yte, half),
        }
    return out


def _classify_auto(Xtr: np.ndarray, Ytr: np.ndarray, Xte: np.ndarray, Yte: np.ndarray, name: str) -> dict[str, Any]:
    model, auto = _auto(Xtr, Ytr, "multilabel")
    S, P = model.decision_function(Xte), model.predict(Xte)
    result = {**scoring.multilabel_metrics(Yte, P, S), **auto, **_label_sets(Yte, P), "rule": _rule(model)}
    print(f"  {name} auto -> {auto['picked']}: AP {result['average_precision']:.4f} ({auto['seconds']:.1f} s)")
    return result


def _distribution_auto(Xtr: np.ndarray, Dtr: np.ndarray, Xte: np.ndarray, Dte: np.ndarray, name: str) -> dict[str, Any]:
    model, auto = _auto(Xtr, Dtr, "distribution")
    result = {**scoring.ldl_metrics(Dte, model.predict(Xte)), **auto}
    print(f"  {name} auto -> {auto['picked']}: Cheb {result['chebyshev']:.4f} ({auto['seconds']:.1f} s)")
    return result


def _rule(model: Any) -> str:
    """A fitted classifier's label-set rule as the tables show it: its threshold, ``+fill`` when an
    empty set gets the top label; ``-`` for a method with a rule of its own (ML-kNN's posteriors)."""
    if isinstance(model, LearnedThresholdMixin):
        return f"{model.threshold_:g}{'+fill' if model.fill_empty_ else ''}"
    if isinstance(model, Blend):
        return f"{model.threshold:g}{'+fill' if model.fill_empty else ''}"
    return "-"


def _picked(method: str, params: dict[str, Any]) -> str:
    """What auto picked, as the tables show it: a method id, or a blend's members and weights."""
    if method not in BLENDS:
        return method
    total = sum(m["weight"] for m in params["members"])
    return "blend " + " + ".join(f"{m['method']} {m['weight'] / total:.2f}" for m in params["members"])


def _label_sets(Y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """Sanity figures of predicted label sets: share of empty sets, mean set size (and the true one)."""
    return {
        "empty_share": float(np.mean(P.sum(axis=1) == 0)),
        "mean_size": float(P.sum(axis=1).mean()),
        "true_mean_size": float((Y > 0).sum(axis=1).mean()),
    }


def _auto(Xtr: np.ndarray, Ytr: np.ndarray, kind: str) -> tuple[Any, dict[str, Any]]:
    """``auto`` as the service runs it (selection at its defaults, then the winner fitted on all
    the training part): the fitted winner and what to record (picked, CV means, folds, times)."""
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    chosen = choice.select(Xtr, Ytr, kind, random_state=0)
    best = chosen.best
    model = get_method(best.method).build(best.params).fit(Xtr, Ytr)  # type: ignore[union-attr]
    return model, {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "load": load,
        "folds": f"{chosen.cv}x{chosen.repeats}",
        "version": AUTO_VERSION,
        "picked": _picked(best.method, best.params),
        "picked_params": best.params,
        "candidates": [e.method for e in chosen.leaderboard],
        "cv": {e.method: e.mean(chosen.metric) for e in chosen.leaderboard},
        "cv_std": {e.method: e.std(chosen.metric) for e in chosen.leaderboard},
    }


def _distribution(name: str) -> dict[str, Any]:
    Xtr, Dtr, Xte, Dte = _split(name)
    out: dict[str, Any] = {"n": len(Xtr), "d": Xtr.shape[1], "q": Dtr.shape[1], "methods": {}}
    for method in LDL:
        started = time.perf_counter()
        model = _build(method).fit(Xtr, Dtr)
        seconds = time.perf_counter() - started
        out["methods"][method] = {**scoring.ldl_metrics(Dte, model.predict(Xte)), "fit_seconds": seconds}
        print(f"  {name} {method}: Cheb {out['methods'][method]['chebyshev']:.4f} ({seconds:.1f} s)", flush=True)
    mean = np.tile(Dtr.mean(axis=0), (len(Dte), 1))
    out["methods"]["training mean"] = {**scoring.ldl_metrics(Dte, mean), "fit_seconds": 0.0}
    out["auto"] = _distribution_auto(Xtr, Dtr, Xte, Dte, name)
    return out


def _select(name: str) -> dict[str, Any]:
    Xtr, Ytr, Xte, Yte = _split(name)
    d = Xtr.shape[1]
    out: dict[str, Any] = {"n": len(Xtr), "d": d, "q": Ytr.shape[1], "methods": {}}

    def downstream(keep: np.ndarray) -> float:
        knn = MLkNN(k=10).fit(Xtr[:, keep], Ytr)
        return scoring.average_precision(Yte, knn.decision_function(Xte[:, keep]))

    top = max(1, int(round(cross_validation.SELECTOR_FRACTION * d)))
    out["methods"]["all features"] = {"ap20": downstream(np.arange(d)), "fit_seconds": 0.0}
    for method in SELECTORS:
        if not _allowed(method, name, *Xtr.shape):
            continue
        started = time.perf_counter()
        ranking = np.asarray(_build(method).fit(Xtr, Ytr).ranking_)
        seconds = time.perf_counter() - started
        curve = {f: downstream(ranking[: max(1, int(round(f * d)))]) for f in cross_validation.FRACTIONS}
        out["methods"][method] = {"ap20": downstream(ranking[:top]), "curve": curve, "fit_seconds": seconds}
        print(f"  {name} {method}: AP@20% {out['methods'][method]['ap20']:.4f} ({seconds:.1f} s)", flush=True)
    return out


TASKS = {
    "classification": (_classify, ML_SETS),
    "distribution": (_distribution, LDL_SETS),
    "selection": (_select, SELECTION_SETS),
}


def refresh(methods: list[str], sets: list[str] | None) -> None:
    """Re-measure ``methods`` on the cached classification results (after a method's defaults changed)."""
    for name in ML_SETS:
        path = RAW / f"classification-{name}.json"
        if (sets and name not in sets) or not path.exists():
            continue
        result = json.loads(path.read_text())
        Xtr, Ytr, Xte, Yte = _split(name)
        with threadpool_limits(limits=1, user_api="blas"):
            for method in methods:
                if not _allowed(method, name, *Xtr.shape):
                    continue
                started = time.perf_counter()
                model = _build(method).fit(Xtr, Ytr)
                seconds = time.perf_counter() - started
                result["methods"][method] = {**_scored(model, Xte, Yte), "fit_seconds": seconds}
                print(f"  {name} {method}: AP {result['methods'][method]['average_precision']:.4f}", flush=True)
        path.write_text(json.dumps(result, indent=1, default=float))


# ------------------------------------------------------------------- auto only, from the table
def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _bold(cols: dict[str, str], methods: tuple[str, ...]) -> list[str]:
    return [m for m in methods if cols.get(m, "").startswith("**")]


def _number(cell: str) -> float | None:
    cell = cell.strip("*")
    return None if cell == "-" else float(cell)


def _tables(text: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Each table of a leaderboard.md by its heading: (header cells, rows of cells)."""
    found: dict[str, tuple[list[str], list[list[str]]]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("### "):
            heading = line[4:]
        elif line.startswith("|") and heading:
            if heading not in found:
                found[heading] = (_cells(line), [])
            elif not line.startswith("|---"):
                found[heading][1].append(_cells(line))
    return found


def from_table(text: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The single-method results of a committed leaderboard.md, per task and set, in the raw
    results' layout (only the figures the tables print; ``auto`` left out)."""
    tables = _tables(text)
    out: dict[str, dict[str, dict[str, Any]]] = {"classification": {}, "distribution": {}, "selection": {}}

    def shape(cell: str) -> dict[str, int]:
        n, d, q = (int(v) for v in cell.split("/"))
        return {"n": n, "d": d, "q": q, "from_table": True}

    for heading, (head, rows) in tables.items():
        if heading.startswith("Multi-label classification: average precision"):
            for row in rows:
                cols = dict(zip(head, row))
                out["classification"][row[0]] = shape(cols["n / d / q"]) | {
                    "bold": {"average_precision": _bold(cols, CLASSIFIERS)},
                    "methods": {
                        m: {"average_precision": v}
                        for m in CLASSIFIERS
                        if (v := _number(cols.get(m, "-"))) is not None  # a method newer than the table: not run
                    },
                }
        elif heading.startswith("Label distributions"):
            for row in rows:
                cols = dict(zip(head, row))
                out["distribution"][row[0]] = shape(cols["n / d / c"]) | {
                    "methods": {
                        m: {"chebyshev": v} for m in (*LDL, "training mean") if (v := _number(cols[m])) is not None
                    }
                }
        elif heading.startswith("Feature selection"):
            for row in rows:
                cols = dict(zip(head, row))
                out["selection"][row[0]] = {
                    "from_table": True,
                    "bold": {"ap20": _bold(cols, ("all features", *SELECTORS))},
                    "methods": {
                        m: {"ap20": v} for m in ("all features", *SELECTORS) if (v := _number(cols[m])) is not None
                    },
                }
    for heading, (head, rows) in tables.items():  # the macro-F1 figures join the AP ones
        if heading.startswith("Multi-label classification: macro-F1"):
            for row in rows:
                cols = dict(zip(head, row))
                if row[0] in out["classification"]:
                    out["classification"][row[0]]["bold"]["macro_f1"] = _bold(cols, CLASSIFIERS)
                for m, result in out["classification"].get(row[0], {}).get("methods", {}).items():
                    if (v := _number(cols.get(m, "-"))) is not None:
                        result["macro_f1"] = v
    return out


def run_auto_only(sets: list[str] | None, tasks: list[str]) -> None:
    """Re-run ``auto`` on every set, the single-method figures read from the committed tables."""
    RAW.mkdir(parents=True, exist_ok=True)
    committed = from_table(TABLES.read_text())
    for name, result in committed["selection"].items():
        path = RAW / f"selection-{name}.json"
        if not path.exists():
            path.write_text(json.dumps(result, indent=1))
    for task in [t for t in tasks if t in ("classification", "distribution")]:
        for name in [n for n in sets if n in TASKS[task][1]] if sets else TASKS[task][1]:
            path = RAW / f"{task}-{name}.json"
            previous = json.loads(path.read_text()) if path.exists() else None
            if previous is not None and previous.get("auto", {}).get("version") == AUTO_VERSION:
                continue
            if name not in committed[task]:
                print(f"{task} {name}: not in the committed tables, skipped", flush=True)
                continue
            print(f"{task} {name} (auto only)", flush=True)
            with threadpool_limits(limits=1, user_api="blas"):
                if task == "distribution":  # cheap: every method again, at full precision
                    result = _distribution(name)
                else:
                    result = committed[task][name]
                    result["auto"] = _classify_auto(*_split(name), name)
            path.write_text(json.dumps(result, indent=1, default=float))


def run(sets: list[str] | None, tasks: list[str]) -> None:
    RAW.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        fn, names = TASKS[task]
        for name in [n for n in sets if n in names] if sets else names:  # in the order asked for
            path = RAW / f"{task}-{name}.json"
            if path.exists():
                continue
            print(f"{task} {name}", flush=True)
            with threadpool_limits(limits=1, user_api="blas"):
                result = fn(name)
            path.write_text(json.dumps(result, indent=1, default=float))


# ---------------------------------------------------------------------------------- tables
def _load(task: str) -> dict[str, dict[str, Any]]:
    names = TASKS[task][1]
    found = {
        n: json.loads((RAW / f"{task}-{n}.json").read_text()) for n in names if (RAW / f"{task}-{n}.json").exists()
    }
    return found


def _fmt(value: float | None, best: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"**{value:.3f}**" if best else f"{value:.3f}"


def _seconds(auto: dict[str, Any]) -> str:
    """Wall / CPU seconds of an auto run, with the load average it started under."""
    return f"{auto['seconds']:.0f} / {auto['cpu_seconds']:.0f} (load {auto['load']:.1f})"


def _noise(auto: dict[str, Any]) -> str:
    """The standard error of ``auto - best`` over the test rows (``--paired-all``); ``0`` when auto
    picked the best method itself, ``?`` when not measured."""
    if "paired" not in auto:
        return "?"
    return "0" if auto["paired"] is None else f"{auto['paired']['se']:.3f}"


def _classification_table(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "### Multi-label classification: average precision on the test split (higher is better)",
        "",
        "| set | n / d / q | "
        + " | ".join(CLASSIFIERS)
        + " | auto (picked) | auto - best | its SE | folds | auto s wall / CPU |",
        "|---|---|" + "---|" * len(CLASSIFIERS) + "---|---|---|---|---|",
    ]
    for name, r in results.items():
        ap = {m: v["average_precision"] for m, v in r["methods"].items()}
        top = max(ap.values())
        best_candidate = ap[_best_candidate(r)]
        bold = r.get("bold", {}).get("average_precision")  # as printed, for figures read back from the table
        cells = [_fmt(ap.get(m), m in bold if bold is not None else ap.get(m) == top) for m in CLASSIFIERS]
        auto = r["auto"]
        lines.append(
            f"| {name} | {r['n']} / {r['d']} / {r['q']} | "
            + " | ".join(cells)
            + f" | {auto['average_precision']:.3f} ({auto['picked']}) | {auto['average_precision'] - best_candidate:+.3f}"
            f" | {_noise(auto)} | {auto['folds']} | {_seconds(auto)} |"
        )
    lines += [
        "",
        "### Multi-label classification: macro-F1 on the test split (each method's own threshold rule)",
        "",
        "| set | " + " | ".join(CLASSIFIERS) + " | auto |",
        "|---|" + "---|" * len(CLASSIFIERS) + "---|",
    ]
    for name, r in results.items():
        f1 = {m: v["macro_f1"] for m, v in r["methods"].items()}
        top = max(f1.values())
        bold = r.get("bold", {}).get("macro_f1")
        cells = [_fmt(f1.get(m), m in bold if bold is not None else f1.get(m) == top) for m in CLASSIFIERS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['auto']['macro_f1']:.3f} |")
    lines += _label_set_tables(results)
    sized = {name: r["auto"] for name, r in results.items() if "empty_share" in r["auto"]}
    if sized:
        lines += [
            "",
            "### `auto`'s label sets on the test split (the rule learned on out-of-fold scores; `+fill`: an empty",
            "set gets its top label)",
            "",
            "| set | picked | rule | macro-F1 | micro-F1 | empty sets | mean set size (true) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, auto in sized.items():
            rule = auto.get("rule", auto.get("picked_params", {}).get("threshold", "-"))
            lines.append(
                f"| {name} | {auto['picked']} | {rule} | {auto['macro_f1']:.3f}"
                f" | {auto['micro_f1']:.3f} | {100 * auto['empty_share']:.1f}% | {auto['mean_size']:.2f}"
                f" ({auto['true_mean_size']:.2f}) |"
            )
    return lines


def _label_set_tables(results: dict[str, dict[str, Any]]) -> list[str]:
    """The single classifiers' label sets: the learned threshold against the 0.5 rule (empty-set
    share, micro- and macro-F1, on the same fitted scores), and dmknn's against mlknn's micro-F1."""
    learned = [m for m in CLASSIFIERS if any("at_half" in r["methods"].get(m, {}) for r in results.values())]
    lines: list[str] = []
    if learned:
        lines += [
            "",
            "### Single classifiers' label sets: 0.5 rule -> learned threshold (issue 27), test split",
            "",
            "Empty sets (share of test rows; `true empty`: the truth's share), micro-F1 and macro-F1, each as",
            "`0.5 -> learned`; the threshold learned on inner out-of-fold scores (`+fill`: an empty set",
            "gets its top label) in the last cells.",
            "",
            "| set | true empty | "
            + " | ".join(f"{m} empty | {m} micro-F1 | {m} macro-F1" for m in learned)
            + " | thresholds |",
            "|---|---|" + "---|---|---|" * len(learned) + "---|",
        ]
        for name, r in results.items():
            if not any("at_half" in r["methods"].get(m, {}) for m in learned):
                continue
            cells, rules = [], []
            for m in learned:
                v = r["methods"].get(m)
                if v is None or "at_half" not in v:
                    cells += ["-", "-", "-"]
                    continue
                h = v["at_half"]
                cells += [
                    f"{100 * h['empty_share']:.0f}% -> {100 * v['empty_share']:.0f}%",
                    f"{h['micro_f1']:.3f} -> {v['micro_f1']:.3f}",
                    f"{h['macro_f1']:.3f} -> {v['macro_f1']:.3f}",
                ]
                rules.append(f"{m} {v['learned_threshold']:g}{'+fill' if v['fill_empty'] else ''}")
            true_empty = r.get("true_empty_share")
            lines.append(
                f"| {name} | {'-' if true_empty is None else f'{100 * true_empty:.0f}%'} | "
                + " | ".join(cells)
                + f" | {', '.join(rules)} |"
            )
    pair = [r for r in results.values() if {"mlknn", "dmknn"} <= set(r["methods"])]
    if pair and all("micro_f1" in r["methods"]["dmknn"] for r in pair):
        lines += [
            "",
            "### `dmknn`'s default label sets against `mlknn`'s: micro-F1 on the test split",
            "",
            "| set | mlknn | dmknn | dmknn - mlknn |",
            "|---|---|---|---|",
        ]
        for name, r in results.items():
            if {"mlknn", "dmknn"} <= set(r["methods"]) and "micro_f1" in r["methods"]["dmknn"]:
                ml, dm = r["methods"]["mlknn"]["micro_f1"], r["methods"]["dmknn"]["micro_f1"]
                lines.append(f"| {name} | {ml:.3f} | {dm:.3f} | {dm - ml:+.3f} |")
    return lines


def _distribution_table(results: dict[str, dict[str, Any]]) -> list[str]:
    cols = (*LDL, "training mean")
    lines = [
        "### Label distributions: Chebyshev distance on a seeded 80/20 split (lower is better)",
        "",
        "| set | n / d / c | " + " | ".join(cols) + " | auto (picked) | auto / best | folds | auto s wall / CPU |",
        "|---|---|" + "---|" * len(cols) + "---|---|---|---|",
    ]
    for name, r in results.items():
        ch = {m: v["chebyshev"] for m, v in r["methods"].items()}
        top = min(ch[m] for m in LDL)
        cells = [_fmt(ch.get(m), ch.get(m) == top) for m in cols]
        auto = r["auto"]
        lines.append(
            f"| {name} | {r['n']} / {r['d']} / {r['q']} | "
            + " | ".join(cells)
            + f" | {auto['chebyshev']:.4f} ({auto['picked']}) | {auto['chebyshev'] / top:.3f}"
            f" | {auto['folds']} | {_seconds(auto)} |"
        )
    return lines


def _selection_table(results: dict[str, dict[str, Any]]) -> list[str]:
    cols = ("all features", *SELECTORS)
    lines = [
        "### Feature selection: ML-kNN (k=10) average precision on the top 20% of features, test split",
        "",
        "| set | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for name, r in results.items():
        ap = {m: v["ap20"] for m, v in r["methods"].items()}
        top = max(v for m, v in ap.items() if m != "all features")
        bold = r.get("bold", {}).get("ap20")
        cells = [
            _fmt(ap.get(m), m in bold if bold is not None else m != "all features" and ap.get(m) == top) for m in cols
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_tables() -> str:
    parts = [
        "# Leaderboard",
        "",
        "Written by `benchmarks/leaderboard.py` (protocol in its docstring): official splits, features",
        "min-max scaled on the training part, every method at its defaults, `auto` chosen by",
        "cross-validation on the training part only (`folds`: folds x repeats), a `blend` of candidates",
        "(members and weight shares) when its cross-fitted CV beats every one. Bold = best of the row;",
        "`-` = not run (cost). `auto` seconds include the final fit, as wall / CPU seconds (CPU counts every",
        "thread) on a 2-core machine shared with other jobs, with the load average when `auto` started.",
        "`its SE`: the standard error of `auto - best` over the test rows (paired, row by row; `--paired-all`),",
        "so a gap smaller than about twice it is within what another test sample of the same size could move.",
        "",
    ]
    for task, table in (
        ("classification", _classification_table),
        ("distribution", _distribution_table),
        ("selection", _selection_table),
    ):
        results = _load(task)
        if results:
            parts += table(results) + [""]
        missing = [n for n in TASKS[task][1] if n not in results]
        if missing:
            parts += [f"Not measured yet ({task}): {', '.join(missing)}.", ""]
    text = "\n".join(parts)
    TABLES.write_text(text)
    return text


def paired_gap(name: str, method: str, boots: int = 2000) -> dict[str, Any]:
    """``auto``'s average precision minus ``method``'s on the test rows of ``name``, with its noise:
    the standard error of the per-row differences and a bootstrap 95% interval of their mean
    (rows with no relevant label have no average precision and are left out, as ``metrics`` does).
    ``auto``'s model is refitted from the picked parameters of the set's raw result."""
    raw = json.loads((RAW / f"classification-{name}.json").read_text())
    picked = raw["auto"]["picked_params"]
    Xtr, Ytr, Xte, Yte = _split(name)
    spec = get_method("blend" if "members" in picked else raw["auto"]["picked"])
    assert spec is not None
    auto = spec.build(picked).fit(Xtr, Ytr)
    single = _build(method).fit(Xtr, Ytr)
    rows = np.flatnonzero((Yte > 0).any(axis=1))

    def per_row(model: Any) -> np.ndarray:
        S = model.decision_function(Xte[rows])
        return np.array([scoring.average_precision(Yte[rows][i : i + 1], S[i : i + 1]) for i in range(rows.size)])

    gaps = per_row(auto) - per_row(single)
    rng = np.random.default_rng(0)
    means = [gaps[rng.integers(0, gaps.size, gaps.size)].mean() for _ in range(boots)]
    low, high = np.percentile(means, [2.5, 97.5])
    se = float(gaps.std(ddof=1) / math.sqrt(gaps.size))
    return {
        "method": method,
        "gap": float(gaps.mean()),
        "se": se,
        "low": float(low),
        "high": float(high),
        "rows": int(rows.size),
    }


def _paired_text(name: str, p: dict[str, Any]) -> str:
    return (
        f"{name}: auto - {p['method']} = {p['gap']:+.4f} over {p['rows']} test rows, standard error "
        f"{p['se']:.4f}, bootstrap 95% interval [{p['low']:+.4f}, {p['high']:+.4f}]"
    )


def _best_candidate(r: dict[str, Any]) -> str:
    """The single method of ``auto``'s candidates with the best test average precision (the table's ``best``)."""
    ap = {m: v["average_precision"] for m, v in r["methods"].items()}
    candidates = [m for m in r["auto"]["candidates"] if m in ap] or list(ap)
    return max(candidates, key=lambda m: ap[m])


def run_paired(sets: list[str] | None) -> None:
    """``paired_gap`` of ``auto`` against the best single candidate on every classification set
    with a raw result (or ``sets``), kept in the raw file for the table's noise column."""
    for name, r in _load("classification").items():
        if sets and name not in sets:
            continue
        best = _best_candidate(r)
        if r["auto"]["picked"] == best:
            r["auto"]["paired"] = None  # the same model: no gap
        else:
            r["auto"]["paired"] = paired_gap(name, best)
            print(_paired_text(name, r["auto"]["paired"]), flush=True)
        (RAW / f"classification-{name}.json").write_text(json.dumps(r, indent=1, default=float))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="*", help="only these sets")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--refresh", nargs="*", default=[], help="re-measure these classifiers on cached sets")
    parser.add_argument(
        "--auto-only", action="store_true", help="re-run auto alone; single methods from the committed tables"
    )
    parser.add_argument(
        "--paired-all", action="store_true", help="auto's gap to the best single method with its noise, every set"
    )
    parser.add_argument(
        "--paired",
        nargs=2,
        metavar=("SET", "METHOD"),
        help="auto's AP gap to METHOD on SET's test rows, with its noise",
    )
    args = parser.parse_args()
    if datasets.data_dir() is None:
        raise SystemExit("benchmark data not found: set LABELSERVE_DATA_DIR")
    if args.paired:
        print(_paired_text(args.paired[0], paired_gap(*args.paired)))
        return
    if args.paired_all:
        run_paired(args.sets)
    if args.auto_only:
        run_auto_only(args.sets, args.tasks)
    elif args.refresh:
        refresh(args.refresh, args.sets)
    elif not args.tables_only and not args.paired_all:
        run(args.sets, args.tasks)
    print(write_tables())


if __name__ == "__main__":
    main()
