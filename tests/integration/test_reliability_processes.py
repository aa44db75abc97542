"""Reliability with real processes: concurrent trainings, several API processes on one database,
clean stops and kill -9 (``labelserve serve`` subprocesses; see ``tests.helpers.LiveServer``)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.storage.orm import Job
from tests.helpers import LiveServer, csv_bytes, make_multilabel, throwaway_postgres

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow

# uvicorn re-raises the signal it stopped on once it has shut down cleanly
CLEAN_EXIT = (0, -signal.SIGTERM)
# quick liveness so that orphan detection happens within a test's patience
FAST_LIVENESS = {
    "LABELSERVE_HEARTBEAT_SECONDS": "0.5",
    "LABELSERVE_HEARTBEAT_TIMEOUT": "3",
    "LABELSERVE_REAP_SECONDS": "0.5",
}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[LiveServer]]:
    started: list[LiveServer] = []
    yield started
    for server in started:
        server.cleanup()


def serve(
    servers: list[LiveServer], tmp_path: Path, database_url: str, workers: int | None = None, **env: str
) -> LiveServer:
    server = LiveServer(
        tmp_path,
        {"LABELSERVE_DATABASE_URL": database_url, "LABELSERVE_AUTO_MIGRATE": "true"} | FAST_LIVENESS | env,
        workers=workers,
    )
    servers.append(server)
    return server.start()


def upload(client: httpx.Client, n: int = 60) -> str:
    X, Y = make_multilabel(n=n)
    response = client.post("/datasets", files={"file": ("d.csv", csv_bytes(X, Y))}, data={"label_count": "3"})
    assert response.status_code in (200, 201), response.text
    return str(response.json()["id"])


def start_long_job(client: httpx.Client, dataset_id: str, name: str = "long") -> str:
    response = client.post(
        "/train",
        json={
            "method": "elcfs",
            "dataset_id": dataset_id,
            "model_name": name,
            "params": {"max_iter": 1_000_000, "tol": 0.0},
        },
    )
    assert response.status_code == 202, response.text
    job_id = str(response.json()["job_id"])
    wait_job(client, job_id, ("running",))
    return job_id


def wait_job(client: httpx.Client, job_id: str, statuses: tuple[str, ...], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def job_row(database_url: str, job_id: str) -> Job:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return session.scalars(select(Job).where(Job.id == job_id)).one()
    finally:
        engine.dispose()


def test_concurrent_trainings_of_one_name_get_consecutive_versions(
    servers: list[LiveServer], tmp_path: Path, database_url: str
) -> None:
    # 20 concurrent trainings of one model_name with 4 training processes lost 3, 2 and 4 jobs
    # ("UNIQUE constraint failed: model_versions...") when SQLite savepoints committed at once
    server = serve(servers, tmp_path, database_url, LABELSERVE_WORKERS="4")
    with server.client() as client:
        dataset_id = upload(client)
        body = {"method": "mlknn", "dataset_id": dataset_id, "model_name": "shared", "params": {"k": 3}}
        with ThreadPoolExecutor(20) as pool:
            responses = list(pool.map(lambda _: client.post("/train", json=body), range(20)))
        assert [r.status_code for r in responses] == [202] * 20
        jobs = [wait_job(client, r.json()["job_id"], ("succeeded", "failed", "cancelled")) for r in responses]
        assert [j["status"] for j in jobs] == ["succeeded"] * 20, [j["error"] for j in jobs if j["error"]]
        assert sorted(j["model"]["version"] for j in jobs) == list(range(1, 21))
        assert client.get("/models/shared").json()["latest_version"] == 20


def test_restarting_one_api_never_fails_another_apis_job(
    servers: list[LiveServer], tmp_path: Path, database_url: str
) -> None:
    # with `serve --workers N` each process's start-up recovery failed every running job
    first = serve(servers, tmp_path, database_url)
    second = serve(servers, tmp_path, database_url)
    with first.client() as client:
        job_id = start_long_job(client, upload(client))
        assert second.stop() in CLEAN_EXIT
        second.start()  # its recovery runs now, and then its reaper every 0.5 s
        time.sleep(4)  # longer than the heartbeat timeout: the live job's heartbeat keeps it
        job = client.get(f"/jobs/{job_id}").json()
        assert job["status"] == "running", job
        # once the owner is gone (killed without a chance to record anything), the survivor settles it
        first.stop(signal.SIGKILL)
    with second.client() as client:
        job = wait_job(client, job_id, ("failed",), timeout=30)
        assert "interrupted" in job["error"]


def test_serve_workers_restart_of_a_worker_keeps_the_other_workers_job(
    servers: list[LiveServer], tmp_path: Path, database_url: str
) -> None:
    server = serve(servers, tmp_path, database_url, workers=2)
    with server.client() as client:
        job_id = start_long_job(client, upload(client))
        owner = _api_process_of(int(job_row(database_url, job_id).worker.rpartition(":")[2]), server)
        # the other uvicorn worker; not the supervisor's multiprocessing resource tracker, also its child
        others = [pid for pid in _workers(server) if pid != owner]
        assert others, "expected a second uvicorn worker"
        os.kill(others[0], signal.SIGKILL)  # uvicorn starts a new worker, which runs its recovery
        time.sleep(4)
        assert client.get(f"/jobs/{job_id}").json()["status"] == "running"
        client.delete(f"/jobs/{job_id}")
    assert server.stop() in CLEAN_EXIT
    assert server.wait_no_processes(20) == []


def test_a_killed_training_process_fails_only_its_own_job(
    servers: list[LiveServer], tmp_path: Path, database_url: str
) -> None:
    # an out-of-memory kill of one pool process broke the whole local pool (BrokenProcessPool):
    # every job running in it failed as "the worker process died"
    server = serve(servers, tmp_path, database_url, LABELSERVE_WORKERS="2")
    with server.client() as client:
        dataset_id = upload(client)
        victim, neighbour = start_long_job(client, dataset_id, "victim"), start_long_job(client, dataset_id, "other")
        os.kill(int(job_row(database_url, victim).worker.rpartition(":")[2]), signal.SIGKILL)
        # failed by its slot ("died") or by the reaper, which saw its process gone ("interrupted")
        error = wait_job(client, victim, ("failed",), timeout=30)["error"]
        assert "died" in error or "interrupted" in error, error
        before = job_row(database_url, neighbour).heartbeat_at
        time.sleep(2)  # the neighbour's process keeps running it, and stamping its heartbeat
        row = job_row(database_url, neighbour)
        assert row.status == "running" and row.heartbeat_at > before, (row.status, row.error)
        # the killed process's slot takes new jobs again
        response = client.post(
            "/train?wait=true",
            json={"method": "mlknn", "dataset_id": dataset_id, "model_name": "after", "params": {"k": 3}},
        )
        assert response.json()["status"] == "succeeded", response.text
        assert client.delete(f"/jobs/{neighbour}").status_code in (200, 202, 204)
    assert server.stop() in CLEAN_EXIT


def test_a_silent_but_live_training_process_keeps_its_job(
    servers: list[LiveServer], tmp_path: Path, database_url: str
) -> None:
    # during a long /evaluate the heartbeat writes of a running job failed ("database is locked")
    # and the reaper failed the live job as "no heartbeat for more than 60 s"; a stopped process
    # is as silent as one whose writes fail, and as alive
    server = serve(servers, tmp_path, database_url, LABELSERVE_WORKERS="1")
    with server.client() as client:
        job_id = start_long_job(client, upload(client))
        pid = int(job_row(database_url, job_id).worker.rpartition(":")[2])
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(5)  # beyond the heartbeat timeout (3 s), several reaper rounds (0.5 s)
            row = job_row(database_url, job_id)
            assert row.status == "running", row.error
        finally:
            os.kill(pid, signal.SIGCONT)
        before = job_row(database_url, job_id).heartbeat_at
        time.sleep(1.5)
        assert job_row(database_url, job_id).heartbeat_at > before  # it beats again
        os.kill(pid, signal.SIGKILL)  # really gone: failed at once (by the slot or the reaper)
        assert wait_job(client, job_id, ("failed",), timeout=10)["error"]
    assert server.stop() in CLEAN_EXIT


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                    children.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return children


def _workers(server: LiveServer) -> list[int]:
    """The uvicorn worker processes of a ``serve --workers N`` (spawned children of the supervisor)."""
    assert server.process is not None
    found = []
    for pid in _children(server.process.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in command and b"resource_tracker" not in command:
            found.append(pid)
    return found


def _api_process_of(pid: int, server: LiveServer) -> int:
    """The uvicorn worker that is an ancestor of ``pid`` (a pool process, via its fork server)."""
    workers = set(_workers(server))
    while pid not in workers:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        assert pid > 1, "not a descendant of the server"
    return pid


def test_a_stop_stops_every_process_the_service_started(servers: list[LiveServer], tmp_path: Path) -> None:
    # after SIGTERM the fork server, the pool process and the resource tracker stayed alive
    database_url = f"sqlite:///{tmp_path / 'registry.db'}"
    server = serve(servers, tmp_path, database_url, LABELSERVE_WORKERS="2")
    with server.client() as client:
        job_id = start_long_job(client, upload(client))
    assert len(server.processes()) >= 4  # API, fork server, resource tracker, pool processes
    assert server.stop() in CLEAN_EXIT
    assert server.wait_no_processes(20) == []
    row = job_row(database_url, job_id)
    assert row.status == "failed" and "interrupted" in (row.error or "")


def test_a_killed_api_leaves_no_training_running_and_no_job_lost(servers: list[LiveServer], tmp_path: Path) -> None:
    # after the API was killed, its training process kept running for minutes
    database_url = f"sqlite:///{tmp_path / 'registry.db'}"
    server = serve(servers, tmp_path, database_url)
    with server.client() as client:
        job_id = start_long_job(client, upload(client))
    server.stop(signal.SIGKILL)
    assert server.wait_no_processes(20) == []
    server.start()  # the restart settles the orphaned job: failed, not left running forever
    with server.client() as client:
        job = wait_job(client, job_id, ("failed",), timeout=30)
        assert "interrupted" in job["error"]
    assert server.stop() in CLEAN_EXIT
    assert server.wait_no_processes(20) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs (root only; skipped where mounting is not allowed)."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mountpoint)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _server_on(small_disk: Path, servers: list[LiveServer], tmp_path: Path) -> LiveServer:
    """A started server whose store and SQLite database are on the small disk."""
    server = LiveServer(
        tmp_path,
        {
            "LABELSERVE_MODEL_DIR": str(small_disk / "store"),
            "LABELSERVE_DATABASE_URL": f"sqlite:///{small_disk / 'registry.db'}",
            "LABELSERVE_MIN_FREE_MB": "2",
        },
    )
    servers.append(server)
    server.start()
    return server


def test_a_full_disk_is_507_and_not_ready(servers: list[LiveServer], tmp_path: Path, small_disk: Path) -> None:
    # uploads, trainings and aliases answered 500 on a full disk while /ready said ready
    server = _server_on(small_disk, servers, tmp_path)
    statuses = []
    rng = np.random.default_rng(0)
    with server.client() as client:
        for i in range(40):
            X = rng.random((3000, 40))
            Y = (rng.random((3000, 2)) > 0.5).astype(float)
            response = client.post(
                "/datasets", files={"file": (f"d{i}.csv", csv_bytes(X, Y))}, data={"label_count": "2"}
            )
            statuses.append(response.status_code)
            if response.status_code == 507:
                assert "disk is full" in response.json()["detail"]
                break
        assert 507 in statuses and all(s < 500 or s == 507 for s in statuses), statuses
        ready = client.get("/ready")
        assert ready.status_code == 503 and ready.json()["model_store"] in ("low on disk space", "not writable")
        assert "labelserve_store_free_bytes" in client.get("/metrics").text
        for item in client.get("/datasets").json()["items"]:  # room again: ready again
            deleted = client.delete(f"/datasets/{item['id']}")
            assert deleted.status_code == 204, deleted.text
        assert client.get("/ready").status_code == 200
    assert server.stop() in CLEAN_EXIT


def fill(path: Path) -> int:
    """Write ``path`` until its file system refuses every write down to one byte; the bytes left free."""
    with open(path, "ab", buffering=0) as fh:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    fh.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    status = os.statvfs(path)
    return status.f_bavail * status.f_frsize


def train_now(client: httpx.Client, dataset_id: str, name: str) -> None:
    response = client.post(
        "/train?wait=true", json={"method": "mlknn", "dataset_id": dataset_id, "model_name": name, "params": {"k": 3}}
    )
    assert response.status_code == 200 and response.json()["status"] == "succeeded", response.text


def test_deletes_work_on_a_full_disk(servers: list[LiveServer], tmp_path: Path, small_disk: Path) -> None:
    # at 0 bytes free every DELETE answered 507 "free some space (or delete unused datasets and
    # models)": SQLite's commit of the deletion needed room in its WAL, even after the dataset's file went
    server = _server_on(small_disk, servers, tmp_path)
    spare = small_disk / "registry.db.spare"
    with server.client() as client:
        trained_on, other = upload(client, 60), upload(client, 61)
        for name in ("m", "m", "n"):
            train_now(client, trained_on, name)
        job_id = start_long_job(client, trained_on)
        deadline = time.monotonic() + 30
        while not spare.exists():  # made by the start-up sweep
            assert time.monotonic() < deadline, "no spare space was made"
            time.sleep(0.1)
        assert fill(small_disk / "filler") == 0
        cancelled = client.delete(f"/jobs/{job_id}")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
        for url in (f"/datasets/{other}", "/models/m/versions/1", "/models/n"):
            deleted = client.delete(url)
            assert deleted.status_code == 204, (url, deleted.text)
        assert [v["version"] for v in client.get("/models/m").json()["versions"]] == [2]
        assert client.get("/models/n").status_code == 404 and client.get(f"/datasets/{other}").status_code == 404
        # the spare given up and the disk filled again: a deletion that cannot be recorded says
        # what to do instead of sending the user to delete something else
        assert not spare.exists()
        fill(small_disk / "filler")
        refused = client.delete("/models/m/versions/2")
        assert refused.status_code == 507, refused.text
        detail = refused.json()["detail"]
        assert "by other means" in detail and "delete unused" not in detail
        (small_disk / "filler").unlink()
        assert client.delete("/models/m/versions/2").status_code == 204
        assert spare.exists()  # made again once there was room
    assert server.stop() in CLEAN_EXIT


def test_serve_workers_start_on_a_new_database_and_share_the_connections(
    servers: list[LiveServer], tmp_path: Path
) -> None:
    # two workers migrating a new SQLite database at once: one failed ("table datasets already
    # exists"); and with one listening socket for both, one worker accepted every connection of a
    # burst (16 keep-alive connections from a load generator) while the other stayed idle
    server = serve(servers, tmp_path, f"sqlite:///{tmp_path / 'new.db'}", workers=2)
    deadline = time.monotonic() + 60
    while len(workers := _workers(server)) < 2 or len(_listening(server.port, workers)) < 2:
        assert time.monotonic() < deadline, f"workers {workers} not both listening: {server.log.read_text()[-3000:]}"
        time.sleep(0.2)
    connections = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(32)]
    try:
        for conn in connections:  # each connection answered, and kept open
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        served_by = _owners(server.port, [c.getsockname()[1] for c in connections], workers)
        assert len(served_by) == 32 and set(served_by.values()) == set(workers), served_by
    finally:
        for conn in connections:
            conn.close()
    assert "Traceback" not in server.log.read_text()


MIGRATE_AT = (
    "import sys, time\n"
    "from app.storage.db import migrate\n"
    "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
    "migrate(sys.argv[1])\n"
)


def _migrate_together(database_url: str, processes: int = 4) -> list[subprocess.CompletedProcess[str]]:
    """``processes`` Python processes, imports done, migrating ``database_url`` at the same instant."""
    start = time.time() + 8.0  # past every process's imports, even on a loaded machine
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    running = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE_AT, database_url, str(start)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    results = []
    for process in running:
        out, err = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_processes_migrating_a_new_database_together_all_succeed(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # two API processes started together on a fresh store both migrated it: one died with "table
    # datasets already exists" (3 of 4 runs); a migration now waits for the other's to end
    if backend == "sqlite":
        results = _migrate_together(f"sqlite:///{tmp_path / 'fresh.db'}")
    else:
        with throwaway_postgres(request.getfixturevalue("postgres_admin")) as url:
            results = _migrate_together(url)
    failed = [r.stderr[-2000:] for r in results if r.returncode != 0]
    assert failed == []


def test_two_servers_started_together_on_a_new_store_both_come_up(servers: list[LiveServer], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {"LABELSERVE_DATABASE_URL": url, "LABELSERVE_AUTO_MIGRATE": "true"} | FAST_LIVENESS
    pair = [LiveServer(tmp_path, env), LiveServer(tmp_path, env)]
    servers.extend(pair)
    with ThreadPoolExecutor(2) as pool:
        started = list(pool.map(lambda server: server.start(), pair))
    for server in started:
        with server.client() as client:
            assert client.get("/datasets").status_code == 200
        assert "Traceback" not in server.log.read_text()


def _tcp_sockets() -> list[tuple[int, int, int, str]]:
    """(local port, remote port, inode, state) of every IPv4 TCP socket (``/proc/net/tcp``)."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        rows.append(
            (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16), int(fields[9]), fields[3])
        )
    return rows


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _listening(port: int, pids: list[int]) -> set[int]:
    """The processes among ``pids`` that hold a socket listening on ``port``."""
    listening = {inode for local, _, inode, state in _tcp_sockets() if local == port and state == "0A"}
    return {pid for pid in pids if _socket_inodes(pid) & listening}


def _owners(port: int, client_ports: list[int], pids: list[int]) -> dict[int, int]:
    """Client port -> the process among ``pids`` holding the server side of that connection."""
    server_side = {
        remote: inode for local, remote, inode, _ in _tcp_sockets() if local == port and remote in client_ports
    }
    held = {pid: _socket_inodes(pid) for pid in pids}
    return {client: pid for client, inode in server_side.items() for pid, inodes in held.items() if inode in inodes}
