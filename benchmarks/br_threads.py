"""``br``'s per-label fits with ``n_jobs`` 1 and 2 (issue 23: at least 1.8x with ``n_jobs=2`` on
bibtex; two forked worker processes since the threads' 1.03-1.22x), next to a reference of two
threads that have no GIL to share.

bibtex's official training split (4,880 x 1,836, 159 labels) as CSR, the form the service's store
keeps it in and hands to ``br`` (a dense array costs each fit a CSR conversion, about 1 s of
serial work per fit here), ``br`` at its defaults; one process,
``n_jobs`` 1 then 2, alternating for ``--rounds`` rounds, so that both see the same machine. The
reference, measured in the same round: eight blocks of 40 600 x 600 GEMMs (one BLAS thread each)
on one thread, then on two: what a second thread can gain on the machine at that moment (about
2x on a quiet 2-core machine, less when other processes share it). Per round: wall and CPU
seconds (all threads, and the worker processes) of each fit, test average precision, the two speed-ups, the load average.

Run: ``.venv/bin/python -m benchmarks.br_threads [--rounds 3]``. Skips cleanly without the data folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from app import scoring
from app.methods.catalog import get_method
from benchmarks.datasets import data_dir
from benchmarks.scaling_growth import bibtex


def _gemms(blocks: int) -> None:
    rng = np.random.default_rng(0)
    A = rng.random((600, 600))
    for _ in range(blocks * 40):
        A @ A


def reference(threads: int) -> float:
    """Wall seconds of eight blocks of GEMMs on ``threads`` threads (one BLAS thread each)."""
    with threadpool_limits(limits=1, user_api="blas"):
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(_gemms, [8 // threads] * threads))
        return time.perf_counter() - started


def _cpu_seconds() -> float:
    """This process's CPU seconds and those of its ended children (``n_jobs`` > 1 forks workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def fit(n_jobs: int, X: np.ndarray, Y: np.ndarray, Xt: np.ndarray, Yt: np.ndarray) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and test AP of ``br`` at its defaults with ``n_jobs``."""
    spec = get_method("br")
    assert spec is not None
    model = spec.build({"n_jobs": n_jobs})
    wall, cpu = time.perf_counter(), _cpu_seconds()
    model.fit(X, Y)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    return wall, cpu, scoring.average_precision(Yt, model.decision_function(Xt))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if data_dir() is None:
        print("benchmark data not found (../shared/data): skipped")
        return 0
    warnings.simplefilter("ignore")
    (X, Y), (Xt, Yt) = bibtex("train"), bibtex("test")
    X = sparse.csr_matrix(X)  # what the service hands br: the stored CSR (bibtex is 3.7% non-zero)
    print(
        "| round | load | reference 2 threads / 1 | br wall s, n_jobs=1 / 2 | br CPU s (1 / 2) | test AP | br speed-up |"
    )
    print("|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        ref = reference(1) / reference(2)
        one, two = fit(1, X, Y, Xt, Yt), fit(2, X, Y, Xt, Yt)
        print(
            f"| {round_} | {load:.1f} | {ref:.2f} | {one[0]:.1f} / {two[0]:.1f} | {one[1]:.1f} / {two[1]:.1f} | "
            f"{one[2]:.4f} / {two[2]:.4f} | {one[0] / two[0]:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
