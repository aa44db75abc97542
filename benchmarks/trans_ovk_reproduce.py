"""TRANS-OVK (paper 000): the default and the literal reading on every multi-label set, next to
ML-kNN, a constant label-frequency ranking and the paper's figures.

Protocol: the official train/test split of each set (Mulan ARFF sets, the Yahoo 2000/3000
split; cal500 has none, so one seeded 80/20 split), features min-max scaled on the training
part inside each method. Columns:

* ``literal``: ``TransOVK(**LITERAL_READING)``: the paper read literally (row-centred PCA,
  training K_x from the leave-one-out step, the operator-valued KRR in the printed order with
  the leading factor, penalties 0.01, threshold 0, exact leave-one-out QPs on all samples);
* ``default``: ``TransOVK()`` (kernel through the ridge map for every sample, trace head,
  penalties and per-label thresholds learned on the training part only);
* ``ML-kNN``: ``app.methods.mlknn.MLkNN`` at its defaults (k = 10, 0.5 rule);
* ``constant``: every test sample ranked by the training label frequencies (the floor an
  input-dependent ranking must beat);
* ``paper``: the paper's TRANS-OVK average precision (Table 2, random 80/20 splits, so only
  roughly comparable).

Each cell is AP / macro-F1 / share of test samples with an empty predicted label set.

Run: ``.venv/bin/python -m benchmarks.trans_ovk_reproduce [--datasets emotions yeast ...]
[--skip-literal]``. Writes ``benchmarks/results/trans_ovk_reproduce_<set>.json`` per set as it
goes and the combined table to ``benchmarks/results/trans_ovk_reproduce.md`` (``--summary``
rebuilds only the table). Skips cleanly when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from app.methods.trans_ovk import LITERAL_READING, TransOVK
from app.scoring import average_precision, macro_f1

SETS = (
    "emotions",
    "scene",
    "yeast",
    "birds",
    "flags",
    "genbase",
    "medical",
    "cal500",
    "Arts",
    "Business",
    "Computers",
    "Education",
    "Health",
    "Recreation",
    "Reference",
)

#: Paper Table 2, TRANS-OVK average precision (mean over random 80/20 splits).
PAPER_AP = {
    "birds": 0.7237,
    "Business": 0.8771,
    "cal500": 0.4903,
    "emotions": 0.7562,
    "genbase": 0.9871,
    "scene": 0.7522,
    "yeast": 0.7543,
}

RESULTS = Path(__file__).resolve().parent / "results"


def split(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Official split (train X, Y, test X, Y); cal500: one 80/20 split, seed 0."""
    from benchmarks.datasets import YAHOO_SETS, load_mulan, load_mulan_full, load_yahoo

    if name == "cal500":
        ds = load_mulan_full(name)
        X, Y = np.asarray(ds.X, float), np.asarray(ds.Y)
        perm = np.random.default_rng(0).permutation(X.shape[0])
        k = int(round(0.8 * X.shape[0]))
        return X[perm[:k]], Y[perm[:k]], X[perm[k:]], Y[perm[k:]]
    loader = load_yahoo if name in YAHOO_SETS else load_mulan
    tr, te = loader(name, "train"), loader(name, "test")
    return np.asarray(tr.X, float), np.asarray(tr.Y), np.asarray(te.X, float), np.asarray(te.Y)


def cell(Y: np.ndarray, S: np.ndarray, Z: np.ndarray) -> dict[str, float]:
    return {
        "ap": average_precision(Y, S),
        "macro_f1": macro_f1(Y, Z),
        "empty": float((np.asarray(Z).sum(axis=1) == 0).mean()),
    }


def run_set(name: str, n_jobs: int, literal: bool) -> dict:
    from app.methods.mlknn import MLkNN

    Xtr, Ytr, Xte, Yte = split(name)
    out: dict = {"set": name, "n": Xtr.shape[0], "d": Xtr.shape[1], "q": Ytr.shape[1]}
    freq = Ytr.mean(axis=0)
    out["constant"] = {"ap": average_precision(Yte, np.tile(freq, (Yte.shape[0], 1)))}
    mk = MLkNN().fit(Xtr, Ytr)
    out["mlknn"] = cell(Yte, mk.predict_proba(Xte), mk.predict(Xte))
    readings = [("default", {})] + ([("literal", LITERAL_READING)] if literal else [])
    for label, kw in readings:
        t = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = TransOVK(n_jobs=n_jobs, **kw).fit(Xtr, Ytr)
        secs = time.perf_counter() - t
        out[label] = {
            **cell(Yte, m.decision_function(Xte), m.predict(Xte)),
            "fit_s": secs,
            "warnings": sorted({w.category.__name__ for w in caught}),
            "lambda_w": m.lambda_w_,
            "lambda_k": m.lambda_k_,
        }
    return out


def fmt(c: dict | None) -> str:
    if not c:
        return "-"
    if "macro_f1" not in c:
        return f"{c['ap']:.3f}"
    return f"{c['ap']:.3f} / {c['macro_f1']:.3f} / {c['empty']:.2f}"


def summary() -> str:
    runs = {}
    for p in RESULTS.glob("trans_ovk_reproduce_*.json"):
        r = json.loads(p.read_text())
        runs[r["set"]] = r
    lines = [
        "AP / macro-F1 / empty-set rate on the test part (official splits; cal500 one 80/20 split).",
        "",
        "| set | n x d, q | literal | default | ML-kNN | constant AP | paper AP | default fit s | default vs ML-kNN AP |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in SETS:
        if name not in runs:
            continue
        r = runs[name]
        d, k = r.get("default"), r.get("mlknn")
        gap = f"{d['ap'] - k['ap']:+.3f}" if d and k else "-"
        paper = f"{PAPER_AP[name]:.3f}" if name in PAPER_AP else "-"
        lines.append(
            f"| {name} | {r['n']} x {r['d']}, {r['q']} | {fmt(r.get('literal'))} | {fmt(d)} | {fmt(k)} | "
            f"{r['constant']['ap']:.3f} | {paper} | {d['fit_s']:.0f} | {gap} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=list(SETS))
    parser.add_argument("--skip-literal", action="store_true", help="the literal reading is slow on large sets")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--summary", action="store_true", help="only rebuild the table from saved runs")
    args = parser.parse_args(argv)
    from benchmarks.datasets import data_dir

    if data_dir() is None:
        print("data folder not found (set LABELSERVE_DATA_DIR); skipping")
        return 0
    RESULTS.mkdir(exist_ok=True)
    if not args.summary:
        for name in args.datasets:
            r = run_set(name, args.n_jobs, not args.skip_literal)
            (RESULTS / f"trans_ovk_reproduce_{name}.json").write_text(json.dumps(r, indent=1))
            print(
                name, json.dumps({k: r[k] for k in ("default", "literal", "mlknn", "constant") if k in r}), flush=True
            )
    table = summary()
    (RESULTS / "trans_ovk_reproduce.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
