"""How ``aa-knn``'s defaults were chosen: cross-validation on the training parts of the LDL sets.

Each set is split as ``benchmarks/leaderboard.py`` splits it (seeded 80/20, ``random_state=0``);
only the 80% training part is used here: 5-fold cross-validation (3 on Movie, the largest),
shuffled with seed 0, mean Chebyshev distance of every point of ``POINTS`` (the literal method
first, then distance weights and standardisation, k in ``auto``'s grid, with and without the
leave-one-out shrinkage towards the training mean) and of the training mean itself. The test
parts are not read.

    nice .venv/bin/python -m benchmarks.aa_knn_defaults [--sets SJAFFE Yeast_alpha]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
from sklearn.model_selection import KFold, train_test_split

from app import scoring
from app.methods.aa_knn import AAKNN, LITERAL_DEFAULTS
from benchmarks import datasets

POINTS: dict[str, dict[str, Any]] = {
    "literal k=5 uniform minmax": LITERAL_DEFAULTS,
    **{
        f"k={k} {w} {s} shrink": {"k": k, "weights": w, "scale": s, "shrinkage": "loo"}
        for k in (5, 10, 20)
        for w in ("uniform", "distance")
        for s in ("minmax", "zscore")
    },
    "k=10 distance zscore no shrink": {"k": 10, "weights": "distance", "scale": "zscore", "shrinkage": 0.0},
    "default: k=loo distance minmax shrink=loo": {},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(datasets.LDL_SETS))
    args = parser.parse_args()
    print("| set | point | CV Chebyshev (train part) | CPU s | load |")
    print("|---|---|---|---|---|")
    for name in args.sets:
        ds = datasets.load_ldl(name)
        Xtr, _, Dtr, _ = train_test_split(np.array(ds.X), np.array(ds.Y), test_size=0.2, random_state=0)
        folds = list(KFold(3 if name == "Movie" else 5, shuffle=True, random_state=0).split(Xtr))
        mean = np.mean([scoring.chebyshev(Dtr[te], np.tile(Dtr[tr].mean(axis=0), (len(te), 1))) for tr, te in folds])
        print(f"| {name} | training mean | {mean:.5f} | 0.0 | {os.getloadavg()[0]:.1f} |", flush=True)
        for label, point in POINTS.items():
            load, started = os.getloadavg()[0], time.process_time()
            cheb = [
                scoring.chebyshev(Dtr[te], AAKNN(**point).fit(Xtr[tr], Dtr[tr]).predict(Xtr[te])) for tr, te in folds
            ]
            cpu = time.process_time() - started
            print(f"| {name} | {label} | {np.mean(cheb):.5f} | {cpu:.1f} | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main()
