"""``gbm``'s label-set rule: its cost against a bare one-vs-rest LightGBM, and its micro-F1.

On the official train/test split of each set, in the same run (the ratios are what compares on a
shared machine): a bare one-vs-rest ``LGBMClassifier`` with ``gbm``'s boosting settings (one
thread; a label constant in training scored with its constant), fit and predict; then ``gbm`` at
those settings with ``threshold="cv"`` (three inner copies of the whole model, the former
default) and ``threshold="oof"`` (short inner boosters beside each label's booster, the default),
each fit and predict with one thread. Reported: wall and CPU seconds, each rule's CPU seconds as a
ratio of the bare fit's, the learned threshold (``+fill``: an empty set gets its top label), the
test micro-F1 of each rule and the load average when the set started.

    nice .venv/bin/python -m benchmarks.gbm_threshold [--sets Arts Business ... medical]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from app.methods.gbm import GradientBoosting
from app.methods.thresholds import micro_f1
from benchmarks import datasets
from benchmarks.gbm_choice import one_vs_rest, split

SETS = (*datasets.YAHOO_SETS, "medical")


def _bare(settings: dict[str, Any]) -> Any:
    import lightgbm

    return lambda: lightgbm.LGBMClassifier(**settings, n_jobs=1, verbose=-1)


def _timed(run: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = run()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def measure(name: str) -> dict[str, Any]:
    Xtr, Ytr, Xte, Yte = split(name)
    ours = GradientBoosting(n_jobs=1)
    settings = {
        "n_estimators": ours.n_estimators,
        "learning_rate": ours.learning_rate,
        "num_leaves": ours.num_leaves,
        "min_child_samples": ours.min_child_samples,
        "colsample_bytree": ours.colsample_bytree,
        "random_state": ours.random_state,
    }
    row: dict[str, Any] = {"set": name, "load": round(os.getloadavg()[0], 2)}
    _, wall, cpu = _timed(lambda: one_vs_rest(_bare(settings), Xtr, Ytr, Xte))
    row["bare"] = {"wall": round(wall, 2), "cpu": round(cpu, 2)}
    for rule in ("cv", "oof"):
        model = GradientBoosting(n_jobs=1, threshold=rule)
        P, wall, rule_cpu = _timed(lambda model=model: model.fit(Xtr, Ytr).predict(Xte))
        row[rule] = {
            "wall": round(wall, 2),
            "cpu": round(rule_cpu, 2),
            "x_bare": round(rule_cpu / cpu, 2),
            "threshold": f"{model.threshold_}{'+fill' if model.fill_empty_ else ''}",
            "micro_f1": round(micro_f1(Yte, np.asarray(P) > 0), 4),
        }
    row["load_after"] = round(os.getloadavg()[0], 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    args = parser.parse_args()
    for name in args.sets:
        print(json.dumps(measure(name)), flush=True)


if __name__ == "__main__":
    main()
