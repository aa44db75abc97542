"""Cost of ``POST /datasets/{id}/split``'s row choice (``app.evaluation.splitting.train_test_rows``).

Iterative stratification walks the labels from the rarest and assigns rows one at a time, so
its cost grows with rows x labels; the shuffle of distribution rows is a permutation. Label
tables are generated (Bernoulli with a label density of 2%, as in text datasets); the table
gives the median process time (``time.process_time``, which hardly moves when other jobs share
the machine) of ``--runs`` splits at 20% test rows.

Run: ``.venv/bin/python -m benchmarks.split_cost [--runs 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from app.evaluation.splitting import train_test_rows

SIZES = [(2_000, 20), (2_000, 200), (20_000, 20), (20_000, 200), (20_000, 1_000)]


def measure(n: int, q: int, kind: str, runs: int) -> float:
    rng = np.random.default_rng(0)
    if kind == "multilabel":
        Y = (rng.random((n, q)) < 0.02).astype(np.float64)
        Y[np.arange(n), rng.integers(0, q, n)] = 1.0  # every row has a label
    else:
        Y = rng.random((n, q))
        Y /= Y.sum(axis=1, keepdims=True)
    times = []
    for seed in range(runs):
        start = time.process_time()
        train_test_rows(Y, kind, 0.2, seed)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("| rows | labels | multi-label (s) | distribution (s) |")
    print("|---:|---:|---:|---:|")
    for n, q in SIZES:
        ml = measure(n, q, "multilabel", args.runs)
        ldl = measure(n, q, "distribution", args.runs)
        print(f"| {n} | {q} | {ml:.3f} | {ldl:.4f} |")


if __name__ == "__main__":
    main()
