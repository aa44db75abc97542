"""``auto``'s cost predictions against what its cross-validation measured, and ``auto`` on bibtex.

Issue 23, item 3. Two studies:

* ``--yahoo`` (default): on each Yahoo set's training split (2,000 rows), ``choice.select``
  with every default classifier named (so none is left out) and ``metric="micro_f1"`` (a
  label-set metric: no ranking twin is set aside and no blend is built, so every candidate is
  cross-validated and timed). Per candidate: the pilot's predicted seconds of its 5-fold
  cross-validation, the measured seconds, their ratio.
* ``--bibtex``: ``auto`` at its defaults on bibtex's training split (wall seconds of the whole
  selection plus the winner's fit, its test average precision), then ``br``, ``rf`` and
  ``mlknn`` alone at their defaults (fit seconds, test average precision).

* ``--pilot-growth``: the growth exponents the kNN methods' pilots extrapolate with
  (``pricing.GROWTH``, ``GRAPH_REUSE_GROWTH``), measured where they are used: on each Yahoo
  set's training split and bibtex's, 3 pilots of ``dmknn`` then ``mlknn`` (the second reusing
  the first's neighbour graph, as in a selection) and one 5-fold cross-validation of the two;
  per method ``log(median fold s / median pilot s) / log(fold rows / pilot rows)``.

Wall seconds on a shared machine: the load average is printed with every row, and the
prediction is meant to hold under the load it was measured at (the pilot runs minutes before
the folds). ``--n-jobs`` is what a job on this machine passes (its CPUs).

Run: ``.venv/bin/python -m benchmarks.auto_cost [--yahoo Arts ...] [--bibtex] [--pilot-growth] [--n-jobs 2]``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import warnings
from typing import Any

from app import scoring
from app.evaluation import choice, cross_validation, pool, pricing
from app.methods.catalog import get_method
from benchmarks.datasets import YAHOO_SETS, data_dir, load_yahoo
from benchmarks.scaling_growth import bibtex


def yahoo_table(names: list[str], n_jobs: int | None) -> None:
    print("| set | method | predicted s | measured s | measured / predicted | load |")
    print("|---|---|---|---|---|---|")
    for name in names:
        ds = load_yahoo(name, "train")
        load = os.getloadavg()[0]
        result = choice.select(
            ds.X,
            ds.Y,
            "multilabel",
            candidates=pool.candidate_pool("multilabel"),
            metric="micro_f1",
            cv=5,
            random_state=0,
            n_jobs=n_jobs,
        )
        for row in sorted(result.record()["leaderboard"], key=lambda r: r["method"]):
            predicted, measured = row["predicted_seconds"], row["measured_seconds"]
            if predicted is None or measured is None:
                continue
            print(
                f"| {name} | {row['method']} | {predicted:.1f} | {measured:.1f} | {measured / predicted:.2f} | "
                f"{load:.1f} |",
                flush=True,
            )


def pilot_growth(names: list[str]) -> None:
    entries: list[tuple[str, dict[str, Any]]] = [("dmknn", {}), ("mlknn", {})]
    exponents: dict[str, list[float]] = {method: [] for method, _ in entries}
    print("| set | method | pilot ms (rows) | fold ms (rows) | exponent | load |")
    print("|---|---|---|---|---|---|")
    for name in names:
        X, Y = bibtex("train") if name == "bibtex" else _yahoo(name)
        load = os.getloadavg()[0]
        pilots = [pricing.pilot_costs(X, Y, entries, cv=5) for _ in range(3)]
        n = X.shape[0]
        fold_rows = n - -(-n // 5)
        for entry in cross_validation.cross_validate(X, Y, "multilabel", entries, cv=5):
            pilot = statistics.median(p[entry.method].pilot_seconds for p in pilots)
            rows = pilots[0][entry.method].pilot_rows
            fold = statistics.median(entry.fold_seconds)
            growth = math.log(fold / pilot) / math.log(fold_rows / rows)
            exponents[entry.method].append(growth)
            print(
                f"| {name} | {entry.method} | {1000 * pilot:.1f} ({rows}) | {1000 * fold:.0f} ({fold_rows}) | "
                f"{growth:.2f} | {load:.1f} |",
                flush=True,
            )
    for method, values in exponents.items():
        print(f"| mean | {method} | | | {statistics.mean(values):.2f} | |")


def _yahoo(name: str) -> tuple[Any, Any]:
    ds = load_yahoo(name, "train")
    return ds.X, ds.Y


def bibtex_study(n_jobs: int | None) -> None:
    X, Y = bibtex("train")
    Xt, Yt = bibtex("test")
    print("| model | seconds | test AP | load |")
    print("|---|---|---|---|")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    result = choice.select(X, Y, "multilabel", random_state=0, n_jobs=n_jobs)
    spec = get_method(result.best.method)
    assert spec is not None
    model = spec.build(result.best.params).fit(X, Y)
    seconds = time.perf_counter() - started
    ap = scoring.average_precision(Yt, model.decision_function(Xt))
    print(f"| auto -> {result.best.method} | {seconds:.0f} | {ap:.4f} | {load:.1f} |", flush=True)
    record = result.record()
    for row in record["leaderboard"]:
        print(
            f"|   {row['method']} | predicted {row['predicted_seconds']} measured {row['measured_seconds']} | "
            f"cv {row['mean']} | {row.get('same_ranking_as', '')} |",
            flush=True,
        )
    for row in record["left_out"]:
        print(f"|   left out {row['method']} | predicted {row['predicted_seconds']} | | |", flush=True)
    print(f"|   pilots | {record['pilot_seconds']} | | |", flush=True)
    for method in ("br", "rf", "mlknn"):
        spec = get_method(method)
        assert spec is not None
        params = {"n_jobs": n_jobs} if n_jobs and "n_jobs" in spec.params.model_fields else {}
        load = os.getloadavg()[0]
        started = time.perf_counter()
        model = spec.build(params).fit(X, Y)
        seconds = time.perf_counter() - started
        ap = scoring.average_precision(Yt, model.decision_function(Xt))
        print(f"| {method} alone | {seconds:.0f} | {ap:.4f} | {load:.1f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yahoo", nargs="*", help="Yahoo sets (default: all 7)")
    parser.add_argument("--bibtex", action="store_true")
    parser.add_argument("--pilot-growth", action="store_true", help="the kNN methods' in-place growth exponents")
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)
    if data_dir() is None:
        print("benchmark data not found (../shared/data): skipped")
        return 0
    warnings.simplefilter("ignore")
    if args.pilot_growth:
        pilot_growth([*(args.yahoo or YAHOO_SETS), "bibtex"])
        return 0
    if args.yahoo is not None or not args.bibtex:
        yahoo_table(args.yahoo or list(YAHOO_SETS), args.n_jobs)
    if args.bibtex:
        bibtex_study(args.n_jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
