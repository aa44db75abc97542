"""``auto``'s cost and test average precision against a one-vs-rest LightGBM in the same run.

On a set's official split (features min-max scaled on the training part, as
``benchmarks/leaderboard.py``): a one-vs-rest ``LGBMClassifier`` at LightGBM's defaults (one
thread; a label constant in training scored with its constant), fit + predict, timed; then
``auto`` as the service runs it (``choice.select`` at its defaults, seed 0, then the winner
fitted on the whole training part), timed. One JSON line per set: wall and CPU seconds of both,
test average precision, the folds run, what was picked, each leaderboard row's mean, measured
seconds and, when the race stopped it, after how many folds; the load average at start and end.

    nice .venv/bin/python -m benchmarks.auto_race emotions scene Arts

To compare with another checkout in the same minutes, run the same file there with that
checkout first on ``PYTHONPATH`` (docs/auto.md did so with ``main``, one set after the other).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from app import scoring
from app.evaluation import choice
from app.methods.catalog import get_method
from benchmarks.leaderboard import _picked, _split


def lightgbm_baseline(Xtr: np.ndarray, Ytr: np.ndarray, Xte: np.ndarray, Yte: np.ndarray) -> dict[str, float]:
    import lightgbm

    wall, cpu = time.perf_counter(), time.process_time()
    S = np.zeros((Xte.shape[0], Ytr.shape[1]))
    for j in range(Ytr.shape[1]):
        y = Ytr[:, j]
        if y.min() == y.max():
            S[:, j] = y[0]
            continue
        S[:, j] = lightgbm.LGBMClassifier(n_jobs=1, verbose=-1).fit(Xtr, y).predict_proba(Xte)[:, 1]
    return {
        "wall": round(time.perf_counter() - wall, 2),
        "cpu": round(time.process_time() - cpu, 2),
        "ap": round(scoring.average_precision(Yte, S), 4),
    }


def measure(name: str) -> dict[str, Any]:
    Xtr, Ytr, Xte, Yte = _split(name)
    load = os.getloadavg()[0]
    baseline = lightgbm_baseline(Xtr, Ytr, Xte, Yte)
    wall, cpu = time.perf_counter(), time.process_time()
    selection = choice.select(Xtr, Ytr, "multilabel", random_state=0)
    best = selection.best
    model = get_method(best.method).build(best.params).fit(Xtr, Ytr)  # type: ignore[union-attr]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    record = selection.record()
    return {
        "set": name,
        "load": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "ap": round(scoring.average_precision(Yte, model.decision_function(Xte)), 4),
        "picked": _picked(best.method, best.params),
        "wall": round(wall, 1),
        "cpu": round(cpu, 1),
        "folds": f"{selection.cv}x{selection.repeats}",
        "lightgbm": baseline,
        "x_lightgbm_cpu": round(cpu / baseline["cpu"], 1),
        "x_lightgbm_wall": round(wall / baseline["wall"], 1),
        "rows": {
            row["method"]: [row["mean"], row["measured_seconds"], (row.get("stopped") or {}).get("after_folds")]
            for row in record["leaderboard"]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+")
    for name in parser.parse_args().sets:
        print(json.dumps(measure(name)), flush=True)


if __name__ == "__main__":
    main()
