"""Scale, part 1: sparse uploads stay sparse, and serving memory is bounded by the model cache.

Two measurements against a real ``labelserve serve`` (one process, SQLite, temporary model
directory), each printed as a Markdown table:

1. **Uploads** of the sparse Mulan sets (bibtex and tmc2007 training parts, with their XML
   label files): request to 201 time against a *bare sparse read* of the same file in the same
   run (liac-arff's COO return type into a ``scipy.sparse`` CSR matrix, in this process), the
   stored file's size against the uploaded file's, and the API process's RSS growth during the
   upload (its peak RSS, ``VmHWM``, reset through ``/proc/<pid>/clear_refs`` before each upload,
   minus its RSS before). Each upload is repeated ``--repeats`` times with a distinct comment
   line appended (so that it is a new dataset each time); the best time of each is reported,
   and the RSS growth of the worst.
2. **Serving large forests**: one ``rf`` forest is fitted in this process on generated data with
   many labels (its size grows with labels x nodes), pickled as four distinct artifacts (a
   marker attribute differs) and registered as four model versions, as a training job would
   register them. The API is started with ``LABELSERVE_MODEL_CACHE_MB`` (default 1000) and
   each model is asked for a prediction in turn, twice round; the table shows the API's peak
   and final RSS and the cache's hits, once with the bound and once with a bound larger than
   all four (what a count-bounded cache did). Then a fifth and a sixth copy are registered while
   an API runs, with ``LABELSERVE_WARM_NEW_VERSIONS`` off and on: the time of the first and the
   second request of each (with warming on, sent once the API logged the version warmed; each
   API first predicts with ``forest0``, so that the process's own first-prediction costs are
   not counted).

3. **Trainings with CSR inside** (``--skip-training``): bibtex-train uploaded, then ``br``,
   ``mlknn`` and ``rf`` trained by the API's local pool; each job's ``trained`` log line gives
   the fit's measured resident growth and peak (``VmHWM`` reset before the fit) beside its
   estimate and the artifact's size, shown with the size a dense n x d float64 copy would
   have. Then ``rf`` on a generated set of bibtex's size (4880 x 1836, the same density) with
   1,000 labels: submitted with its defaults (refused at submit, or trained), then with the
   ``max_depth`` its refusal suggests.
4. **Answers** (``--skip-answers``): a ``br`` model of 1,000 labels (generated, 400 x 20) asked
   for a 3000-row ``ranking`` (refused with the advice, or answered), then for the ``scores``
   output of the same rows: status, answer bytes per score, API RSS growth.

Targets (issue 22): bibtex-train stored at most 3x the file; its upload at most 2x the bare
sparse read; RSS growth during the upload under 150 MB; four forests served within 1.3 GB RSS
with a 1000 MB cache; br, mlknn, rf on bibtex with no dense n x d copy in the job (the peak
beside the dense size); the 1,000-label forest trained within LABELSERVE_MAX_MODEL_MB or refused
at submit, never a dead worker; estimate vs artifact within a factor of 2; the 3000 x 1000
ranking refused or answered within 200 MB of API RSS growth, its scores output under 15 bytes a
score.

Run: ``.venv/bin/python -m benchmarks.scale [--repeats 3] [--cache-mb 1000] [--trees 25]
[--skip-forests] [--skip-uploads]``. Needs ``../shared/data`` (the upload part is skipped without it). Every
process it starts is stopped on exit.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import arff
import httpx
import numpy as np
import scipy.sparse as sp

from app.methods.catalog import get_method
from app.registry.versions import library_versions, register_version
from app.storage.db import Database
from app.storage.store import Store
from benchmarks import datasets as bd
from benchmarks.serving import Processes

ROOT = Path(__file__).resolve().parents[1]
SETS = (("bibtex", "bibtex-train", "bibtex"), ("tmc2007", "tmc2007-500-train", "tmc2007-500"))
MB = 1024 * 1024


def rss(pid: int, field: str = "VmRSS") -> int:
    """A memory figure of ``/proc/<pid>/status`` in bytes (VmRSS now, VmHWM the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak(pid: int) -> None:
    """Make VmHWM the current RSS (``clear_refs`` 5), so a later VmHWM is this interval's peak."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def bare_sparse_read(content: bytes) -> tuple[float, sp.csr_matrix]:
    """liac-arff's COO decoding of the file into a CSR matrix: the floor any sparse upload pays."""
    start = time.perf_counter()
    data, rows, cols = arff.load(io.StringIO(content.decode()), encode_nominal=True, return_type=arff.COO)["data"]
    matrix = sp.csr_matrix(
        (np.array(data, dtype=np.float64), (np.array(rows), np.array(cols))), shape=(max(rows) + 1, max(cols) + 1)
    )
    return time.perf_counter() - start, matrix


@dataclass
class UploadRow:
    name: str
    file_bytes: int
    bare_s: float
    upload_s: float
    stored_bytes: int
    storage: str
    density: float
    rss_growth: int


def measure_uploads(base: str, pid: int, repeats: int) -> list[UploadRow]:
    rows = []
    folder = bd.require_data_dir() / "multilabel"
    for directory, stem, xml in SETS:
        content = (folder / directory / f"{stem}.arff").read_bytes()
        labels = (folder / directory / f"{xml}.xml").read_bytes()
        bare = min(bare_sparse_read(content)[0] for _ in range(repeats))
        best, growth, body = float("inf"), 0, {}
        for i in range(repeats):
            variant = content.rstrip(b"\r\n") + f"\n% benchmark run {time.time_ns()} {i}\n".encode()
            before = rss(pid)
            reset_peak(pid)
            start = time.perf_counter()
            r = httpx.post(
                base + "/datasets",
                files={"file": (f"{stem}.arff", variant), "labels_file": (f"{xml}.xml", labels)},
                timeout=600,
            )
            elapsed = time.perf_counter() - start
            if r.status_code != 201:
                raise RuntimeError(f"upload of {stem}: {r.status_code} {r.text[:500]}")
            best, growth, body = min(best, elapsed), max(growth, rss(pid, "VmHWM") - before), r.json()
        rows.append(
            UploadRow(stem, len(content), bare, best, body["stored_bytes"], body["storage"], body["density"], growth)
        )
    return rows


def forest(n: int, d: int, q: int, trees: int, seed: int = 0) -> object:
    """An ``rf`` model of many labels: every node of every tree holds a (q x 2) value array."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = (X @ rng.normal(size=(d, q)) + rng.normal(size=(n, q)) > 0.5).astype(np.float64)
    spec = get_method("rf")
    assert spec is not None
    return spec.build({"n_estimators": trees, "random_state": seed}).fit(X, Y)


def save_forests(store: Store, model: object, copies: int, first: int = 0) -> list[str]:
    """Distinct artifacts of the forest (a marker attribute differs): their sha256s."""
    shas = []
    for i in range(first, first + copies):
        model.benchmark_copy_ = i  # type: ignore[attr-defined]
        shas.append(store.save_artifact(model))
    return shas


def register_forest(database_url: str, store: Store, name: str, sha: str, d: int, q: int) -> None:
    """Register an artifact as a version, as a training job registers one."""
    with Database(database_url).session() as session:
        register_version(
            session,
            store,
            name,
            method="rf",
            params={},
            dataset_id=None,
            dataset_sha256="0" * 64,
            feature_names=[f"f{j}" for j in range(d)],
            label_names=[f"l{k}" for k in range(q)],
            training_seconds=0.0,
            warnings=[],
            library_versions=library_versions(),
            artifact_sha256=sha,
            job_id=None,
            selection=None,
        )


def first_request(
    procs: Processes, env: dict[str, str], url: str, store: Store, sha: str, d: int, q: int, warm: bool
) -> tuple[float, float, float]:
    """A forest registered while the API runs (``LABELSERVE_WARM_NEW_VERSIONS`` on or off), then
    asked for a prediction twice: (seconds from registration to the 'warmed' log line or 0,
    seconds of the first request, of the second)."""
    name = f"fresh-{'warm' if warm else 'cold'}"
    command = ["-m", "app.client.cli", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
    base, _ = procs.start(name, command, env | {"LABELSERVE_WARM_NEW_VERSIONS": str(warm).lower()}, "/ready")
    log = procs.logs / f"{name}.log"
    # the process's own first-prediction costs (about 0.25 s: imports on first use, the database
    # connection), paid by a prediction of a forest registered before, so they are not counted below
    body = {"model": "forest0", "instances": np.random.default_rng(1).random((5, d)).tolist()}
    if httpx.post(base + "/predict", json=body, timeout=600).status_code != 200:
        raise RuntimeError(f"{name}: the prediction of forest0 failed")
    start = time.perf_counter()
    register_forest(url, store, name, sha, d, q)
    warmed = 0.0
    if warm:
        deadline = time.monotonic() + 300
        while '"message":"warmed"' not in log.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} was not warmed; see {log}")
            time.sleep(0.1)
        warmed = time.perf_counter() - start
    body = {"model": name, "instances": np.random.default_rng(1).random((5, d)).tolist()}
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        r = httpx.post(base + "/predict", json=body, timeout=600)
        if r.status_code != 200:
            raise RuntimeError(f"predict {name}: {r.status_code} {r.text[:300]}")
        seconds.append(time.perf_counter() - start)
    procs.stop()
    return warmed, seconds[0], seconds[1]


def serve_forests(
    procs: Processes, env: dict[str, str], cache_mb: float, d: int, copies: int
) -> tuple[int, int, int, str]:
    """Start the API with the cache bound, predict with each forest twice round: RSS at start,
    peak RSS, final RSS, cache hits."""
    command = ["-m", "app.client.cli", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
    base, pid = procs.start(
        f"forests-{cache_mb:g}", command, env | {"LABELSERVE_MODEL_CACHE_MB": str(cache_mb)}, "/ready"
    )
    start = rss(pid)
    reset_peak(pid)
    body = {"instances": np.random.default_rng(1).random((5, d)).tolist()}
    for _ in range(2):
        for i in range(copies):
            r = httpx.post(base + "/predict", json={"model": f"forest{i}", **body}, timeout=600)
            if r.status_code != 200:
                raise RuntimeError(f"predict forest{i}: {r.status_code} {r.text[:300]}")
    peak, now = rss(pid, "VmHWM"), rss(pid)
    metrics = httpx.get(base + "/metrics", timeout=30).text
    hits = next((line.split()[-1] for line in metrics.splitlines() if 'lookups_total{result="hit"}' in line), "?")
    procs.stop()
    return start, peak, now, hits


@dataclass
class TrainingRow:
    set: str
    method: str
    params: dict
    status: int | str
    detail: str
    memory: dict
    seconds: float


def _trained_lines(log: Path) -> dict[str, dict]:
    """The ``trained`` JSON lines of the API's log (its pool processes write there too), by job id."""
    found = {}
    for line in log.read_text(errors="replace").splitlines():
        if '"message":"trained"' in line:
            record = json.loads(line[line.index("{") :])
            found[record["job_id"]] = record.get("memory_mb", {})
    return found


def _train(
    base: str, dataset_id: str, method: str, params: dict, log: Path, name: str | None = None
) -> tuple[int | str, str, dict, float]:
    start = time.perf_counter()
    r = httpx.post(
        base + "/train?wait=true&timeout=3000",
        json={
            "method": method,
            "dataset_id": dataset_id,
            "model_name": name or f"{method}-{time.time_ns()}",
            "params": params,
        },
        timeout=3600,
    )
    elapsed = time.perf_counter() - start
    if r.status_code != 200:
        return r.status_code, r.json()["detail"][0]["msg"] if r.status_code == 422 else r.text[:300], {}, elapsed
    job = r.json()
    return job["status"], job.get("error") or "", _trained_lines(log).get(job["id"], {}), elapsed


def generated_sparse_arff(n: int, d: int, q: int, density: float, seed: int = 0) -> bytes:
    """A sparse ARFF of n x d non-negative features (``density`` stored) and q labels (the last q
    attributes, Mulan's layout) that depend on them, at bibtex's label density (about 2.4 %)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr", data_rvs=lambda k: np.ones(k))
    scores = X @ rng.normal(size=(d, q)) + rng.normal(scale=2.0, size=(n, q))
    Y = scores > np.quantile(scores, 0.976, axis=0)
    out = io.StringIO()
    out.write("@relation generated\n")
    for j in range(d):
        out.write(f"@attribute f{j} numeric\n")
    for j in range(q):
        out.write(f"@attribute l{j} {{0,1}}\n")
    out.write("@data\n")
    for i in range(n):
        cells = [f"{j} 1" for j in X.indices[X.indptr[i] : X.indptr[i + 1]]]
        cells += [f"{d + j} 1" for j in np.flatnonzero(Y[i])]
        out.write("{" + ",".join(cells) + "}\n")
    return out.getvalue().encode()


def _upload(base: str, name: str, content: bytes, form: dict | None = None, extra: dict | None = None) -> dict:
    files = {"file": (name, content), **(extra or {})}
    r = httpx.post(base + "/datasets", files=files, data=form or {}, timeout=600)
    if r.status_code != 201:
        raise RuntimeError(f"upload of {name}: {r.status_code} {r.text[:500]}")
    return r.json()


def measure_trainings(base: str, log: Path) -> tuple[list[TrainingRow], dict[str, tuple[int, int, int]]]:
    """The bibtex trainings and the 1,000-label forest; also each set's (n, d, non-zeros)."""
    folder = bd.require_data_dir() / "multilabel" / "bibtex"
    bibtex = _upload(
        base,
        "bibtex-train.arff",
        (folder / "bibtex-train.arff").read_bytes(),
        extra={"labels_file": ("bibtex.xml", (folder / "bibtex.xml").read_bytes())},
    )
    n, d = bibtex["n_samples"], bibtex["n_features"]
    generated = _upload(
        base,
        "wide.arff",
        generated_sparse_arff(n, d, 1000, bibtex["density"]),
        form={"label_count": "1000"},
    )
    shapes = {
        "bibtex-train": (n, d, bibtex["n_labels"], round(bibtex["density"] * n * d)),
        "generated, 1000 labels": (n, d, 1000, round(generated["density"] * n * d)),
    }
    plan = [
        ("bibtex-train", bibtex, "br", {}),
        ("bibtex-train", bibtex, "mlknn", {}),
        ("bibtex-train", bibtex, "rf", {}),
        ("bibtex-train", bibtex, "rf", {"n_estimators": 50}),
        ("generated, 1000 labels", generated, "rf", {}),
        ("generated, 1000 labels", generated, "rf", {"max_depth": 8}),
    ]
    rows = []
    for name, dataset, method, params in plan:
        status, detail, memory, seconds = _train(base, dataset["id"], method, params, log)
        rows.append(TrainingRow(name, method, params, status, detail, memory, seconds))
        print(f"  {name} {method} {params}: {status} {detail[:160]} {memory} ({seconds:.0f} s)", file=sys.stderr)
    return rows, shapes


def measure_answers(base: str, pid: int, log: Path) -> list[tuple[str, int, int, float, int]]:
    """(output, status, answer bytes, bytes per score, API RSS growth) of a 3000 x 1000-label answer."""
    rng = np.random.default_rng(0)
    n, d, q = 400, 20, 1000
    X = rng.random((n, d))
    Y = (X @ rng.normal(size=(d, q)) + rng.normal(size=(n, q)) > 1.0).astype(int)
    table = io.StringIO()
    np.savetxt(table, np.hstack([X, Y]), delimiter=",", fmt="%.6g")
    header = ",".join([*(f"f{j}" for j in range(d)), *(f"l{j}" for j in range(q))])
    dataset = _upload(base, "wide.csv", (header + "\n" + table.getvalue()).encode(), form={"label_count": str(q)})
    model = "wide-br"
    status, detail, _, _ = _train(base, dataset["id"], "br", {"max_iter": 200}, log, name=model)
    if status != "succeeded":
        raise RuntimeError(f"the 1,000-label br did not train: {status} {detail}")
    instances = rng.random((3000, d)).round(4).tolist()
    out = []
    for output in ("ranking", "scores"):
        before = rss(pid)
        reset_peak(pid)
        r = httpx.post(base + "/predict", json={"model": model, "instances": instances, "output": output}, timeout=600)
        growth = rss(pid, "VmHWM") - before
        per_score = len(r.content) / (3000 * q) if r.status_code == 200 else 0.0
        if r.status_code != 200:
            print(f"  {output}: {r.status_code} {r.text[:300]}", file=sys.stderr)
        out.append((output, r.status_code, len(r.content), per_score, growth))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-mb", type=float, default=1000)
    ap.add_argument("--trees", type=int, default=25, help="trees of the served forest")
    ap.add_argument("--labels", type=int, default=400, help="labels of the served forest")
    ap.add_argument("--rows", type=int, default=2000, help="training rows of the served forest")
    ap.add_argument("--skip-forests", action="store_true")
    ap.add_argument("--skip-uploads", action="store_true")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--skip-answers", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="labelserve-scale-"))
    procs = Processes(tmp)
    try:
        env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        url = f"sqlite:///{tmp / 'scale.db'}"
        env |= {"LABELSERVE_MODEL_DIR": str(tmp / "models"), "LABELSERVE_DATABASE_URL": url}
        env.pop("LABELSERVE_API_KEY", None)
        subprocess.run(
            [sys.executable, "-m", "app.client.cli", "migrate"], cwd=ROOT, env=env, check=True, capture_output=True
        )
        if args.skip_uploads:
            pass
        elif bd.data_dir() is not None:
            command = ["-m", "app.client.cli", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
            base, pid = procs.start("uploads", command, env, "/ready")
            uploads = measure_uploads(base, pid, args.repeats)
            procs.stop()
            print(
                f"\nUploads (best of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)\n"
            )
            print(
                "| file | file | bare sparse read | upload (to 201) | ratio | stored | stored / file | form, density | API RSS growth |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for u in uploads:
                print(
                    f"| {u.name} | {u.file_bytes / MB:.2f} MiB | {u.bare_s:.2f} s | {u.upload_s:.2f} s "
                    f"| {u.upload_s / u.bare_s:.2f} | {u.stored_bytes / MB:.2f} MiB | {u.stored_bytes / u.file_bytes:.2f} "
                    f"| {u.storage}, {u.density:.4f} | {u.rss_growth / MB:.0f} MB |"
                )
        else:
            print("../shared/data not found: uploads skipped", file=sys.stderr)
        if not (args.skip_training and args.skip_answers):
            command = ["-m", "app.client.cli", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
            base, pid = procs.start("training", command, env, "/ready")
            log = tmp / "training.log"
            if not args.skip_training and bd.data_dir() is not None:
                trainings, shapes = measure_trainings(base, log)
                print(f"\nTrainings (LABELSERVE_MAX_MODEL_MB default; load average {os.getloadavg()[0]:.1f})\n")
                print(
                    "| set (n x d, non-zeros) | dense n x d | method, params | result | fit peak (growth) | estimated peak | artifact | estimated model | est. / artifact |"
                )
                print("|---|---|---|---|---|---|---|---|---|")
                for t in trainings:
                    n, d, q, nnz = shapes[t.set]
                    m = t.memory
                    ratio = f"{m['estimate_model'] / m['artifact']:.2f}" if m.get("artifact") else "-"
                    result = t.status if t.status == "succeeded" else f"{t.status}: {t.detail[:200]}"
                    print(
                        f"| {t.set} ({n} x {d}, {q} labels, {nnz} nnz) | {8 * n * d / MB:.0f} MB | {t.method} {json.dumps(t.params)} "
                        f"| {result} | {m.get('measured_peak', '-')} MB | {m.get('estimate_peak', '-')} MB "
                        f"| {m.get('artifact', '-')} MB | {m.get('estimate_model', '-')} MB | {ratio} |"
                    )
            if not args.skip_answers:
                answers = measure_answers(base, pid, log)
                print("\nA 3000-row answer of a 1,000-label model (LABELSERVE_MAX_ANSWER_CELLS default)\n")
                print("| output | status | answer | bytes per score | API RSS growth |")
                print("|---|---|---|---|---|")
                for output, status, size, per_score, growth in answers:
                    print(f"| {output} | {status} | {size / MB:.2f} MiB | {per_score:.2f} | {growth / MB:.0f} MB |")
            procs.stop()
        if not args.skip_forests:
            d, q, copies = 20, args.labels, 4
            start = time.perf_counter()
            model = forest(args.rows, d, q, args.trees)
            fit_s = time.perf_counter() - start
            store = Store(tmp / "models")
            shas = save_forests(store, model, copies)
            fresh = save_forests(store, model, 2, first=copies)  # registered while an API runs
            del model
            for i, sha in enumerate(shas):
                register_forest(url, store, f"forest{i}", sha, d, q)
            sizes = [store.artifact_size(sha) for sha in shas]
            print(
                f"\nServing {copies} forests ({args.trees} trees, {args.rows} rows x {d} features x {q} labels, fitted in "
                f"{fit_s:.0f} s; artifacts {', '.join(f'{s / MB:.0f}' for s in sizes)} MiB)\n"
            )
            print("| LABELSERVE_MODEL_CACHE_MB | API RSS at start | API peak RSS | API RSS after | cache hits (of 8) |")
            print("|---|---|---|---|---|")
            for cache_mb in (args.cache_mb, 100 * args.cache_mb):
                start_rss, peak, now, hits = serve_forests(procs, env, cache_mb, d, copies)
                print(
                    f"| {cache_mb:g} | {start_rss / MB:,.0f} MB | {peak / MB:,.0f} MB | {now / MB:,.0f} MB | {hits} |"
                )
            print(
                f"\nThe first request of a version registered while the API runs (load average {os.getloadavg()[0]:.1f})\n"
            )
            print("| LABELSERVE_WARM_NEW_VERSIONS | registered to warmed | first /predict | second /predict |")
            print("|---|---|---|---|")
            for warm, sha in zip((False, True), fresh):
                warmed, first, second = first_request(procs, env, url, store, sha, d, q, warm)
                print(
                    f"| {str(warm).lower()} | {f'{warmed:.1f} s' if warm else '-'} | {first:.2f} s | {second:.2f} s |"
                )
        return 0
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
