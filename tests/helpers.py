"""Test helpers shared by every test folder: generated datasets, uploads, trainings, databases,
real server processes, report checks. Test modules import these, never each other."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from html.parser import HTMLParser
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core import Core
from app.jobs import transitions
from app.jobs.payloads import TrainPayload
from app.registry.versions import library_versions, register_version
from app.storage.db import Database, get_engine

REPO = Path(__file__).resolve().parent.parent

# The database backends a test runs on: ``params=BACKENDS`` on a fixture (``pytest.param`` so that
# ``-m "not postgres"`` deselects the PostgreSQL half, which needs a server).
BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))


def make_multilabel(n: int = 80, d: int = 6, q: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features in [0, 1]; label j is on when feature j (plus noise) is high."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = (X[:, :q] + 0.2 * rng.standard_normal((n, q)) > 0.5).astype(float)
    return X, Y


def make_mixed_multilabel(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two labels on oblique hyperplanes of features 0-4 (logistic regression's ground) and two XORs
    of features 5 and 6, 5 and 7 (a forest's), so that neither br nor rf ranks every label best
    and their blend beats both in cross-validation (checked for several fold seeds)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 8))
    W = np.array([[1, 1, -1, 1, -1], [1, -1, 1, 1, 1]], dtype=float)
    oblique = ((X[:, :5] - 0.5) @ W.T + 0.1 * rng.standard_normal((n, 2)) > 0).astype(float)
    xor = ((X[:, 5] > 0.5) ^ (X[:, 6] > 0.5)).astype(float)
    xor2 = ((X[:, 5] > 0.5) ^ (X[:, 7] > 0.5)).astype(float)
    return X, np.column_stack([oblique, xor, xor2])


def make_distribution(n: int = 80, d: int = 5, c: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Label distributions that depend smoothly on the features."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    logits = X @ rng.standard_normal((d, c)) * 2
    D = np.exp(logits - logits.max(axis=1, keepdims=True))
    return X, D / D.sum(axis=1, keepdims=True)


def csv_bytes(X: np.ndarray, Y: np.ndarray, label_prefix: str = "label") -> bytes:
    features = [f"f{j}" for j in range(X.shape[1])]
    labels = [f"{label_prefix}{j}" for j in range(Y.shape[1])]
    out = io.StringIO()
    out.write(",".join(features + labels) + "\n")
    for x, y in zip(X, Y):
        out.write(",".join(repr(float(v)) for v in np.concatenate([x, y])) + "\n")
    return out.getvalue().encode()


def upload_csv(client: TestClient, X: np.ndarray, Y: np.ndarray, name: str = "data") -> dict:
    response = client.post(
        "/datasets",
        files={"file": (f"{name}.csv", csv_bytes(X, Y), "text/csv")},
        data={"label_count": str(Y.shape[1]), "name": name},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


@contextmanager
def throwaway_postgres(admin_url: str, template: str | None = None) -> Iterator[str]:
    """Create a database on the admin URL's server, yield its URL, drop it afterwards.

    The database starts empty, or as a copy of the database named ``template`` (``CREATE DATABASE
    ... TEMPLATE``: the server copies its files, a few milliseconds against a migration's or a
    training's seconds); nothing may be connected to the template meanwhile (``release``).
    """
    name = f"labelserve_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    copy_of = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy_of}'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        release(url)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def release(url: str) -> None:
    """Close this process's pooled connections to ``url`` (before the database is dropped or
    copied as a template)."""
    get_engine(url).dispose()
    get_engine.cache_clear()


def copy_sqlite(source: Path, target: Path) -> None:
    """Copy a SQLite database with SQLite's backup API: consistent whatever its write-ahead log
    holds, unlike a copy of the file."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def train(client: TestClient, method: str, dataset_id: str, name: str, **params: object) -> dict:
    response = client.post(
        "/train?wait=true",
        json={"method": method, "dataset_id": dataset_id, "model_name": name, "params": params},
    )
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["status"] == "succeeded", job
    return job


