"""Training cost of TRANS-OVK (paper 000): time and peak memory, and scaling in n.

Every measurement runs in a fresh subprocess that loads the data, fits once and reports its
wall time and peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), so peak
memory is the whole process (interpreter + data + fit), not a tracemalloc estimate. Stage
times run from each stage's first progress call (the estimator reports every stage's start). ML-kNN is
fitted in the same subprocess as the in-run baseline (times on this shared 2-core machine are
noisy; the ratio is the stabler figure).

Tables:

1. yeast and scene, one random 80/20 split (training part), default parameters, ``--n-jobs``
   threads. Targets (issue 4): yeast <= 60 s, scene <= 120 s, peak memory <= 4 GB.
2. scaling on Yahoo Business (the only set here with n >= 4000): the first n rows of one seeded
   permutation for n = 500, 1000, 2000, 4000 (``--max-n`` caps it).

Run: ``.venv/bin/python -m benchmarks.trans_ovk_cost`` (``--quick``: table 1 only).
Writes ``benchmarks/results/trans_ovk_cost.md``; skips cleanly when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from benchmarks.trans_ovk_reproduce import load
from app.methods.trans_ovk import TransOVK
from app.methods.mlknn import MLkNN
name, n, n_jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
X, Y = load(name)
perm = np.random.default_rng(0).permutation(X.shape[0])
idx = perm[: int(round(0.8 * X.shape[0]))] if n <= 0 else perm[:n]
X, Y = np.ascontiguousarray(X[idx]), np.ascontiguousarray(Y[idx])
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter(); MLkNN().fit(X, Y); t_knn = time.perf_counter() - t
stamps = {}
t = time.perf_counter()
m = TransOVK(n_jobs=n_jobs).fit(X, Y, progress=lambda s, f: stamps.setdefault(s, time.perf_counter()))
secs = time.perf_counter() - t
ends = list(stamps.values())[1:] + [t + secs]
stage = {s: round(e - b, 1) for (s, b), e in zip(stamps.items(), ends)}
print(json.dumps({"n": X.shape[0], "d": X.shape[1], "q": Y.shape[1], "secs": secs,
                  "mlknn_secs": t_knn, "rss0_mb": rss0 / 1024,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "stages": stage, "unconverged": m.n_qp_unconverged_}))
"""


def measure(name: str, n: int, n_jobs: int, threads: int) -> dict:
    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONPATH": str(root),
    }
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, name, str(n), str(n_jobs)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(label: str, r: dict, target: str = "") -> str:
    stages = ", ".join(f"{k} {v}s" for k, v in r["stages"].items())
    return (
        f"| {label} | {r['n']} x {r['d']}, q={r['q']} | {r['secs']:.1f} | {r['mlknn_secs']:.2f} | "
        f"{r['secs'] / r['mlknn_secs']:.0f}x | {r['peak_mb']:.0f} ({r['rss0_mb']:.0f} before fit) | "
        f"{stages} | {target} |"
    )


HEADER = (
    "| data | n x d | TRANS-OVK fit s | ML-kNN fit s | ratio | peak RSS MB | stages | target |\n"
    "|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="yeast and scene only")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--max-n", type=int, default=4000)
    args = parser.parse_args(argv)
    from benchmarks.datasets import data_dir

    if data_dir() is None:
        print("data folder not found (set LABELSERVE_DATA_DIR); skipping")
        return 0
    threads = 1 if args.n_jobs > 1 else 2  # 2 cores: threads over blocks, or BLAS threads
    lines = [f"Training cost, n_jobs={args.n_jobs}, BLAS threads={threads}", "", HEADER]
    print("\n".join(lines), flush=True)
    for name, target in (("yeast", "<= 60 s, <= 4 GB"), ("scene", "<= 120 s, <= 4 GB")):
        lines.append(row(name, measure(name, 0, args.n_jobs, threads), target))
        print(lines[-1], flush=True)
    if not args.quick:
        lines += ["", "Scaling on Yahoo Business (first n rows of one seeded permutation)", "", HEADER]
        print("\n".join(lines[-3:]), flush=True)
        for n in (500, 1000, 2000, 4000):
            if n > args.max_n:
                continue
            lines.append(row("business", measure("business", n, args.n_jobs, threads)))
            print(lines[-1], flush=True)
    path = Path(__file__).resolve().parent / "results" / "trans_ovk_cost.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
