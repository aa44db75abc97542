"""GHC-DR (seed 004) cost: time and memory of one fit, per stage, and how it scales with n.

Targets (issue 6): a Yahoo training set (n = 2000, d ~ 600) in under 60 s on 2 cores with peak
memory under 2 GB. Timings on this shared machine are noisy, so each one is also given as a ratio
to a baseline measured in the same run: the composite fuzzy similarity computed *without* the
exact pruning (row blocks, running minimum over every feature, the straightforward reading of
Eq. 3), whose S Y is checked to equal the pruned one bit for bit.

    .venv/bin/python -m benchmarks.ghc_dr_cost                 # Yahoo Arts + Reference, n = 1000..8000
    .venv/bin/python -m benchmarks.ghc_dr_cost --quick         # Arts, n = 1000..4000
    .venv/bin/python -m benchmarks.ghc_dr_cost --yahoo Health --sizes 1000 2000

Peak memory: "traced" is tracemalloc's peak of Python + NumPy allocations during the fit (NumPy
reports its buffers to tracemalloc); "RSS" is the process's maximum resident set (includes the
interpreter, libraries and the data), read after the run.

Synthetic data for the scaling table: d = 600 features, q = 20 labels driven by a 10-dimensional
latent factor (half of the features are noisy linear images of it, half pure noise); the labels
are thresholded noisy projections of the latent factor. Writes ``benchmarks/results/ghc_dr_cost.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from app.methods.ghc_dr import GHCDR, PAPER_READING, feature_order, similarity_rows  # noqa: E402
from app.methods.numerics import FeatureScaling  # noqa: E402


class Report(list):
    """Output lines, printed as they are added."""

    def append(self, line: str) -> None:
        print(line, flush=True)
        super().append(line)


def synthetic(n: int, d: int = 600, q: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 10))
    half = d // 2
    X = np.hstack([latent @ rng.normal(size=(10, half)) + rng.normal(size=(n, half)), rng.normal(size=(n, d - half))])
    scores = latent @ rng.normal(size=(10, q)) + rng.normal(size=(n, q))
    Y = (scores > np.quantile(scores, 0.8, axis=0)).astype(int)
    return X, Y


def timed_fit(X: np.ndarray, Y: np.ndarray, n_jobs: int, trace: bool) -> tuple[GHCDR, float, dict[str, float], float]:
    """Fit once; returns the model, wall seconds, seconds per progress stage and traced peak MiB."""
    stages: dict[str, float] = {}
    state = {"t": time.perf_counter(), "stage": None}

    def progress(stage: str, fraction: float) -> None:
        now = time.perf_counter()
        if state["stage"] is not None:
            stages[state["stage"]] = stages.get(state["stage"], 0.0) + now - state["t"]
        state["t"], state["stage"] = now, stage

    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    model = GHCDR(n_jobs=n_jobs, nonconvex="ignore", **PAPER_READING).fit(X, Y, progress=progress)
    wall = time.perf_counter() - t0
    peak = 0.0
    if trace:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return model, wall, stages, peak


def unpruned_similarity_time(
    X: np.ndarray, Y: np.ndarray, lam: float = 1.0, rows: int = 256
) -> tuple[float, np.ndarray]:
    """Baseline: S Y and row sums of S by row blocks with a running minimum over all d features."""
    X = np.asarray(X, dtype=np.float64)
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    xi = Xs.std(axis=0, ddof=1) / lam
    n, d = Xs.shape
    out = np.empty((n, Y.shape[1]))
    t0 = time.perf_counter()
    for s in range(0, n, rows):
        e = min(n, s + rows)
        M = np.ones((e - s, n))
        for t in range(d):
            gap = np.abs(Xs[s:e, t, None] - Xs[None, :, t])
            np.minimum(M, np.where(gap <= xi[t], 1.0 - gap, 0.0), out=M)
        out[s:e] = (M @ Y) / M.sum(axis=1, keepdims=True)
    return time.perf_counter() - t0, out


def pruned_memberships(X: np.ndarray, Y: np.ndarray, lam: float = 1.0) -> tuple[float, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    xi = Xs.std(axis=0, ddof=1) / lam
    t0 = time.perf_counter()
    order = feature_order(Xs, xi)
    S = similarity_rows(Xs, xi, order, 0, Xs.shape[0], 1 << 24)
    L = (S @ Y) / np.asarray(S.sum(axis=1))
    return time.perf_counter() - t0, L


def fmt_stages(stages: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.2f}" for k, v in stages.items())


def yahoo_part(names: list[str], out: Report) -> None:
    try:
        from benchmarks import datasets
    except ImportError:
        out.append("(benchmarks.datasets is not available: Yahoo part skipped)")
        return
    if datasets.data_dir() is None:
        out.append("(data directory not found: Yahoo part skipped)")
        return
    out.append("## Yahoo training sets (n = 2000): one GHC-DR fit at the defaults, n_jobs = 2")
    out.append("target: < 60 s and < 2 GB peak memory")
    out.append(
        f"{'set':<11}{'d':>5}{'q':>4}{'fit s':>8}{'traced MiB':>12}{'S density':>11}"
        f"{'k_DT':>6}{'convex':>8}  stages (s)"
    )
    for name in names:
        ds = datasets.load_yahoo(name, "train")
        X, Y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.Y).astype(int)
        model, wall, stages, peak = timed_fit(X, Y, n_jobs=2, trace=True)
        out.append(
            f"{name:<11}{X.shape[1]:>5}{Y.shape[1]:>4}{wall:>8.2f}{peak:>12.0f}"
            f"{model.similarity_density_:>11.5f}{model.k_dt_:>6}{str(model.convex_):>8}  {fmt_stages(stages)}"
        )
    ds = datasets.load_yahoo(names[0], "train")
    X, Y = np.asarray(ds.X, dtype=np.float64), (np.asarray(ds.Y) > 0).astype(float)
    t_plain, L_plain = unpruned_similarity_time(X, Y)
    t_pruned, L_pruned = pruned_memberships(X, Y)
    same = np.allclose(L_plain, L_pruned, rtol=0, atol=1e-14)
    out.append(
        f"fuzzy memberships (Eq. 3-4) on {names[0]}, 1 thread: unpruned row blocks {t_plain:.2f} s, "
        f"pruned {t_pruned:.2f} s (ratio {t_plain / t_pruned:.1f}x); max |diff| "
        f"{np.abs(L_plain - L_pruned).max():.1e} ({'identical up to summation order' if same else 'DIFFERENT'})"
    )


def scaling_part(sizes: list[int], out: Report) -> None:
    out.append("")
    out.append("## Scaling on synthetic data (d = 600, q = 20), n_jobs = 2")
    out.append(f"{'n':>6}{'fit s':>8}{'x n=first':>10}{'traced MiB':>12}{'S density':>11}{'k_DT':>6}  stages (s)")
    first = None
    for n in sizes:
        X, Y = synthetic(n)
        model, wall, stages, peak = timed_fit(X, Y, n_jobs=2, trace=True)
        first = first or wall
        out.append(
            f"{n:>6}{wall:>8.2f}{wall / first:>10.1f}{peak:>12.0f}{model.similarity_density_:>11.5f}"
            f"{model.k_dt_:>6}  {fmt_stages(stages)}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Arts only, n up to 4000")
    ap.add_argument("--yahoo", nargs="*", default=None, help="Yahoo sets to time (default Arts Reference)")
    ap.add_argument("--sizes", nargs="*", type=int, default=None, help="synthetic n values")
    args = ap.parse_args(argv)
    names = args.yahoo if args.yahoo is not None else (["Arts"] if args.quick else ["Arts", "Reference"])
    sizes = args.sizes or ([1000, 2000, 4000] if args.quick else [1000, 2000, 4000, 8000])
    out = Report()
    out.append(
        f"# GHC-DR cost (OMP/OPENBLAS threads = {os.environ['OMP_NUM_THREADS']}, {os.cpu_count()} cores, shared machine)"
    )
    if names:
        yahoo_part(names, out)
    scaling_part(sizes, out)
    out.append(f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "ghc_dr_cost.md").write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
