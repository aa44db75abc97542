"""Growth of the per-label learners and the forest, and the fold growth ``auto``'s GROWTH declares.

Issue 23, items 2-4, next to ``benchmarks/scaling.py`` (the neighbour methods' growth table,
issue 23 item 1; the two are to be folded into one table). Each (method, n) point runs in a fresh child process (``fork``), so that its
peak resident memory (``ru_maxrss``) is its own: the child loads nothing but the rows it fits.
Rows are the first n of tmc2007-500's training split (``../shared/data/multilabel/tmc2007``;
n = 2,000 .. 21,519); ``--q-growth`` fits bibtex on its first q labels instead, ``--generated`` a generated sparse set of
13,000 rows x 500 features (3% non-zero) x 1,000 labels (1-5% positives each). Per point:

* ``fit_s`` wall seconds of ``fit`` and ``cpu_s`` its process CPU seconds (all threads): on a
  machine shared with other jobs the CPU seconds are what the method costs, the wall seconds
  what it took; the load average at the start is printed with each row;
* ``peak_mb`` the child's peak RSS, ``model_mb`` the pickled estimator's size;
* ``row_ms`` the median of 50 one-row predictions through the private fast path the service
  calls (``_decision_function``).

Growth exponents are least-squares slopes of log(cpu seconds) on log(n) (or log(q)) over the
points from ``--fit-from`` rows on; they are the exponents ``app.evaluation.pricing.GROWTH`` declares
(its docstring says which run they come from). The kNN rows (``mlknn``, ``dmknn``) belong to the
neighbour-search work and are run the same way with ``--methods mlknn dmknn``.

Run: ``.venv/bin/python -m benchmarks.scaling_growth [--methods br ecc rf] [--sizes 2000 5000 10000 21519]
[--n-jobs 2]``. Skips cleanly without the data folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import resource
import statistics
import sys
import time
import warnings
from typing import Any

import numpy as np

from app.methods.catalog import get_method
from benchmarks.datasets import _parse_file, data_dir, require_data_dir

DEFAULT_SIZES = (2000, 5000, 10000, 21519)
#: runs per point of ``fold_growth`` (the fastest counts, as for a pilot)
FOLD_RUNS = 3
#: ``--folds`` training rows, each leaving its quarter to score: tmc2007, bibtex (4,880 rows, its
#: folds of ``auto`` train on 3,904), a Yahoo set (2,000 rows, folds of 1,600)
FOLD_SIZES = {"tmc2007": [500, 1000, 2000, 4000], "bibtex": [500, 1000, 2000, 3900]}
YAHOO_FOLD_SIZES = [500, 800, 1100, 1600]


def tmc2007(part: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """tmc2007-500's official split (500 binary features, 22 labels)."""
    folder = require_data_dir() / "multilabel" / "tmc2007"
    ds = _parse_file(folder / f"tmc2007-500-{part}.arff", folder / "tmc2007-500.xml")
    return ds.X, ds.Y


