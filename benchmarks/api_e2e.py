"""End-to-end cost through the HTTP API, against scikit-multilearn-ng's ML-kNN estimator.

Issue 3's end-to-end target: ``POST /train?wait=true`` (mlknn, K=10) plus one batch
``POST /predict`` of the test split, through a real ``labelserve serve`` process on 127.0.0.1
(SQLite + a temporary model store), at least 3x faster than scikit-multilearn-ng's ``MLkNN``
fit + predict in-process on the same data. The datasets are uploaded once (the ARFF + XML
files, as a user would), outside the timing. It also reports single-row ``/predict``
throughput and latency with 16 concurrent clients (a bounded number of requests, loopback only).

Run: ``.venv/bin/python -m benchmarks.api_e2e [--repeats 3] [--requests 2000]``. Needs the data
folder and the ``bench`` extra; skips cleanly without them.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from benchmarks.datasets import data_dir, load_mulan


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(store: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = os.environ | {"LABELSERVE_MODEL_DIR": str(store), "LABELSERVE_LOG_LEVEL": "WARNING"}
    server = subprocess.Popen(
        [sys.executable, "-m", "app.client.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                return server, base
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("server did not become ready")


def upload(client: httpx.Client, folder: Path, name: str, part: str) -> str:
    files = {
        "file": (f"{name}-{part}.arff", (folder / f"{name}-{part}.arff").read_bytes()),
        "labels_file": (f"{name}.xml", (folder / f"{name}.xml").read_bytes()),
    }
    response = client.post("/datasets", files=files, timeout=120)
    response.raise_for_status()
    return response.json()["id"]


def api_round(client: httpx.Client, method: str, train_id: str, test_id: str, name: str) -> float:
    start = time.perf_counter()
    job = client.post(
        "/train?wait=true",
        json={
            "method": method,
            "dataset_id": train_id,
            "model_name": name,
            "params": {"k": 10},
        },
        timeout=600,
    ).json()
    assert job["status"] == "succeeded", job
    predicted = client.post("/predict", json={"model": name, "dataset_id": test_id}, timeout=600)
    predicted.raise_for_status()
    return time.perf_counter() - start


def skml_round(name: str) -> float:
    from skmultilearn.adapt import MLkNN as SkmlMLkNN

    tr, te = load_mulan(name, "train"), load_mulan(name, "test")
    lo, span = tr.X.min(axis=0), np.ptp(tr.X, axis=0)
    span[span == 0] = 1.0
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SkmlMLkNN(k=10, s=1.0, ignore_first_neighbours=1).fit((tr.X - lo) / span, tr.Y.astype(int))
        model.ignore_first_neighbours = 0
        model.predict((te.X - lo) / span)
    return time.perf_counter() - start


def throughput(base: str, body: dict | None, requests: int, clients: int = 16) -> tuple[float, float, float]:
    """Requests/s, p50 and p95 latency (ms): POST /predict with ``body``, or GET /health."""
    latencies: list[float] = []

    def worker(count: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(count):
                t0 = time.perf_counter()
                if body is None:
                    client.get("/health").raise_for_status()
                else:
                    client.post("/predict", json=body).raise_for_status()
                latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, [requests // clients] * clients))
    elapsed = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=20)
    return len(latencies) / elapsed, statistics.median(latencies) * 1e3, q[18] * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--datasets", nargs="+", default=["scene", "yeast"])
    args = parser.parse_args(argv)
    root = data_dir()
    if root is None:
        print("api_e2e: data folder not found; skipping.")
        return 0
    try:
        import skmultilearn  # noqa: F401
    except ImportError:
        print("api_e2e: scikit-multilearn-ng not installed (the 'bench' extra); skipping.")
        return 0
    lines = [
        f"End to end through HTTP (train?wait=true + batch predict of the test split; median of {args.repeats})",
        f"  {'data':<8}{'mlknn API s':>12}{'dmknn API s':>12}{'skml fit+predict s':>20}{'skml/API':>10}{'dmknn/mlknn':>13}",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        server, base = start_server(Path(tmp))
        try:
            with httpx.Client(base_url=base) as client:
                for name in args.datasets:
                    folder = root / "multilabel" / name
                    train_id, test_id = upload(client, folder, name, "train"), upload(client, folder, name, "test")
                    api_round(client, "mlknn", train_id, test_id, "warm-up")
                    t_ml = statistics.median(
                        api_round(client, "mlknn", train_id, test_id, f"mlknn-{name}") for _ in range(args.repeats)
                    )
                    t_dm = statistics.median(
                        api_round(client, "dmknn", train_id, test_id, f"dmknn-{name}") for _ in range(args.repeats)
                    )
                    t_sk = statistics.median(skml_round(name) for _ in range(args.repeats))
                    lines.append(
                        f"  {name:<8}{t_ml:12.3f}{t_dm:12.3f}{t_sk:20.3f}{t_sk / t_ml:9.1f}x{t_dm / t_ml:12.2f}x"
                    )
                lines.append("  target: skml/API >= 3x")
                if "scene" in args.datasets:
                    instance = load_mulan("scene", "test").X[0].tolist()
                    body = {"model": "mlknn-scene", "instances": [instance]}
                    throughput(base, body, 200)  # warm the model cache and connections
                    lines.append(f"Serving, 16 concurrent clients, {args.requests} requests each row:")
                    for label, payload in (("GET /health (baseline)", None), ("POST /predict 1 row", body)):
                        rps, p50, p95 = throughput(base, payload, args.requests)
                        lines.append(f"  {label:<24}{rps:7.0f} req/s  p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
        finally:
            server.terminate()
            server.wait(timeout=30)
    text = "\n".join(lines)
    print(text)
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "api_e2e.md").write_text("```\n" + text + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