def train_served_models(client: TestClient) -> dict:
    """Upload the generated datasets and train a model of each output kind (the ``served_models``
    fixture): ``clf`` (mlknn), ``dm`` (dmknn), ``sel`` (elcfs) on a multi-label dataset, ``dist``
    (ldlkm) on a distribution dataset; returns the data and the uploads' descriptions."""
    X, Y = make_multilabel()
    ml = upload_csv(client, X, Y, "ml")
    train(client, "mlknn", ml["id"], "clf", k=5)
    train(client, "dmknn", ml["id"], "dm")
    train(client, "elcfs", ml["id"], "sel", max_iter=50)
    Xd, D = make_distribution()
    ldl = upload_csv(client, Xd, D, "ldl")
    train(client, "ldlkm", ldl["id"], "dist", k=3)
    return {"X": X, "ml": ml, "Xd": Xd, "ldl": ldl}


def train_v2_models(client: TestClient | httpx.Client) -> dict[str, np.ndarray]:
    """The models the V2 protocol's live tests (REST and gRPC) infer with: a classifier ``clf``
    (mlknn), a selector ``sel`` (elcfs) and an LDL model ``dist`` (ldlkm); returns the features
    of the multi-label (``X``) and the distribution (``Xd``) datasets."""
    X, Y = make_multilabel()
    Xd, D = make_distribution()
    ml = upload_csv(client, X, Y, "clf")
    train(client, "mlknn", ml["id"], "clf", k=5)
    train(client, "elcfs", ml["id"], "sel", max_iter=50)
    train(client, "ldlkm", upload_csv(client, Xd, D, "dist")["id"], "dist", k=3)
    return {"X": X, "Xd": Xd}


def v2_next_on(http: httpx.Client, path: str, model: str) -> None:
    """Make the next V2 inference on ``model`` go through ``path``: ``route`` (an alias set, a
    registry change, so the process has dropped its resolved references and resolves the model
    again) or ``fast path`` (the reference resolved once, so the next inference is answered
    without a database session)."""
    if path == "route":
        assert http.put(f"/models/{model}/aliases/touched", json={"version": 1}).status_code == 200
    else:
        assert http.post(f"/v2/models/{model}/infer", json={"inputs": []}).status_code in (200, 400)


