"""What a small training costs through the API, step by step, against the estimator alone.

Issue 15's targets, as figures of one run: ``POST /train?wait=true`` (mlknn, k=10) plus one batch
``POST /predict`` of the test split, through a real ``labelserve serve`` on 127.0.0.1 (SQLite, a
temporary store, the local process pool), at most 0.04 s above the estimator's own fit + predict
in-process (``app.methods.mlknn.MLkNN`` on the same arrays), median of ``--repeats``; and at least
5x faster than scikit-multilearn-ng's ``MLkNN`` fit + predict (fitted the exact ML-kNN way, as in
``benchmarks.mlknn_speed``). The three are measured interleaved, round by round, so that the
load of a shared machine falls on each alike. BLAS threads are 1 for all of them.

The per-step table comes from the job's own JSON log lines (``job stage`` with the seconds
since the claim, ``trained`` with the fit's seconds, ``job succeeded``) and the job row's
timestamps, so it shows where the time of a real request goes: checks and commit before the
job exists, the hop to the pool process, the claim, the dataset load, the fit, the output
check, the artifact write and registry transaction, the wake-up of the waiting request, and
the batch prediction.

Issue 40's: with ``--inline`` (the arrays in the requests: the training data as ``data``, the
test rows as ``instances``) under 0.15 s on scene, with the estimator's own label sets.

Run: ``.venv/bin/python -m benchmarks.training_latency [--repeats 5] [--datasets scene yeast] [--inline]``.
Installs nothing: it needs the data folder (``../shared/data`` or ``LABELSERVE_DATA_DIR``) and,
for the comparison column, the ``bench`` extra (``pip install -e '.[bench]'``); it says what it
skips.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import orjson  # noqa: E402

from app.methods.mlknn import MLkNN  # noqa: E402
from benchmarks.datasets import data_dir, load_mulan  # noqa: E402

K = 10
STEPS = [
    ("request checks + job row committed", "submitted"),
    ("hop to the pool process (queued -> claimed)", "hop"),
    ("claim + job and dataset rows read", "claim"),
    ("dataset load (sha256 checked) + estimator built", "load"),
    ("fit", "fit"),
    ("output check on the training rows", "check"),
    ("artifact write + registry transaction", "save"),
    ("end committed -> waiting request answered", "wake"),
    ("batch POST /predict of the test split", "predict"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = workdir / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
    env |= {"LABELSERVE_MODEL_DIR": str(workdir / "store"), "LABELSERVE_LOG_LEVEL": "INFO"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.client.cli", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                return server, base, log
        except httpx.TransportError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"server did not become ready; see {log}")


def upload(client: httpx.Client, folder: Path, name: str, part: str) -> str:
    files = {
        "file": (f"{name}-{part}.arff", (folder / f"{name}-{part}.arff").read_bytes()),
        "labels_file": (f"{name}.xml", (folder / f"{name}.xml").read_bytes()),
    }
    response = client.post("/datasets", files=files, timeout=300)
    response.raise_for_status()
    return str(response.json()["id"])


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def api_round(client: httpx.Client, source: dict[str, Any], queries: dict[str, Any], name: str) -> dict[str, Any]:
    """One train?wait=true on ``source`` (a ``dataset_id`` or inline ``data``) + one batch
    predict of ``queries`` (a ``dataset_id`` or ``instances``); the wall times and the job record.
    Both bodies are encoded before the clock starts: the client's own JSON encoding is not the
    service's time."""
    train_body = orjson.dumps({"method": "mlknn", **source, "model_name": name, "params": {"k": K}})
    predict_body = orjson.dumps({"model": name, **queries})
    headers = {"content-type": "application/json"}
    asked = time.time()
    started = time.perf_counter()
    response = client.post("/train?wait=true", content=train_body, headers=headers, timeout=600)
    answered = time.time()
    trained = time.perf_counter()
    predicted = client.post("/predict", content=predict_body, headers=headers, timeout=600)
    done = time.perf_counter()
    job = response.json()
    assert response.status_code == 200 and job["status"] == "succeeded", job
    predicted.raise_for_status()
    labels = [item["labels"] for item in predicted.json()["predictions"]] if "instances" in queries else None
    return {
        "job": job,
        "asked": asked,
        "answered": answered,
        "total": done - started,
        "predict": done - trained,
        "labels": labels,
    }


def sources(client: httpx.Client, folder: Path, name: str, train: Any, test: Any, inline: bool) -> tuple[dict, dict]:
    """What a round trains on and predicts: the uploaded splits' ids, or the arrays inline (the
    training data as ``data``, the test rows as ``instances``, as a client holding arrays sends them)."""
    if inline:
        data = {"X": train.X.tolist(), "Y": train.Y.tolist(), "feature_names": train.feature_names}
        return {"data": data | {"label_names": train.label_names}}, {"instances": test.X.tolist()}
    return {"dataset_id": upload(client, folder, name, "train")}, {"dataset_id": upload(client, folder, name, "test")}


def own_round(train: Any, test: Any) -> float:
    """The estimator's own fit + predict, as the service builds it (k=10, its default scaling)."""
    started = time.perf_counter()
    MLkNN(k=K).fit(train.X, train.Y).predict(test.X)
    return time.perf_counter() - started


