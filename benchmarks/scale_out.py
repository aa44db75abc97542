"""Scale-out on the Celery backend: throughput with 1 vs 2 workers, and /predict latency under load.

Issue 7 targets, measured as ratios within one run (never as absolute timings):

* 4 trainings submitted at once: wall time with 1 worker divided by wall time with 2 workers
  (ideal: 2.0 when the two workers get a core each);
* ``POST /predict`` latency (p50/p95 over a bounded number of sequential requests, 10
  instances each, one every 50 ms: steady light traffic, so that the measuring client does not
  itself take the cores the workers need) while those trainings run, against the same API
  idle: at most 2x.

Everything is real and local: a ``labelserve serve`` API process (uvicorn, 127.0.0.1 only,
``LABELSERVE_JOB_BACKEND=celery``), ``labelserve worker --concurrency 1`` processes, the
machine's PostgreSQL (a throw-away database) and Redis (a dedicated database number, flushed).
The training is ELCFS with a fixed iteration count (``tol=0``) on generated data, so every job
does the same amount of single-threaded work; wall time is from the first job's creation to
the last one's end, from the jobs' own timestamps. BLAS threads are 1 in every process.

``--nice N`` starts the workers with that niceness: the set-up to use when the API and the
workers share a machine, so that training yields the CPU to requests.

Run: ``.venv/bin/python -m benchmarks.scale_out [--quick] [--nice 10]``. Skips cleanly (exit 0)
when PostgreSQL or Redis is not reachable. No data folder needed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import io  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = os.environ.get(
    "LABELSERVE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("LABELSERVE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
TRAININGS = 4
PACE = 0.05  # seconds between /predict requests: the client must not eat the cores it measures


def csv_upload(X: np.ndarray, Y: np.ndarray) -> bytes:
    out = io.StringIO()
    out.write(",".join([f"f{j}" for j in range(X.shape[1])] + [f"l{j}" for j in range(Y.shape[1])]) + "\n")
    np.savetxt(out, np.hstack([X, Y]), delimiter=",", fmt="%.17g")
    return out.getvalue().encode()


def multilabel(n: int, d: int, q: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = (X[:, :q] + 0.2 * rng.standard_normal((n, q)) > 0.5).astype(float)
    return X, Y


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentiles(samples: list[float]) -> tuple[float, float]:
    q = np.percentile(np.array(samples) * 1000, [50, 95])
    return float(q[0]), float(q[1])


class Cluster:
    """The API and worker subprocesses, each in its own process group, always stopped."""

    def __init__(self, env: dict[str, str], logs: Path, nice: int) -> None:
        self.env, self.logs, self.nice = env, logs, nice
        self.procs: list[subprocess.Popen[bytes]] = []

    def _start(self, args: list[str], name: str, nice: int = 0) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        prefix = ["nice", "-n", str(nice)] if nice else []
        proc = subprocess.Popen(
            prefix + [sys.executable, "-m", "app.client.cli", *args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def api(self, port: int) -> httpx.Client:
        self._start(["serve", "--host", "127.0.0.1", "--port", str(port)], "api")
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/health").status_code == 200:
                    return client
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start; see {self.logs}/api.log")
            time.sleep(0.2)

    def worker(self) -> None:
        from app.jobs.celery_backend import CelerySettings, make_celery

        proc = self._start(["worker", "--concurrency", "1"], f"worker-{len(self.procs)}", self.nice)
        # with `nice`, the Popen pid is still the worker's (nice execs it)
        name = f"labelserve-{proc.pid}@{socket.gethostname()}"
        control = make_celery(CelerySettings(broker_url=self.env["LABELSERVE_BROKER_URL"]))
        deadline = time.monotonic() + 60
        try:
            while not control.control.ping(destination=[name], timeout=0.5):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"a worker did not start; see {self.logs}")
        finally:
            control.close()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def measure_latency(client: httpx.Client, body: dict, count: int, pace: float = PACE) -> list[float]:
    """``count`` requests, one every ``pace`` seconds (light steady traffic, not a flood)."""
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        r = client.post("/predict", json=body)
        elapsed = time.perf_counter() - t0
        r.raise_for_status()
        samples.append(elapsed)
        time.sleep(max(0.0, pace - elapsed))
    return samples


def run_trainings(
    client: httpx.Client, dataset_id: str, iterations: int, predict_body: dict, max_requests: int
) -> tuple[float, list[float]]:
    """Submit the trainings at once; send /predict requests until they have all ended."""
    ids = []
    for i in range(TRAININGS):
        r = client.post(
            "/train",
            json={
                "method": "elcfs",
                "dataset_id": dataset_id,
                "model_name": f"load{i}",
                "params": {"max_iter": iterations, "tol": 0.0},
            },
        )
        r.raise_for_status()
        ids.append(r.json()["job_id"])
    samples: list[float] = []
    deadline = time.monotonic() + 600
    jobs: list[dict] = []
    while time.monotonic() < deadline:
        if len(samples) < max_requests:
            samples += measure_latency(client, predict_body, 5)
        else:
            time.sleep(0.25)
        jobs = [client.get(f"/jobs/{j}").json() for j in ids]
        if all(job["status"] in ("succeeded", "failed", "cancelled") for job in jobs):
            break
    else:
        raise RuntimeError("trainings did not finish within 600 s")
    failed = [job for job in jobs if job["status"] != "succeeded"]
    if failed:
        raise RuntimeError(f"a training did not succeed: {failed[0]}")
    start = min(datetime.fromisoformat(job["created_at"]) for job in jobs)
    end = max(datetime.fromisoformat(job["finished_at"]) for job in jobs)
    return (end - start).total_seconds(), samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter trainings, fewer requests")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the worker processes")
    args = ap.parse_args(argv)
    iterations = 30000 if args.quick else 100000
    idle_requests = 60 if args.quick else 200

    import redis
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
        admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        print(f"skipped: PostgreSQL ({POSTGRES_ADMIN_URL}) or Redis ({REDIS_URL}) not reachable: {exc}")
        return 0
    redis.Redis.from_url(REDIS_URL).flushdb()
    db_name = f"labelserve_bench_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db_name}"'))
    work = Path(tempfile.mkdtemp(prefix="labelserve-scale-out-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
    env.update(
        LABELSERVE_DATABASE_URL=make_url(POSTGRES_ADMIN_URL)
        .set(database=db_name)
        .render_as_string(hide_password=False),
        LABELSERVE_MODEL_DIR=str(work / "store"),
        LABELSERVE_JOB_BACKEND="celery",
        LABELSERVE_BROKER_URL=REDIS_URL,
        LABELSERVE_LOG_LEVEL="WARNING",
    )
    cluster = Cluster(env, work, args.nice)
    rows: list[tuple[str, str, str, str]] = []
    try:
        client = cluster.api(free_port())
        X, Y = multilabel(600, 20, 5, seed=0)
        served = client.post(
            "/datasets",
            files={"file": ("served.csv", csv_upload(X, Y), "text/csv")},
            data={"label_count": "5", "name": "served"},
        ).json()
        Xl, Yl = multilabel(300, 60, 4, seed=1)
        heavy = client.post(
            "/datasets",
            files={"file": ("heavy.csv", csv_upload(Xl, Yl), "text/csv")},
            data={"label_count": "4", "name": "heavy"},
        ).json()
        cluster.worker()
        r = client.post(
            "/train?wait=true",
            json={"method": "mlknn", "dataset_id": served["id"], "model_name": "served", "params": {"k": 10}},
        )
        assert r.json()["status"] == "succeeded", r.text
        body = {"model": "served", "instances": X[:10].tolist(), "output": "ranking"}
        measure_latency(client, body, 20, pace=0)  # warm: model cache, connections

        idle = percentiles(measure_latency(client, body, idle_requests))
        rows.append(("idle (1 worker, no job)", "-", f"{idle[0]:.1f}", f"{idle[1]:.1f}"))
        one, busy1 = run_trainings(client, heavy["id"], iterations, body, 3 * idle_requests)
        p1 = percentiles(busy1)
        rows.append((f"{TRAININGS} trainings, 1 worker", f"{one:.1f}", f"{p1[0]:.1f}", f"{p1[1]:.1f}"))
        cluster.worker()
        two, busy2 = run_trainings(client, heavy["id"], iterations, body, 3 * idle_requests)
        p2 = percentiles(busy2)
        rows.append((f"{TRAININGS} trainings, 2 workers", f"{two:.1f}", f"{p2[0]:.1f}", f"{p2[1]:.1f}"))
    finally:
        cluster.stop()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))
        admin.dispose()
        redis.Redis.from_url(REDIS_URL).flushdb()
        shutil.rmtree(work, ignore_errors=True)

    header = ("run", "wall s", "predict p50 ms", "predict p95 ms")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [
        f"scale_out: ELCFS max_iter={iterations} on 300x60 generated data, {TRAININGS} jobs; "
        f"/predict of 10 instances (ML-kNN) every {PACE * 1000:g} ms, {idle_requests} idle requests; "
        f"workers nice {args.nice}; "
        f"{os.cpu_count()} CPUs",
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        *("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows),
        "",
        f"speed-up 1 -> 2 workers (wall ratio): {one / two:.2f}x   (ideal 2.00x)",
        f"predict latency while training vs idle, 1 worker:  p50 {p1[0] / idle[0]:.2f}x  p95 {p1[1] / idle[1]:.2f}x",
        f"predict latency while training vs idle, 2 workers: "
        f"p50 {p2[0] / idle[0]:.2f}x  p95 {p2[1] / idle[1]:.2f}x   (target <= 2x)",
    ]
    text_out = "\n".join(lines)
    print(text_out)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    suffix = f"_nice{args.nice}" if args.nice else ""
    (results / f"scale_out{suffix}.md").write_text("```\n" + text_out + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
