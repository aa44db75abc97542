"""Reproduce TRANS-OVK (paper 000) Tables 2-6 on random 80/20 splits, with honest baselines.

Protocol (paper section 4.1; spec 000 section 7): each data set (train and test files stacked)
is split at random 80/20, repeated ``--repeats`` times (the paper says "several"; seeds 0..R-1);
features are min-max scaled on the training part; every figure is mean +- std over the splits.
Metrics AVP, RL, CV, OE, HL (``app.metrics``). Printed next to the paper's TRANS-OVK and
ML-KNN columns:

* ``ML-kNN``: a correct ML-kNN (``app.methods.mlknn.MLkNN``, k = 10, s = 1, features scaled to
  [0, 1]) on the same splits;
* ``freq``: every test sample gets the training label frequencies as scores (a fixed ranking;
  label set = labels with frequency > 0.5): the floor any input-dependent method must beat;
* TRANS-OVK readings of spec section 6 (A1 PCA centring, A2 normaliser, A3 kernel order,
  A4 leading factor, sigma): ``literal`` is the spec's literal reading, the others are the
  alternatives; all share one alignment / leave-one-out computation per split and sigma;
* ``tuned`` (``--tune <sets>``): sigma^2 factor and lambda_w, lambda_k chosen by inner 5-fold CV on the
  training part only (:func:`app.methods.trans_ovk.tune_trans_ovk`, criterion AVP), on the
  signed reading ``col+signed+std`` (the best-ranking reading on emotions).

Run: ``.venv/bin/python -m benchmarks.trans_ovk_reproduce --datasets emotions --repeats 10
--tune emotions`` (``--quick``: emotions, 3 splits). Writes one table per data set to
``benchmarks/results/trans_ovk_reproduce_<dataset>.md`` (and its means to ``.json``), then the
combined AVP table over every saved data set to ``trans_ovk_reproduce_summary.md``
(``--summary`` rebuilds only that table).
Skips cleanly when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from app.methods import ovk_kernels as ok
from app.methods.trans_ovk import TransOVK, tune_trans_ovk
from app.metrics import average_precision, coverage, hamming_loss, one_error, ranking_loss

METRICS = ("AVP", "RL", "CV", "OE", "HL")
HIGHER = {"AVP"}

#: Paper Tables 2-6: (TRANS-OVK, ML-KNN) as (mean, std), spec 000 section 8.
PAPER: dict[str, dict[str, tuple[tuple[float, float], tuple[float, float]]]] = {
    "birds": {
        "AVP": ((0.7237, 0.0139), (0.5816, 0.0048)),
        "RL": ((0.1153, 0.0136), (0.1861, 0.0038)),
        "CV": ((3.5121, 0.2160), (4.8792, 0.0798)),
        "OE": ((0.3397, 0.0323), (0.5698, 0.0061)),
        "HL": ((0.0573, 0.0021), (0.0782, 0.0020)),
    },
    "business": {
        "AVP": ((0.8771, 0.0042), (0.8627, 0.0003)),
        "RL": ((0.0401, 0.0013), (0.0487, 0.0003)),
        "CV": ((2.2491, 0.0502), (2.5912, 0.0134)),
        "OE": ((0.1213, 0.0045), (0.1336, 0.0003)),
        "HL": ((0.0272, 0.0000), (0.0284, 0.0000)),
    },
    "cal500": {
        "AVP": ((0.4903, 0.0056), (0.4981, 0.0030)),
        "RL": ((0.1810, 0.0014), (0.1813, 0.0007)),
        "CV": ((126.6102, 0.9114), (128.9072, 0.8342)),
        "OE": ((0.0935, 0.0049), (0.0965, 0.0040)),
        "HL": ((0.1311, 0.0012), (0.1299, 0.0008)),
    },
    "emotions": {
        "AVP": ((0.7562, 0.0358), (0.5831, 0.0123)),
        "RL": ((0.2173, 0.0395), (0.4265, 0.0171)),
        "CV": ((2.0311, 0.2382), (3.2241, 0.0920)),
        "OE": ((0.3434, 0.0323), (0.5495, 0.0279)),
        "HL": ((0.2338, 0.0207), (0.3253, 0.0078)),
    },
    "genbase": {
        "AVP": ((0.9871, 0.0295), (0.7513, 0.1471)),
        "RL": ((0.0078, 0.0044), (0.0580, 0.0337)),
        "CV": ((0.6383, 0.2169), (1.9435, 0.9042)),
        "OE": ((0.0155, 0.0564), (0.3446, 0.2023)),
        "HL": ((0.0046, 0.0041), (0.0292, 0.0155)),
    },
    "scene": {
        "AVP": ((0.7522, 0.0242), (0.3181, 0.0460)),
        "RL": ((0.1565, 0.0697), (0.6529, 0.0734)),
        "CV": ((0.8164, 0.2965), (3.3339, 0.3667)),
        "OE": ((0.4193, 0.1203), (0.9123, 0.0420)),
        "HL": ((0.1434, 0.0216), (0.1915, 0.0198)),
    },
    "yeast": {
        "AVP": ((0.7543, 0.0328), (0.7102, 0.0012)),
        "RL": ((0.1734, 0.0114), (0.2042, 0.0010)),
        "CV": ((6.2864, 0.1498), (6.7680, 0.0313)),
        "OE": ((0.2345, 0.0115), (0.2443, 0.0016)),
        "HL": ((0.2039, 0.0016), (0.2291, 0.0008)),
    },
}

#: Readings of spec section 6 evaluated on every split: name -> (sigma^2 factor, params).
VARIANTS: dict[str, tuple[float, dict]] = {
    "literal": (1.0, dict(pca_centering="row", normalizer="minmax_sum", k_order="literal", self_factor=True)),
    "column": (1.0, dict(pca_centering="column", normalizer="minmax_sum", k_order="literal", self_factor=True)),
    "col+signed+std": (1.0, dict(pca_centering="column", normalizer="none", k_order="standard", self_factor=True)),
    "col+signed+std s/4": (0.25, dict(pca_centering="column", normalizer="none", k_order="standard", self_factor=True)),
}
TUNED_READING = dict(pca_centering="column", normalizer="none", k_order="standard", self_factor=True)


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    from benchmarks.datasets import load_mulan_full, load_yahoo

    if name == "business":
        parts = [load_yahoo("Business", p) for p in ("train", "test")]
        return (np.vstack([np.asarray(p.X, float) for p in parts]), np.vstack([np.asarray(p.Y) for p in parts]))
    ds = load_mulan_full(name)
    return np.asarray(ds.X, float), np.asarray(ds.Y)


def scores_of(Y: np.ndarray, S: np.ndarray, Z: np.ndarray) -> dict[str, float]:
    return {
        "AVP": average_precision(Y, S),
        "RL": ranking_loss(Y, S),
        "CV": coverage(Y, S),
        "OE": one_error(Y, S),
        "HL": hamming_loss(Y, Z),
    }


def transovk_variants(Xtr, Ytr, Xte, Yte, n_jobs) -> tuple[dict[str, dict], float]:
    """All VARIANTS on one split; one alignment / leave-one-out pass per sigma factor feeds
    the sample statistics of every reading with that factor."""
    out: dict[str, dict] = {}
    lo, span = ok.minmax_fit(Xtr)
    Xs = (Xtr - lo) / span
    Ys = np.where(Ytr > 0, 1.0, -1.0)
    s2 = ok.median_sigma2(Xs)
    t0 = time.perf_counter()
    for factor in sorted({f for f, _ in VARIANTS.values()}):
        names = [k for k, (f, _) in VARIANTS.items() if f == factor]
        ests = [TransOVK(sigma=float(np.sqrt(factor * s2)), n_jobs=n_jobs, **VARIANTS[k][1]) for k in names]
        for est in ests:
            est.x_min_, est.x_span_ = lo, span
            est.n_features_in_, est.n_labels_ = Xtr.shape[1], Ytr.shape[1]
        all_stats = ests[0]._distribution_stats(
            Xs, Ys, factor * s2, [(e.pca_centering, e.normalizer) for e in ests], lambda s, f: None
        )
        for name, est, stats in zip(names, ests, all_stats):
            est._fit_head(Xs, Ys, stats, lambda s, f: None)
            out[name] = scores_of(Yte, est.decision_function(Xte), est.predict(Xte))
    return out, time.perf_counter() - t0


def run_dataset(name: str, repeats: int, tune: bool, n_jobs: int) -> dict[str, list[dict]]:
    from app.methods.mlknn import MLkNN

    X, Y = load(name)
    n = X.shape[0]
    res: dict[str, list[dict]] = {}
    for seed in range(repeats):
        perm = np.random.default_rng(seed).permutation(n)
        ntr = int(round(0.8 * n))
        tr, te = perm[:ntr], perm[ntr:]
        Xtr, Ytr, Xte, Yte = X[tr], Y[tr], X[te], Y[te]
        mk = MLkNN().fit(Xtr, Ytr)
        res.setdefault("ML-kNN", []).append(scores_of(Yte, mk.decision_function(Xte), mk.predict(Xte)))
        freq = Ytr.mean(0)
        res.setdefault("freq", []).append(
            scores_of(Yte, np.tile(freq, (len(te), 1)), np.tile(freq > 0.5, (len(te), 1)))
        )
        variants, secs = transovk_variants(Xtr, Ytr, Xte, Yte, n_jobs)
        for k, v in variants.items():
            res.setdefault(k, []).append(v)
        line = f"  {name} split {seed}: variants {secs:.1f}s"
        if tune:
            t0 = time.perf_counter()
            model, rows = tune_trans_ovk(
                Xtr, Ytr, sigma2_factors=(0.125, 0.25, 0.5, 1.0), n_jobs=n_jobs, **TUNED_READING
            )
            res.setdefault("tuned", []).append(scores_of(Yte, model.decision_function(Xte), model.predict(Xte)))
            best = max(rows, key=lambda r: r["cv_average_precision"])
            line += (
                f", tuned {time.perf_counter() - t0:.1f}s (sigma2 x{best['sigma2_factor']}, "
                f"lambda_w {best['lambda_w']:g}, lambda_k {best['lambda_k']:g})"
            )
        print(line, flush=True)
    return res


def fmt(m: float, s: float, metric: str) -> str:
    return f"{m:.2f}+-{s:.2f}" if metric == "CV" and m >= 10 else f"{m:.4f}+-{s:.4f}"


def table(name: str, res: dict[str, list[dict]], repeats: int) -> str:
    cols = ["paper TRANS-OVK", "paper ML-KNN", "ML-kNN", "freq", *VARIANTS]
    if "tuned" in res:
        cols.append("tuned")
    lines = [
        f"### {name} ({repeats} random 80/20 splits, mean +- std)",
        "",
        "| metric | " + " | ".join(cols) + " | gap best-ours vs paper |",
        "|---" * (len(cols) + 2) + "|",
    ]
    ours = [c for c in cols[4:]]
    for metric in METRICS:
        cells = []
        if name in PAPER:
            (pm, ps), (km, ks) = PAPER[name][metric]
            cells += [fmt(pm, ps, metric), fmt(km, ks, metric)]
        else:
            cells += ["-", "-"]
        means = {}
        for c in cols[2:]:
            v = np.array([r[metric] for r in res[c]])
            means[c] = v.mean()
            cells.append(fmt(v.mean(), v.std(), metric))
        best = (max if metric in HIGHER else min)(ours, key=lambda c: means[c])
        gap = f"{best}: {means[best] - PAPER[name][metric][0][0]:+.4f}" if name in PAPER else "-"
        lines.append(f"| {metric} | " + " | ".join(cells) + f" | {gap} |")
    return "\n".join(lines)


SUMMARY_COLS = ("paper TRANS-OVK", "paper ML-KNN", "ML-kNN", "freq", *VARIANTS, "tuned")
SUMMARY_ORDER = ("emotions", "yeast", "scene", "business", "birds", "genbase", "cal500")


def save_json(path: Path, name: str, res: dict[str, list[dict]], repeats: int) -> None:
    means = {
        c: {m: [float(np.mean([r[m] for r in rs])), float(np.std([r[m] for r in rs]))] for m in METRICS}
        for c, rs in res.items()
    }
    path.write_text(json.dumps({"dataset": name, "repeats": repeats, "means": means}, indent=1))


def summary(results: Path) -> str:
    """One AVP table over every data set that has a saved run (``*.json`` next to the .md)."""
    runs = {}
    for p in results.glob("trans_ovk_reproduce_*.json"):
        r = json.loads(p.read_text())
        runs[r["dataset"]] = r
    lines = [
        "### TRANS-OVK average precision (AVP, higher is better): paper vs ours, mean over random 80/20 splits",
        "",
        "| data set | splits | " + " | ".join(SUMMARY_COLS) + " |",
        "|---" * (len(SUMMARY_COLS) + 2) + "|",
    ]
    for name in sorted(runs, key=lambda k: SUMMARY_ORDER.index(k) if k in SUMMARY_ORDER else 99):
        r = runs[name]
        cells = []
        for c in SUMMARY_COLS:
            if c.startswith("paper"):
                v = PAPER.get(name, {}).get("AVP")
                cells.append(f"{v[0 if c == 'paper TRANS-OVK' else 1][0]:.3f}" if v else "-")
            else:
                v = r["means"].get(c)
                cells.append(f"{v['AVP'][0]:.3f}" if v else "-")
        lines.append(f"| {name} | {r['repeats']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets", default="emotions", help="comma list of emotions,scene,yeast,birds,genbase,cal500,business"
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--tune", default="", help="comma list of data sets (or 'all') that get the inner-CV tuned column"
    )
    parser.add_argument("--quick", action="store_true", help="emotions, 3 splits")
    parser.add_argument("--summary", action="store_true", help="only rebuild the combined AVP table from saved runs")
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args(argv)
    from benchmarks.datasets import data_dir

    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    if not args.summary:
        if data_dir() is None:
            print("data folder not found (set LABELSERVE_DATA_DIR); skipping")
            return 0
        names = ["emotions"] if args.quick else [s.strip() for s in args.datasets.split(",") if s.strip()]
        tune = {s.strip() for s in args.tune.split(",") if s.strip()}
        repeats = 3 if args.quick else args.repeats
        for name in names:
            t0 = time.perf_counter()
            res = run_dataset(name, repeats, "all" in tune or name in tune, args.n_jobs)
            text = table(name, res, repeats)
            print(text + f"\n\n({name}: {time.perf_counter() - t0:.0f}s)\n", flush=True)
            (results / f"trans_ovk_reproduce_{name}.md").write_text(text + "\n")
            save_json(results / f"trans_ovk_reproduce_{name}.json", name, res, repeats)
    text = summary(results)
    print(text)
    (results / "trans_ovk_reproduce_summary.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
