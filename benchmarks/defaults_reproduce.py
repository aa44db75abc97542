"""The classifiers and GHC-DR at their defaults next to their literal readings and cheap baselines.

Every benchmark set with an official split: the seven Mulan sets and the seven Yahoo web-page
topics (2000 train / 3000 test). Nothing here is tuned on a test split: the defaults were chosen
by cross-validation inside the official *training* splits (``--choose`` re-runs that study).

Classifiers (``--part classifiers``): ML-kNN with its published 0.5 rule and at its default
(threshold learned on the leave-one-out training posteriors, never-empty when the training
samples all carry labels); DMKNN as printed (Algorithm 4, predicted set ranked first), its
previous service default (``ensure_nonempty``), its default (posterior ranking) and the
over-prediction fix (``independence_threshold_floor=0.5, min_itemset_size=1``); the constant
label-frequency baseline (ranking by training frequency, label set = the ``round(mean training
cardinality)`` most frequent labels).

Selection (``--part selection``): ML-kNN (K=10) on the top 10, 20 and 30% of features, average
precision averaged over the three; GHC-DR with the paper's reading (alpha = 1, fuzzy-dependency
weights, G_FGM and R as defined: non-convex on most of these sets) and at its default
(``redundancy="psd"``, ``w_scaling="none"``), against a mutual-information filter
(scikit-learn's ``mutual_info_classif`` summed over labels, ``random_state=0``), a variance
ranking and all features.

    .venv/bin/python -m benchmarks.defaults_reproduce --part classifiers
    .venv/bin/python -m benchmarks.defaults_reproduce --part selection --sets Arts Business
    .venv/bin/python -m benchmarks.defaults_reproduce --choose          # the training-split studies

``mutual_info_classif`` is by far the slowest step (minutes per Yahoo set on a shared machine);
``--mi-cache DIR`` keeps its scores per set (``DIR/<set>.npy``) so that a rerun does not pay it
again. Writes ``benchmarks/results/defaults_reproduce_<part>.md``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.feature_selection import mutual_info_classif  # noqa: E402
from sklearn.model_selection import KFold  # noqa: E402

from app import scoring  # noqa: E402
from app.methods.dmknn import DMKNN  # noqa: E402
from app.methods.fit_warnings import DegenerateFitWarning  # noqa: E402
from app.methods.ghc_dr import GHCDR, PAPER_READING, n_features_for_percent  # noqa: E402
from app.methods.mlknn import MLkNN  # noqa: E402
from benchmarks import datasets  # noqa: E402
from benchmarks.baselines import variance_ranking  # noqa: E402

MULAN = ("emotions", "scene", "yeast", "birds", "flags", "genbase", "medical")
YAHOO = datasets.YAHOO_SETS
PERCENTS = (10, 20, 30)

Classifier = Callable[[], object]
CLASSIFIERS: dict[str, Classifier] = {
    "ML-kNN 0.5 rule (literal)": lambda: MLkNN(threshold="map", ensure_nonempty="off"),
    "ML-kNN default": lambda: MLkNN(),
    "DMKNN literal (Alg. 4, set first)": lambda: DMKNN(
        ensure_nonempty=False, ranking="predicted_first", label_sets="paper"
    ),
    "DMKNN previous default": lambda: DMKNN(ranking="predicted_first", label_sets="paper"),
    "DMKNN default": lambda: DMKNN(),
    "DMKNN floor 0.5 + singletons": lambda: DMKNN(independence_threshold_floor=0.5, min_itemset_size=1),
}
SELECTORS: dict[str, dict[str, object]] = {
    "GHC-DR paper reading": dict(PAPER_READING),
    "GHC-DR default": {},
}


def load(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    loader = datasets.load_yahoo if name in YAHOO else datasets.load_mulan
    tr, te = loader(name, "train"), loader(name, "test")
    return (
        np.asarray(tr.X, dtype=np.float64),
        (np.asarray(tr.Y) > 0).astype(np.int64),
        np.asarray(te.X, dtype=np.float64),
        (np.asarray(te.Y) > 0).astype(np.int64),
    )


def label_set_metrics(Y: np.ndarray, Yhat: np.ndarray, S: np.ndarray) -> dict[str, float]:
    return {
        "AP": scoring.average_precision(Y, S),
        "micro-F1": scoring.micro_f1(Y, Yhat),
        "macro-F1": scoring.macro_f1(Y, Yhat),
        "HL": scoring.hamming_loss(Y, Yhat),
        "empty %": 100.0 * float((~Yhat.astype(bool).any(axis=1)).mean()),
        "set size": float(Yhat.sum(axis=1).mean()),
    }


def frequency_baseline(Ytr: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Constant scores (training label frequencies) and the constant set of the most frequent labels."""
    freq = Ytr.mean(axis=0)
    size = max(1, int(round(Ytr.sum(axis=1).mean())))
    Yhat = np.zeros((n, Ytr.shape[1]), dtype=np.int64)
    Yhat[:, np.argsort(-freq, kind="stable")[:size]] = 1
    return np.tile(freq, (n, 1)), Yhat


def classifier_rows(name: str) -> dict[str, dict[str, float]]:
    Xtr, Ytr, Xte, Yte = load(name)
    rows: dict[str, dict[str, float]] = {}
    for label, build in CLASSIFIERS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateFitWarning)  # the literal readings warn, by design
            model = build().fit(Xtr, Ytr)  # type: ignore[attr-defined]
        rows[label] = label_set_metrics(Yte, model.predict(Xte), model.decision_function(Xte))
    S, Yhat = frequency_baseline(Ytr, len(Xte))
    rows["label frequency (constant)"] = label_set_metrics(Yte, Yhat, S)
    return rows


