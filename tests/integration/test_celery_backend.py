"""The Celery job backend on the machine's real Redis and PostgreSQL, with real worker processes.

Each test gets a throw-away PostgreSQL database, a queue of its own on Redis (database 15 unless
``LABELSERVE_TEST_REDIS_URL`` says otherwise; the unique queue keeps test runs that share the
server from taking each other's jobs), a fresh model store, the API in-process with
``job_backend="celery"``, and ``labelserve worker`` subprocesses in their own process groups,
always killed at teardown. Short heartbeat settings make the reaper answer in seconds.
Skipped when Redis or PostgreSQL is not reachable.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import Popen

import pytest
from fastapi.testclient import TestClient

from app.jobs.celery_backend import CelerySettings, make_celery
from app.main import create_app
from app.storage.db import Database, migrate
from app.storage.orm import Job, ModelVersion
from tests.helpers import long_job, make_multilabel, throwaway_postgres, train, upload_csv, wait_status

# a Redis broker and a PostgreSQL database shared by the API and the worker processes
pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

REDIS_URL = os.environ.get("LABELSERVE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def redis_url() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {exc}")
    return REDIS_URL


@pytest.fixture
def pg_url(postgres_admin: str) -> Iterator[str]:
    """A throw-away PostgreSQL database, migrated (as ``tests.conftest.database_url`` makes them)."""
    with throwaway_postgres(postgres_admin) as url:
        migrate(url)
        yield url


@pytest.fixture
def heartbeat_timeout() -> float:
    """Short, so that the reaper answers within seconds; a test may parametrize it."""
    return 3.0


@pytest.fixture
def service(redis_url: str, pg_url: str, tmp_path: Path, heartbeat_timeout: float) -> Iterator[CelerySettings]:
    import redis

    queue = f"labelserve-test-{uuid.uuid4().hex[:12]}"
    yield CelerySettings(
        database_url=pg_url,
        model_dir=tmp_path / "store",
        job_backend="celery",
        broker_url=redis_url,
        max_upload_mb=5,
        heartbeat_seconds=0.3,
        heartbeat_timeout=heartbeat_timeout,
        reap_seconds=0.5,
        queue=queue,
    )
    redis.Redis.from_url(redis_url).delete(queue)  # messages left by a test that failed midway


@pytest.fixture
def client(service: CelerySettings) -> Iterator[TestClient]:
    with TestClient(create_app(service)) as test_client:
        yield test_client


def worker_env(settings: CelerySettings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
    env.update(
        LABELSERVE_DATABASE_URL=settings.resolved_database_url,
        LABELSERVE_MODEL_DIR=str(settings.model_dir),
        LABELSERVE_JOB_BACKEND="celery",
        LABELSERVE_BROKER_URL=settings.broker_url,
        LABELSERVE_HEARTBEAT_SECONDS=str(settings.heartbeat_seconds),
        LABELSERVE_HEARTBEAT_TIMEOUT=str(settings.heartbeat_timeout),
        LABELSERVE_QUEUE=settings.queue,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
    )
    return env


@pytest.fixture
def workers(service: CelerySettings, tmp_path: Path) -> Iterator[Callable[[int], list[Popen]]]:
    """``workers(n)`` starts n ``labelserve worker`` processes and waits until each answers a ping."""
    started: list[Popen] = []
    control = make_celery(service)

    def start(n: int) -> list[Popen]:
        procs = []
        for _ in range(n):
            log = (tmp_path / f"worker-{len(started)}.log").open("wb")
            proc = Popen(
                [sys.executable, "-m", "app.client.cli", "worker", "--concurrency", "1"],
                cwd=ROOT,
                env=worker_env(service),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg reaches the pool too
            )
            started.append(proc)
            procs.append(proc)
        names = {f"labelserve-{p.pid}@{socket.gethostname()}" for p in procs}
        deadline = time.monotonic() + READY_TIMEOUT
        while names:
            assert time.monotonic() < deadline, f"workers did not start; see {tmp_path}/worker-*.log"
            assert all(p.poll() is None for p in procs), f"a worker exited; see {tmp_path}/worker-*.log"
            for reply in control.control.ping(destination=list(names), timeout=0.5):
                names -= set(reply)
        return procs

    yield start
    control.close()
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def job_row(settings: CelerySettings, job_id: str) -> Job:
    with Database(settings.resolved_database_url).session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def worker_pid(settings: CelerySettings, job_id: str) -> int:
    host, _, pid = job_row(settings, job_id).worker.rpartition(":")
    assert host == socket.gethostname()
    return int(pid)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_iterating(client: TestClient, job_id: str) -> dict:
    """Wait until a long ELCFS job is past loading and reporting iterations."""
    job = wait_status(client, job_id, ("running",))
    deadline = time.monotonic() + 60
    while job["stage"] != "iterations":
        assert time.monotonic() < deadline and job["status"] == "running", job
        time.sleep(0.05)
        job = client.get(f"/jobs/{job_id}").json()
    return job


def versions(settings: CelerySettings) -> int:
    with Database(settings.resolved_database_url).session() as session:
        return session.query(ModelVersion).count()


def long_dataset(client: TestClient) -> dict:
    X, Y = make_multilabel(n=300, d=60, q=4)
    return upload_csv(client, X, Y, "long")


def test_train_predict_and_batch_predict_run_on_a_worker(client, workers, service):
    (worker,) = workers(1)
    X, Y = make_multilabel(n=60)
    dataset = upload_csv(client, X, Y)
    job = train(client, "mlknn", dataset["id"], "remote", k=5)
    assert job["model"] == {"name": "remote", "version": 1}
    assert worker_pid(service, job["id"]) not in (os.getpid(), worker.pid)  # a pool process ran it
    r = client.post("/predict", json={"model": "remote", "instances": X[:3].tolist()})
    assert r.status_code == 200 and len(r.json()["predictions"]) == 3

    client.app.state.settings.batch_job_rows = 10
    r = client.post("/predict", json={"model": "remote", "dataset_id": dataset["id"], "output": "ranking"})
    assert r.status_code == 202, r.text
    batch = wait_status(client, r.json()["id"], ("succeeded", "failed"))
    assert batch["status"] == "succeeded", batch
    result = client.get(batch["result_url"])
    assert result.status_code == 200 and len(result.text.strip().splitlines()) == 60


def test_cancel_stops_the_running_process_and_an_api_restart_leaves_live_jobs_alone(client, workers, service):
    workers(1)
    dataset = long_dataset(client)
    job_id = long_job(client, dataset["id"], "long")
    wait_iterating(client, job_id)
    pid = worker_pid(service, job_id)
    first_beat = job_row(service, job_id).heartbeat_at
    # a second API process starting up (recover) must not fail a job a live worker is running,
    # even once more than heartbeat_timeout has passed since the job started
    time.sleep(service.heartbeat_timeout + 0.5)
    with TestClient(create_app(service)) as other_api:
        assert other_api.get(f"/jobs/{job_id}").json()["status"] == "running"
    assert job_row(service, job_id).heartbeat_at > first_beat

    r = client.delete(f"/jobs/{job_id}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    deadline = time.monotonic() + 20
    while alive(pid):  # revoked with terminate: the pool process is stopped, not left iterating
        assert time.monotonic() < deadline, "the cancelled job's process is still running"
        time.sleep(0.05)
    after = train(client, "mlknn", dataset["id"], "after")  # the worker took the next job
    assert after["model"]["version"] == 1
    assert client.get("/models/long").status_code == 404 and versions(service) == 1
    assert client.get(f"/jobs/{job_id}").json()["status"] == "cancelled"


# Celery notices a dead pool process within its 5 s pool-maintenance period; the heartbeat
# timeout must be longer for the redelivery, not the reaper, to be what settles the job (with
# room for a machine so loaded that the redelivery takes several times that)
@pytest.mark.parametrize("heartbeat_timeout", [30.0])
def test_pool_process_killed_mid_job_fails_the_job_at_redelivery(client, workers, service):
    workers(1)
    dataset = long_dataset(client)
    job_id = long_job(client, dataset["id"], "oom")
    wait_iterating(client, job_id)
    os.kill(worker_pid(service, job_id), signal.SIGKILL)  # as the OOM killer would
    job = wait_status(client, job_id, ("failed", "succeeded", "cancelled"), timeout=25)
    assert job["status"] == "failed" and "worker process died" in job["error"], job
    assert "heartbeat" not in job["error"]  # settled at redelivery, not later by the reaper
    assert client.get("/models/oom").status_code == 404 and versions(service) == 0
    assert train(client, "mlknn", dataset["id"], "next")["status"] == "succeeded"  # worker lives on


def test_worker_killed_mid_job_leaves_the_job_failed_and_no_version(client, workers, service):
    (worker,) = workers(1)
    dataset = long_dataset(client)
    job_id = long_job(client, dataset["id"], "killed")
    wait_iterating(client, job_id)
    os.killpg(worker.pid, signal.SIGKILL)  # the whole worker: main process and pool
    worker.wait(timeout=10)
    job = wait_status(client, job_id, ("failed", "succeeded", "cancelled"), timeout=30)
    assert job["status"] == "failed" and "heartbeat" in job["error"], job
    assert client.get("/models/killed").status_code == 404 and versions(service) == 0


def test_two_workers_run_two_jobs_at_once(client, workers, service):
    workers(2)
    dataset = long_dataset(client)
    jobs = [long_job(client, dataset["id"], f"par{i}") for i in range(2)]
    deadline = time.monotonic() + 60
    while True:  # both running at the same instant, in two different processes
        states = [client.get(f"/jobs/{j}").json() for j in jobs]
        if all(s["status"] == "running" and s["progress"] > 0 for s in states):
            break
        assert all(s["status"] in ("queued", "running") for s in states), states
        assert time.monotonic() < deadline, states
        time.sleep(0.05)
    assert len({worker_pid(service, j) for j in jobs}) == 2
    for j in jobs:
        assert client.delete(f"/jobs/{j}").status_code == 200
    assert versions(service) == 0


def test_waiters_hear_a_job_end_through_redis_not_by_polling(workers, service, tmp_path):
    """Two API processes with a one-minute fallback poll: the worker's announcement on Redis wakes
    a waiter in the API that queued the job and one in another API; a cancel in one wakes the other.
    The worker's pool process logs the job as JSON lines."""
    workers(1)
    slow = service.model_copy(update={"wait_poll_seconds": 60.0})
    with TestClient(create_app(slow)) as api, TestClient(create_app(slow)) as other_api:
        X, Y = make_multilabel(n=60)
        dataset = upload_csv(api, X, Y)
        body = {"method": "mlknn", "dataset_id": dataset["id"], "model_name": "heard", "params": {"k": 5}}
        started = time.monotonic()
        r = api.post("/train?wait=true", json=body)
        assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
        assert time.monotonic() - started < 30
        first = r.json()["id"]

        job_id = api.post("/train", json=body).json()["job_id"]
        started = time.monotonic()
        job = other_api.get(f"/jobs/{job_id}", params={"wait": 45}).json()
        assert job["status"] == "succeeded" and time.monotonic() - started < 30

        long_id = long_job(api, long_dataset(api)["id"], "long")
        wait_iterating(api, long_id)
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(other_api.get, f"/jobs/{long_id}", params={"wait": 45})
            time.sleep(1.0)
            assert api.delete(f"/jobs/{long_id}").status_code == 200
            started = time.monotonic()
            job = waiting.result(timeout=40).json()
        assert job["status"] == "cancelled" and time.monotonic() - started < 15
    logged = {}
    for line in (tmp_path / "worker-0.log").read_text().splitlines():
        if line.startswith("{") and json.loads(line).get("job_id") == first:
            logged.setdefault(json.loads(line)["message"], json.loads(line))
    assert {"job started", "job stage", "job succeeded"} <= set(logged), logged
    assert logged["job succeeded"]["seconds"] > 0 and logged["job started"]["kind"] == "train"
