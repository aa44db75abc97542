"""mlknn on bibtex-train: the fit's peak memory and the artifact, CSR kept vs the dense copy.

Each path runs in a fresh Python process (``--path dense|csr``), so that one path's freed
memory does not hide the other's peak: the process parses bibtex-train (CSR, as the store
holds it), resets its resident high-water mark (``/proc/self/clear_refs`` 5), then

* ``dense``: makes the dense float64 copy that ``fit_input`` made for a method that needed
  dense features before, and fits ``mlknn`` (defaults) on it;
* ``csr``: fits ``mlknn`` (defaults) on the CSR matrix as it is (``accepts_sparse``);

and reports the growth of ``VmHWM`` over the resident size before the fit (the dense copy
included: it is the dense path's), the fit's wall time, the pickled model's bytes (protocol 5,
as ``Store.save_artifact`` writes it) and the method's memory estimate. The parent also checks
that both models score bibtex-test alike (max absolute difference of the scores, dense model on
dense rows against CSR model on CSR rows) and prints a Markdown table with the load average.

Target (issue 22): no dense n x d copy in the CSR path (its growth well under the 68 MB dense
table), the same scores.

Run: ``.venv/bin/python -m benchmarks.knn_sparse``. Needs ``../shared/data``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.formats import parse_dataset
from app.methods.base import data_shape
from app.methods.catalog import get_method
from benchmarks import datasets as bd

MB = 1024 * 1024


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _bibtex(part: str) -> tuple[Any, np.ndarray]:
    """A bibtex part as the service parses it: CSR features, uint8 labels."""
    base = bd.require_data_dir() / "multilabel" / "bibtex"
    path = base / f"bibtex-{part}.arff"
    parsed = parse_dataset(path.read_bytes(), filename=path.name, labels_file=(base / "bibtex.xml").read_bytes())
    return parsed.X.tocsr(), np.asarray(parsed.Y)


def one_path(path: str, scores_file: Path) -> dict[str, float | int | str]:
    """Fit mlknn on bibtex-train along ``path`` in this process; save its test scores."""
    (X, Y), (T, _) = _bibtex("train"), _bibtex("test")
    spec = get_method("mlknn")
    assert spec is not None
    params = spec.params()
    estimate = spec.estimator.memory_estimate(data_shape(X, Y) if path == "csr" else data_shape(X.toarray(), Y), {})
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    start = time.perf_counter()
    X_in = X.toarray() if path == "dense" else X
    model = spec.build(params).fit(X_in, Y)
    elapsed = time.perf_counter() - start
    growth = _status("VmHWM") - before
    del X_in
    np.save(scores_file, model.decision_function(T.toarray() if path == "dense" else T))
    return {
        "path": path,
        "growth": growth,
        "seconds": elapsed,
        "artifact": len(pickle.dumps(model, protocol=5)),
        "estimated_peak": estimate.train_peak_bytes,
        "estimated_model": estimate.model_bytes,
        "search": model.neighbour_search_,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", choices=["dense", "csr"], help="run one path in this process (internal)")
    ap.add_argument("--scores", type=Path, help="where the one path saves its test scores (internal)")
    args = ap.parse_args(argv)
    if args.path:
        print(json.dumps(one_path(args.path, args.scores)))
        return 0
    bd.require_data_dir()
    rows, scores = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in ("dense", "csr"):
            out = Path(tmp) / f"{path}.npy"
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.knn_sparse", "--path", path, "--scores", str(out)],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            scores[path] = np.load(out)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (2 cores)\n")
    print("| path | search | fit peak (growth) | estimated peak | fit time | artifact | estimated model |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['path']} | {r['search']} | {r['growth'] / MB:.1f} MB | {r['estimated_peak'] / MB:.1f} MB "
            f"| {r['seconds']:.1f} s | {r['artifact'] / MB:.1f} MB | {r['estimated_model'] / MB:.1f} MB |"
        )
    dense, csr = rows
    print(
        f"\nCSR / dense: fit peak {csr['growth'] / dense['growth']:.2f}, artifact "
        f"{csr['artifact'] / dense['artifact']:.3f}, fit time {csr['seconds'] / dense['seconds']:.2f}; "
        f"max |score difference| on bibtex-test: {np.abs(scores['csr'] - scores['dense']).max():.3g}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