def bibtex(part: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """bibtex's official split (1,836 binary features, 159 labels)."""
    folder = require_data_dir() / "multilabel" / "bibtex"
    ds = _parse_file(folder / f"bibtex-{part}.arff", folder / "bibtex.xml")
    return ds.X, ds.Y


def generated(n: int = 13_000, d: int = 500, q: int = 1_000, density: float = 0.03) -> tuple[np.ndarray, np.ndarray]:
    """A sparse set of the issue's size: ``density`` of the features non-zero (positive values),
    each label a noisy threshold of a random sparse linear score, 1-5% positives per label."""
    rng = np.random.default_rng(0)
    X = rng.random((n, d)) * (rng.random((n, d)) < density)
    W = rng.standard_normal((d, q)) * (rng.random((d, q)) < 0.05)
    Z = X @ W + 0.1 * rng.standard_normal((n, q))
    positives = (rng.uniform(0.01, 0.05, q) * n).astype(int)
    cut = np.sort(Z, axis=0)[n - positives - 1, np.arange(q)]  # the value below each label's positives
    return X, (Z > cut).astype(np.float64)


def _point(method: str, params: dict[str, Any], X: np.ndarray, Y: np.ndarray, out: Any) -> None:
    """One fit in this (child) process; its measurements sent through ``out``."""
    spec = get_method(method)
    assert spec is not None
    estimator = spec.build(params)
    load = os.getloadavg()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall, cpu = time.perf_counter(), time.process_time()
        estimator.fit(X, Y)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    row = np.ascontiguousarray(X[:1])
    latencies = []
    for _ in range(50):
        t0 = time.perf_counter()
        estimator._decision_function(row)
        latencies.append(time.perf_counter() - t0)
    out.send(
        {
            "fit_s": wall,
            "cpu_s": cpu,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "model_mb": len(pickle.dumps(estimator, protocol=5)) / 2**20,
            "row_ms": 1000 * statistics.median(latencies),
            "load": load,
        }
    )


def measure(method: str, params: dict[str, Any], X: np.ndarray, Y: np.ndarray) -> dict[str, float]:
    """``_point`` in a forked child (its own peak memory)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_point, args=(method, params, X, Y, send))
    child.start()
    result = receive.recv()
    child.join()
    return dict(result)


def fold_growth(
    methods: list[str], sizes: list[int], n_jobs: int | None, data: str = "tmc2007", after: str | None = None
) -> None:
    """What ``app.evaluation.pricing.GROWTH`` declares: the growth of one cross-validation fold's seconds
    (fit on n rows, score n / 4 held-out rows, as a 5-fold split has them) on the first rows of
    ``data`` (tmc2007, bibtex or a Yahoo set's training split), timed by
    ``cross_validation.fit_and_score`` as the pilots and the folds of ``auto`` are: BLAS on one thread,
    the fastest of ``FOLD_RUNS`` runs (a pilot's rule: the first run of a process pays one-off
    costs, which had made ML-kNN's 500-row point slower than its 1,000-row one). ``after``: each
    timed fold runs after that method's (untimed) fold on the same rows in one graph cache, as
    the second kNN method of a selection does (``pricing.GRAPH_REUSE_GROWTH``)."""
    from threadpoolctl import threadpool_limits

    from app.evaluation import cross_validation
    from app.methods.graph_cache import sharing_graphs

    X, Y = _rows(data)
    print(f"{data}: {X.shape[0]} rows")
    print("| method | fold train rows | wall s | cpu s | load |")
    print("|---|---|---|---|---|")
    for method in methods:
        spec = get_method(method)
        assert spec is not None
        params = {"n_jobs": n_jobs} if n_jobs and "n_jobs" in spec.params.model_fields else {}
        walls = []
        for size in sizes:
            tr, te = np.arange(size), np.arange(size, size + size // 4)
            load = os.getloadavg()[0]
            runs = []
            for _ in range(FOLD_RUNS):
                with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"), sharing_graphs():
                    warnings.simplefilter("ignore")
                    if after is not None:
                        first = get_method(after)
                        assert first is not None
                        first_entry = cross_validation.empty_entry(first, after, {}, Y, 1)
                        cross_validation.fit_and_score(first, first_entry, X, Y, tr, te, lambda stage, fraction: None)
                    entry = cross_validation.empty_entry(spec, method, params, Y, 1)
                    wall, cpu = time.perf_counter(), time.process_time()
                    cross_validation.fit_and_score(spec, entry, X, Y, tr, te, lambda stage, fraction: None)
                    runs.append((time.perf_counter() - wall, time.process_time() - cpu))
            wall, cpu = min(runs)
            walls.append(wall)
            print(f"| {method} | {size} | {wall:.3f} | {cpu:.3f} | {load:.1f} |", flush=True)
        print(f"| {method} | exponent (wall s) | {exponent(sizes, walls):.2f} | | |", flush=True)


def _rows(data: str) -> tuple[np.ndarray, np.ndarray]:
    """The training rows ``fold_growth`` takes prefixes of."""
    if data == "tmc2007":
        return tmc2007()
    if data == "bibtex":
        return bibtex()
    from benchmarks.datasets import load_yahoo

    ds = load_yahoo(data, "train")
    return ds.X, ds.Y


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) on log(size)."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["br", "ecc", "rf"])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DEFAULT_SIZES))
    parser.add_argument("--q-growth", nargs="*", type=int, help="bibtex label counts instead of tmc2007 rows")
    parser.add_argument("--folds", action="store_true", help="fold-time growth (GROWTH), 500-4,000 rows")
    parser.add_argument("--data", default="tmc2007", help="--folds: tmc2007, bibtex or a Yahoo set (Arts, ...)")
    parser.add_argument("--after", help="--folds: time each fold after this method's on the same rows (graph shared)")
    parser.add_argument("--generated", action="store_true", help="one point: the generated 13,000 x 500 x 1,000 set")
    parser.add_argument("--fit-from", type=int, default=5000, help="smallest size the exponent is fitted from")
    parser.add_argument("--n-jobs", type=int, default=None, help="n_jobs of the methods that take it")
    args = parser.parse_args(argv)
    if data_dir() is None:
        print("benchmark data not found (../shared/data): skipped")
        return 0
    if args.folds:
        fold_growth(args.methods, FOLD_SIZES.get(args.data, YAHOO_FOLD_SIZES), args.n_jobs, args.data, args.after)
        return 0
    if args.generated:
        X, Y = generated()
        sizes = [X.shape[0]]
        axis = "n"
    elif args.q_growth is not None:
        X, Y = bibtex()
        sizes = args.q_growth or [20, 40, 80, 159]
        axis = "q"
    else:
        X, Y = tmc2007()
        sizes = [min(s, X.shape[0]) for s in args.sizes]
        axis = "n"
    print(f"| method | {axis} | fit s | cpu s | peak MB | model MB | one-row ms | load |")
    print("|---|---|---|---|---|---|---|---|")
    for method in args.methods:
        spec = get_method(method)
        if spec is None:
            print(f"unknown method {method}", file=sys.stderr)
            return 2
        params = {"n_jobs": args.n_jobs} if args.n_jobs and "n_jobs" in spec.params.model_fields else {}
        used, cpus = [], []
        for size in sizes:
            Xs, Ys = (X, Y[:, :size]) if axis == "q" else (X[:size], Y[:size])
            r = measure(method, params, Xs, Ys)
            print(
                f"| {method} | {size} | {r['fit_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_mb']:.0f} | "
                f"{r['model_mb']:.1f} | {r['row_ms']:.2f} | {r['load']:.1f} |",
                flush=True,
            )
            if axis == "q" or size >= args.fit_from:
                used.append(size)
                cpus.append(r["cpu_s"])
        if len(used) >= 2:
            print(f"| {method} | exponent in {axis} (cpu s, from {used[0]}) | {exponent(used, cpus):.2f} | | | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
