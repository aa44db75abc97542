"""DMKNN at its defaults against ``label_sets="auto"`` and ML-kNN, on official splits.

Each model is fitted on the training split and scored on the test split: average precision,
micro- and macro-F1, Hamming loss, the share of test rows whose label set came from the itemset
branch (``predict_details``), the share of labelled test rows left empty, the leave-one-out
training micro-F1 of Algorithm 4 and of ML-kNN's rule (what the fit compares), and whether the
fit warned that ML-kNN's rule did better. ``DMKNN literal`` is the default with
``ensure_nonempty=False`` (Algorithm 4 as printed), which shows how often the paper's rule alone
leaves a labelled row empty.

    nice -n 10 .venv/bin/python -m benchmarks.dmknn_defaults                 # emotions, scene, yeast
    nice -n 10 .venv/bin/python -m benchmarks.dmknn_defaults --sets emotions

Writes ``benchmarks/results/dmknn_defaults.md``. Skips cleanly when the data folder is absent.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from app import scoring  # noqa: E402
from app.methods.dmknn import DMKNN  # noqa: E402
from app.methods.fit_warnings import BetterRuleWarning  # noqa: E402
from app.methods.mlknn import MLkNN  # noqa: E402
from benchmarks.datasets import data_dir, load_mulan  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "dmknn (default)": {},
    "dmknn literal": {"ensure_nonempty": False},
    'dmknn label_sets="auto"': {"label_sets": "auto"},
}
COLUMNS = ("AP", "micro-F1", "macro-F1", "Hamming", "itemset", "empty", "LOO Alg. 4 / ML-kNN rule", "warned")


def _row(model: Any, Xte: np.ndarray, Yte: np.ndarray, warned: bool) -> dict[str, str]:
    if isinstance(model, DMKNN):
        Yhat, extras = model.predict_details(Xte)
        itemset = f"{100 * np.mean([e['branch'] == 'itemset' for e in extras]):.1f}%"
        loo = f"{model.paper_loo_micro_f1_:.3f} / {model.posterior_loo_micro_f1_:.3f} ({model.label_rule_})"
    else:
        Yhat, itemset, loo = model.predict(Xte), "-", "-"
    S = model.decision_function(Xte)
    labelled = Yte.any(axis=1)
    return {
        "AP": f"{scoring.average_precision(Yte, S):.3f}",
        "micro-F1": f"{scoring.micro_f1(Yte, Yhat):.3f}",
        "macro-F1": f"{scoring.macro_f1(Yte, Yhat):.3f}",
        "Hamming": f"{scoring.hamming_loss(Yte, Yhat):.3f}",
        "itemset": itemset,
        "empty": f"{100 * np.mean(~Yhat[labelled].any(axis=1)):.1f}%",
        "LOO Alg. 4 / ML-kNN rule": loo,
        "warned": "yes" if warned else "no",
    }


def run(name: str) -> list[str]:
    tr, te = load_mulan(name, "train"), load_mulan(name, "test")
    Xtr, Ytr = np.asarray(tr.X, dtype=float), np.asarray(tr.Y, dtype=np.int64)
    Xte, Yte = np.asarray(te.X, dtype=float), np.asarray(te.Y, dtype=np.int64)
    builds: dict[str, Any] = {label: (lambda p=params: DMKNN(**p)) for label, params in CONFIGS.items()}
    builds["mlknn (default)"] = MLkNN
    lines = []
    for label, build in builds.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = build().fit(Xtr, Ytr)
        warned = any(issubclass(w.category, BetterRuleWarning) for w in caught)
        row = _row(model, Xte, Yte, warned)
        lines.append(f"| {name} | {label} | " + " | ".join(row[c] for c in COLUMNS) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["emotions", "scene", "yeast"])
    args = parser.parse_args(argv)
    if data_dir() is None:
        print("dmknn_defaults: data folder not found (../shared/data or LABELSERVE_DATA_DIR); skipping.")
        return 0
    lines = ["| data | model | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 2) + "|"]
    for name in args.sets:
        lines += run(name)
    text = "\n".join(lines)
    print(text)
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "dmknn_defaults.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