def skml_round(train: Any, test: Any) -> float:
    from skmultilearn.adapt import MLkNN as SkmlMLkNN

    lo, span = train.X.min(axis=0), np.ptp(train.X, axis=0)
    span[span == 0] = 1.0
    Xtr, Xte = (train.X - lo) / span, (test.X - lo) / span
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SkmlMLkNN(k=K, s=1.0, ignore_first_neighbours=1).fit(Xtr, train.Y.astype(int))
        model.ignore_first_neighbours = 0
        model.predict(Xte)
    return time.perf_counter() - started


def job_lines(log: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The server's JSON log lines of each job: job id -> message -> lines."""
    jobs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("job_id"):
            jobs.setdefault(entry["job_id"], {}).setdefault(entry["message"], []).append(entry)
    return jobs


def steps(result: dict[str, Any], lines: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Seconds per step of one round (see ``STEPS``)."""
    job = result["job"]
    stages = {entry["stage"]: entry["seconds"] for entry in lines.get("job stage", [])}
    fit = lines["trained"][0]["fit_seconds"]
    ended = lines["job succeeded"][0]["seconds"]
    created, claimed, finished = stamp(job["created_at"]), stamp(job["started_at"]), stamp(job["finished_at"])
    return {
        "submitted": created - result["asked"],
        "hop": claimed - created,
        "claim": stages["loading data"],
        "load": stages["checking"] - stages["loading data"] - fit,
        "fit": fit,
        "check": stages["saving"] - stages["checking"],
        "save": ended - stages["saving"],
        "wake": result["answered"] - finished,
        "predict": result["predict"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast"])
    parser.add_argument("--inline", action="store_true", help="send the arrays in the requests (no uploads)")
    args = parser.parse_args(argv)
    root = data_dir()
    if root is None:
        print("training_latency: data folder not found (../shared/data or LABELSERVE_DATA_DIR); skipping.")
        return 0
    try:
        import skmultilearn  # noqa: F401

        with_skml = True
    except ImportError:
        print("training_latency: scikit-multilearn-ng not installed (the 'bench' extra); no comparison column.")
        with_skml = False
    summary = [
        ("Inline arrays: " if args.inline else "Uploaded splits: ")
        + f"`POST /train?wait=true` + batch `POST /predict` of the test split (mlknn, k={K}), median of "
        f"{args.repeats}, against the same estimator's fit + predict in-process"
        + (" and scikit-multilearn-ng's `MLkNN` fit + predict" if with_skml else ""),
        "",
        "| data | API train + predict | estimator fit + predict | API overhead | scikit-multilearn-ng "
        "| scikit-multilearn-ng / API |",
        "|---|---|---|---|---|---|",
    ]
    breakdown: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server, base, log = start_server(Path(tmp))
        try:
            with httpx.Client(base_url=base) as client:
                rounds: dict[str, list[dict[str, Any]]] = {}
                for name in args.datasets:
                    folder = root / "multilabel" / name
                    train, test = load_mulan(name, "train"), load_mulan(name, "test")
                    source, queries = sources(client, folder, name, train, test, args.inline)
                    api_round(client, source, queries, f"warm-{name}")  # the pool process's first job
                    own_round(train, test)
                    api, own, skml = [], [], []
                    for i in range(args.repeats):
                        api.append(api_round(client, source, queries, f"mlknn-{name}-{i}"))
                        own.append(own_round(train, test))
                        if with_skml:
                            skml.append(skml_round(train, test))
                    rounds[name] = api
                    if args.inline:  # the service answers what the estimator itself decides
                        expected = MLkNN(k=K).fit(train.X, train.Y).predict(test.X).astype(bool)
                        names = np.asarray(train.label_names, dtype=object)
                        same = all(r["labels"] == [names[row].tolist() for row in expected] for r in api)
                        print(f"{name}: label sets equal to the estimator's in every round: {same}")
                    t_api = statistics.median(r["total"] for r in api)
                    t_own = statistics.median(own)
                    cells = [f"{t_api:.3f} s", f"{t_own:.3f} s", f"{t_api - t_own:+.3f} s"]
                    if skml:
                        t_skml = statistics.median(skml)
                        cells += [f"{t_skml:.3f} s", f"{t_skml / t_api:.1f}x"]
                    else:
                        cells += ["-", "-"]
                    summary.append(f"| {name} | " + " | ".join(cells) + " |")
            time.sleep(0.5)  # the last lines reach the log
            lines = job_lines(log)
            for name, api in rounds.items():
                breakdown[name] = [steps(r, lines[r["job"]["id"]]) for r in api]
        finally:
            server.terminate()
            server.wait(timeout=60)
    target = (
        "API train + predict < 0.15 s on scene"
        if args.inline
        else "overhead <= +0.040 s; scikit-multilearn-ng / API >= 5x"
    )
    summary += ["", f"targets: {target}", ""]
    names = list(breakdown)
    summary += [
        "Per step (milliseconds, median of the rounds; from the job's log lines and timestamps):",
        "",
        "| step | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, key in STEPS:
        cells = [f"{statistics.median(r[key] for r in breakdown[n]) * 1e3:.1f}" for n in names]
        summary.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(summary)
    print(text)
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"training_latency{'_inline' if args.inline else ''}.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
