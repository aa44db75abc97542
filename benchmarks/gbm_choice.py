"""Which library ``gbm`` fits with: LightGBM or scikit-learn's HistGradientBoostingClassifier.

One-vs-rest, each library at its own defaults (100 rounds, learning rate 0.1, 31 leaves; LightGBM's
``min_child_samples=20``, scikit-learn's ``min_samples_leaf=20`` and its early stopping, which is
on only from 10,000 rows), one thread each, on the official train/test split of emotions, scene and
one Yahoo set. A label constant in the training part is scored with that constant. Reported: CPU
seconds of the fits (``time.process_time``, so a shared machine's waiting is not counted), the
test average precision, and the load average when the set started.

    nice .venv/bin/python -m benchmarks.gbm_choice [--sets emotions scene Arts]
    nice .venv/bin/python -m benchmarks.gbm_choice --defaults [--sets ...]

``--defaults`` chooses ``gbm``'s defaults on the training parts only: every point of
``DEFAULT_CANDIDATES`` (the first is LightGBM's own default) by 3-fold cross-validation (shuffled,
seed 0) on each set's training part, mean average precision over the folds; the test parts are
not read.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from app import scoring
from benchmarks import datasets


def _lightgbm() -> Any:
    import lightgbm

    return lightgbm.LGBMClassifier(n_jobs=1, verbose=-1)


def _hgb() -> Any:
    return HistGradientBoostingClassifier()


LIBRARIES: dict[str, Callable[[], Any]] = {"lightgbm": _lightgbm, "sklearn-hgb": _hgb}


def split(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The official train/test parts of a Mulan or Yahoo set (dense features, 0/1 labels)."""
    load = datasets.load_yahoo if name in datasets.YAHOO_SETS else datasets.load_mulan
    tr, te = load(name, "train"), load(name, "test")

    def dense(X: Any) -> np.ndarray:
        return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)

    return dense(tr.X), (np.asarray(tr.Y) > 0).astype(int), dense(te.X), (np.asarray(te.Y) > 0).astype(int)


def one_vs_rest(make: Callable[[], Any], Xtr: np.ndarray, Ytr: np.ndarray, Xte: np.ndarray) -> np.ndarray:
    """Scores (n_test, q): one model per varying label, a constant label scored with its value."""
    S = np.zeros((Xte.shape[0], Ytr.shape[1]))
    for j in range(Ytr.shape[1]):
        y = Ytr[:, j]
        if y.min() == y.max():
            S[:, j] = float(y[0])
            continue
        S[:, j] = make().fit(Xtr, y).predict_proba(Xte)[:, 1]
    return S


#: the points ``--defaults`` compares (LightGBM's own default first)
DEFAULT_CANDIDATES: dict[str, dict[str, Any]] = {
    "library": {"n_estimators": 100, "learning_rate": 0.1, "num_leaves": 31, "min_child_samples": 20},
    "200/0.05/15/10/col0.5": {
        "n_estimators": 200,
        "learning_rate": 0.05,
        "num_leaves": 15,
        "min_child_samples": 10,
        "colsample_bytree": 0.5,
    },
    "100/0.1/15/10/col0.5": {
        "n_estimators": 100,
        "learning_rate": 0.1,
        "num_leaves": 15,
        "min_child_samples": 10,
        "colsample_bytree": 0.5,
    },
    "300/0.05/31/20/col0.5": {
        "n_estimators": 300,
        "learning_rate": 0.05,
        "num_leaves": 31,
        "min_child_samples": 20,
        "colsample_bytree": 0.5,
    },
    "200/0.05/7/5/col0.5": {
        "n_estimators": 200,
        "learning_rate": 0.05,
        "num_leaves": 7,
        "min_child_samples": 5,
        "colsample_bytree": 0.5,
    },
}


def choose_defaults(sets: list[str]) -> None:
    """Every ``DEFAULT_CANDIDATES`` point by 3-fold CV on each set's training part."""
    import lightgbm
    from sklearn.model_selection import KFold

    print("| set | point | CV AP (3 folds, train part) | CPU s | load |")
    print("|---|---|---|---|---|")
    for name in sets:
        Xtr, Ytr, _, _ = split(name)
        splits = list(KFold(3, shuffle=True, random_state=0).split(Xtr))
        for label, point in DEFAULT_CANDIDATES.items():
            load = os.getloadavg()[0]
            started = time.process_time()
            aps = []
            for tr, te in splits:

                def make(point: dict[str, Any] = point) -> Any:
                    return lightgbm.LGBMClassifier(n_jobs=1, verbose=-1, random_state=0, **point)

                aps.append(scoring.average_precision(Ytr[te], one_vs_rest(make, Xtr[tr], Ytr[tr], Xtr[te])))
            cpu = time.process_time() - started
            print(f"| {name} | {label} | {np.mean(aps):.4f} | {cpu:.1f} | {load:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["emotions", "scene", "Arts"])
    parser.add_argument("--defaults", action="store_true", help="choose gbm's defaults by CV on the training parts")
    args = parser.parse_args()
    if args.defaults:
        choose_defaults(args.sets)
        return
    print("| set | library | CPU s (fits + predict) | test AP | load |")
    print("|---|---|---|---|---|")
    for name in args.sets:
        Xtr, Ytr, Xte, Yte = split(name)
        for library, make in LIBRARIES.items():
            load = os.getloadavg()[0]
            started = time.process_time()
            S = one_vs_rest(make, Xtr, Ytr, Xte)
            cpu = time.process_time() - started
            ap = scoring.average_precision(Yte, S)
            print(f"| {name} | {library} | {cpu:.1f} | {ap:.4f} | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main()