def mi_scores(name: str, X: np.ndarray, Y: np.ndarray, cache: Path | None) -> np.ndarray:
    """Summed ``mutual_info_classif`` over the labels that vary in the training part."""
    path = cache / f"{name}.npy" if cache is not None else None
    if path is not None and path.exists():
        return np.load(path)
    scores = np.zeros(X.shape[1])
    for j in range(Y.shape[1]):
        if 0 < Y[:, j].sum() < len(Y):
            scores += mutual_info_classif(X, Y[:, j], random_state=0)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, scores)
    return scores


def subset_ap(ranking: np.ndarray, Xa: np.ndarray, Ya: np.ndarray, Xb: np.ndarray, Yb: np.ndarray) -> float:
    """ML-kNN (K=10) average precision on the top 10/20/30% of the ranking, averaged."""
    d = len(ranking)
    aps = []
    for p in PERCENTS:
        cols = np.sort(ranking[: n_features_for_percent(p, d)])
        S = MLkNN(k=10).fit(Xa[:, cols], Ya).decision_function(Xb[:, cols])
        aps.append(scoring.average_precision(Yb, S))
    return float(np.mean(aps))


def selection_row(name: str, cache: Path | None) -> dict[str, float]:
    Xtr, Ytr, Xte, Yte = load(name)
    row: dict[str, float] = {}
    for label, params in SELECTORS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateFitWarning)
            model = GHCDR(**params).fit(Xtr, Ytr)  # type: ignore[arg-type]
        row[label] = subset_ap(model.ranking_, Xtr, Ytr, Xte, Yte)
        row[f"{label} min eigenvalue"] = model.min_D_
    row["MI filter"] = subset_ap(np.argsort(-mi_scores(name, Xtr, Ytr, cache), kind="stable"), Xtr, Ytr, Xte, Yte)
    row["variance"] = subset_ap(variance_ranking(Xtr), Xtr, Ytr, Xte, Yte)
    row["all features"] = scoring.average_precision(Yte, MLkNN(k=10).fit(Xtr, Ytr).decision_function(Xte))
    return row


def choose(sets: list[str]) -> list[str]:
    """The training-split studies behind the defaults (never the test split)."""
    out = ["## Training-split studies (5-fold CV for label sets, 2-fold for GHC-DR, inside the official train part)"]
    for name in sets:
        Xtr, Ytr, _, _ = load(name)
        acc: dict[str, list[dict[str, float]]] = {}
        for a, b in KFold(5, shuffle=True, random_state=0).split(Xtr):
            for label, build in CLASSIFIERS.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DegenerateFitWarning)
                    model = build().fit(Xtr[a], Ytr[a])  # type: ignore[attr-defined]
                acc.setdefault(label, []).append(
                    label_set_metrics(Ytr[b], model.predict(Xtr[b]), model.decision_function(Xtr[b]))
                )
        ghc: dict[str, list[float]] = {}
        for a, b in KFold(2, shuffle=True, random_state=0).split(Xtr):
            for label, params in SELECTORS.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DegenerateFitWarning)
                    ranking = GHCDR(**params).fit(Xtr[a], Ytr[a]).ranking_  # type: ignore[arg-type]
                ghc.setdefault(label, []).append(subset_ap(ranking, Xtr[a], Ytr[a], Xtr[b], Ytr[b]))
        out.append(f"### {name}")
        for label, rows in acc.items():
            out.append(f"- {label}: " + ", ".join(f"{k} {np.mean([r[k] for r in rows]):.3f}" for k in rows[0]))
        out.append("- " + ", ".join(f"{label} AP {np.mean(v):.4f}" for label, v in ghc.items()))
        print("\n".join(out[-len(acc) - 2 :]), flush=True)
    return out


def table(title: str, rows: dict[str, dict[str, float]], columns: list[str]) -> list[str]:
    lines = [f"### {title}", "", "| config | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, r in rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{r[c]:.3f}" if c in r else "" for c in columns) + " |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("classifiers", "selection"), default="classifiers")
    ap.add_argument("--sets", nargs="*", default=None)
    ap.add_argument("--choose", action="store_true", help="run the training-split studies instead")
    ap.add_argument("--mi-cache", type=Path, default=None, help="folder for mutual_info_classif scores")
    args = ap.parse_args(argv)
    if datasets.data_dir() is None:
        print("data directory not found (set LABELSERVE_DATA_DIR); skipping")
        return 0
    sets = args.sets or [*MULAN, *YAHOO]
    started = time.perf_counter()
    if args.choose:
        out, part = choose(sets), "choose"
    elif args.part == "classifiers":
        out, part = [], "classifiers"
        cols = ["AP", "micro-F1", "macro-F1", "HL", "empty %", "set size"]
        for name in sets:
            out += table(name, classifier_rows(name), cols)
            print("\n".join(out[-(len(CLASSIFIERS) + 6) :]), flush=True)
    else:
        part = "selection"
        names = [*SELECTORS, "MI filter", "variance", "all features"]
        out = [
            "| data | " + " | ".join(names) + " | paper reading min eigenvalue |",
            "|---" * (len(names) + 2) + "|",
        ]
        for name in sets:
            r = selection_row(name, args.mi_cache)
            out.append(
                f"| {name} | "
                + " | ".join(f"{r[c]:.4f}" for c in names)
                + f" | {r['GHC-DR paper reading min eigenvalue']:.3f} |"
            )
            print(out[-1], flush=True)
    out.append(f"\ntotal {time.perf_counter() - started:.0f} s")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"defaults_reproduce_{part}.md").write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