def predict_ok(http: httpx.Client, body: dict) -> dict:
    """``POST /predict``'s answer, asserted 200."""
    r = http.post("/predict", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def long_job(client: TestClient, dataset_id: str, name: str) -> str:
    r = client.post(
        "/train",
        json={
            "method": "elcfs",
            "dataset_id": dataset_id,
            "model_name": name,
            "params": {"max_iter": 1_000_000, "tol": 0.0},
        },
    )
    assert r.status_code == 202, r.text
    return r.json()["job_id"]


def wait_status(client: TestClient, job_id: str, statuses: tuple[str, ...], timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        assert time.time() < deadline, job
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_server(cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> Iterator[str]:
    """``labelserve serve`` as a real uvicorn process in ``cwd`` on a free port; yields its base URL.

    The process gets this environment without any ``LABELSERVE_*`` variable (so it runs on the
    embedded defaults under ``cwd``) plus ``env``; it is stopped on exit.
    """
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "app.client.cli", "serve", "--port", str(port)],
        cwd=cwd,
        env=base | {"PYTHONPATH": str(REPO)} | (env or {}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"labelserve serve did not become ready on {url} (exit code {process.poll()})")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def running_job(url: str) -> str:
    """A job row in the running state (created and claimed) in the database at ``url``; its id."""
    with Database(url).session() as session:
        job = transitions.create(session, TrainPayload(method="mlknn", dataset_id="d", model_name="m"))
        job_id = job.id
    with Database(url).session() as session:
        assert transitions.claim(session, job_id, "host:1") is not None
    return job_id


class PageRefs(HTMLParser):
    """The tags of an HTML page and its ``src``/``href`` values."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.refs.append((tag, name, value))


def assert_self_contained(page: str) -> int:
    """A report that opens offline: no ``src``/``href`` but data: URIs and in-page anchors, no
    script loaded from a file, no http(s) URL outside the inlined scripts. Returns its chart count."""
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<!--labelserve:plotly-->" not in page, "plotly's bundle was not inlined"
    collector = PageRefs()
    collector.feed(page)
    for _, _, value in collector.refs:
        assert value.startswith("data:") or value.startswith("#"), value
    assert "link" not in collector.tags
    outside_scripts = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    assert not re.search(r"https?://", outside_scripts)
    charts = page.count('<div class="chart">')
    # each chart's own script draws it; plotly's inlined bundle may name newPlot itself (5.x, 6.x do)
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
    assert sum(script.count("Plotly.newPlot(") for script in scripts if "Plotly.newPlot(" in script[:2000]) == charts
    return charts


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def launched_chromium() -> Iterator[object]:
    """Debian's chromium through Playwright (never a browser download of Playwright's own); skips
    when it is missing, and fails under CI=true (``.ci/run`` installs it)."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=chromium_launch_args())
        yield instance
        instance.close()


def chromium_launch_args() -> list[str]:
    """Headless Debian chromium with every host name but 127.0.0.1 unresolvable (the docs and UI tests)."""
    return [
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--no-first-run",
    ]


def tagged_processes(tag: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment carries ``tag``."""
    marker = f"LABELSERVE_TEST_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def peak_memory_mb(pid: int) -> float:
    """The high-water mark of a process's resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class LiveServer:
    """``labelserve serve`` on a free port with ``env`` on top of a clean ``LABELSERVE_*`` environment."""

    def __init__(self, workdir: Path, env: dict[str, str], workers: int | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tag = uuid.uuid4().hex
        base = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
        self.env = (
            base
            | {
                "PYTHONPATH": str(REPO),
                "LABELSERVE_MODEL_DIR": str(workdir / "store"),
                "LABELSERVE_LOG_LEVEL": "WARNING",
                "LABELSERVE_TEST_TAG": self.tag,
            }
            | env
        )
        self.command = [sys.executable, "-m", "app.client.cli", "serve", "--port", str(self.port)]
        if workers is not None:
            self.command += ["--workers", str(workers)]
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"server-{self.port}.log"

    def start(self, timeout: float = 90) -> LiveServer:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command, cwd=self.workdir, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not ready within {timeout} s: {self.log.read_text()[-3000:]}")

    def client(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Send ``sig`` to the server process and wait for it; its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def processes(self) -> list[int]:
        return tagged_processes(self.tag)

    def wait_no_processes(self, timeout: float) -> list[int]:
        """Wait until no process of this server is left; those still alive at ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def cleanup(self) -> None:
        """Kill whatever of this server is still running (after a failed test)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def register_artifact(core: Core, name: str, artifact: object) -> tuple[int, object]:
    """Save ``artifact`` and register it as the next version of ``name`` (a ``br`` model): its id and creation time."""
    sha = core.store.save_artifact(artifact)
    with core.database.session() as session:
        row = register_version(
            session,
            core.store,
            name,
            method="br",
            params={},
            dataset_id=None,
            dataset_sha256="0" * 64,
            feature_names=["f"],
            label_names=["l"],
            training_seconds=0.0,
            warnings=[],
            library_versions=library_versions(),
            artifact_sha256=sha,
            job_id=None,
            selection=None,
        )
        session.commit()
        return row.id, row.created_at


class ThreadUse:
    """Wraps ``func`` to record how many calls ran at once (``most``) and, for each call, how many
    threads of AnyIO's shared pool were taken meanwhile (``shared``); each call is held 0.2 s so
    that concurrent calls overlap."""

    def __init__(self, func: Callable[..., object]) -> None:
        self.func, self.busy, self.most, self.shared = func, 0, 0, []
        self.lock = threading.Lock()

    def __call__(self, *args: object) -> object:
        from anyio import from_thread, to_thread

        with self.lock:
            self.busy += 1
            self.most = max(self.most, self.busy)
        self.shared.append(from_thread.run_sync(lambda: to_thread.current_default_thread_limiter().borrowed_tokens))
        time.sleep(0.2)
        with self.lock:
            self.busy -= 1
        return self.func(*args)
