"""Serving cost: ``POST /predict`` and ``/v2/.../infer`` against a bare FastAPI echo endpoint, under
the same wrk load, in one run.

Absolute rates depend on the machine and on what else runs on it, so the numbers that count are
ratios to the echo endpoint measured minutes apart in one run: the rate ratio, and the ratio of the
server's own CPU time per request (user + system time of the server's processes over the measured
run, divided by the requests served; it hardly moves when other jobs share the machine, because
time spent waiting for a core is not counted). Processes are started on 127.0.0.1, all with uvicorn
on uvloop + httptools from this venv: a bare FastAPI app whose ``POST /echo`` returns the request
body unparsed, and ``labelserve serve`` on a temporary SQLite (or PostgreSQL) database and model
directory, with its default log level (one JSON line per request, to a file). Two small models are
trained through the API (ldlkm on a generated label-distribution dataset, mlknn on a generated
multi-label dataset), then wrk (one thread, 16 connections) drives each endpoint with a one-row and
a 100-row body: a warm-up run, then a measured run with latency percentiles. With ``--workers 1,2``
the service is measured once per worker count (one-row bodies for the extra counts). Any non-2xx
response fails the run.

The V2 protocol over gRPC (``LABELSERVE_GRPC_PORT``, the service's own process) is compared with
its REST binary tensors in a second table: both driven by h2load (one thread, 16 connections, one
request in flight on each: HTTP/1.1 for REST, HTTP/2 for gRPC) with the same instances (raw
little-endian FP64 in, every output back raw), 1 and 100 rows, in the same run; the gRPC body is
the framed ``ModelInferRequest`` Triton's client sends, checked once with a real gRPC call first
(h2load counts a gRPC error, which travels in an HTTP 200, as a success).

Run: ``.venv/bin/python -m benchmarks.serving [--warmup 3] [--duration 8] [--workers 1,2]
[--database sqlite|postgresql] [--grpc-only]``. Needs ``wrk`` on the PATH (Debian package ``wrk``), and for
the gRPC table ``h2load`` (Debian package ``nghttp2-client``; without it the table is left out);
PostgreSQL runs create and drop a throw-away database on ``--postgres-url``. Every process it
starts is stopped on exit, error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx
import numpy as np
from fastapi import FastAPI, Request, Response
from sqlalchemy import create_engine, make_url, text

ROOT = Path(__file__).resolve().parents[1]
CONNECTIONS = 16
ROWS = (1, 100)
METHODS = {"ldl": "ldlkm", "ml": "mlknn"}  # model name -> method trained under it

echo_app = FastAPI()


@echo_app.post("/echo")
async def echo(request: Request) -> Response:
    """The bare reference: read the body and send it back, no parsing, no validation."""
    return Response(await request.body(), media_type="application/json")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def multilabel(n: int = 300, d: int = 10, q: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features in [0, 1]; label j is on when feature j (plus noise) is high."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, (X[:, :q] + 0.2 * rng.standard_normal((n, q)) > 0.5).astype(float)


def distribution(n: int = 300, d: int = 10, c: int = 5, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Label distributions that depend smoothly on the features."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    logits = X @ rng.standard_normal((d, c)) * 2
    D = np.exp(logits - logits.max(axis=1, keepdims=True))
    return X, D / D.sum(axis=1, keepdims=True)


def csv_upload(X: np.ndarray, Y: np.ndarray) -> bytes:
    out = io.StringIO()
    out.write(",".join([f"f{j}" for j in range(X.shape[1])] + [f"l{j}" for j in range(Y.shape[1])]) + "\n")
    np.savetxt(out, np.hstack([X, Y]), delimiter=",", fmt="%.17g")
    return out.getvalue().encode()


class Processes:
    """Server subprocesses, each in its own session so that the whole group can be stopped."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, args: list[str], env: dict[str, str], ready: str) -> tuple[str, int]:
        """Start a server; its base URL and pid once ``ready`` answers."""
        port = free_port()
        args = [a.replace("{port}", str(port)) for a in args]
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                if httpx.get(base + ready, timeout=2).status_code < 500:
                    return base, proc.pid
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not start; see {self.logs / name}.log")

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
        self.procs.clear()


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant (uvicorn workers, pools)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


@contextmanager
def throwaway_postgres(admin_url: str) -> Iterator[str]:
    """An empty PostgreSQL database for one run (dropped afterwards)."""
    name = f"labelserve_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def train_models(base: str) -> dict[str, np.ndarray]:
    """Upload the generated datasets and train one model on each; returns model name -> features to send."""
    features = {}
    with httpx.Client(base_url=base, timeout=300) as client:
        for name, method, params, (X, Y) in (
            ("ldl", METHODS["ldl"], {"k": 5}, distribution()),
            ("ml", METHODS["ml"], {"k": 10}, multilabel()),
        ):
            upload = client.post(
                "/datasets",
                files={"file": (f"{name}.csv", csv_upload(X, Y), "text/csv")},
                data={"label_count": str(Y.shape[1]), "name": name},
            )
            upload.raise_for_status()
            job = client.post(
                "/train?wait=true",
                json={"method": method, "dataset_id": upload.json()["id"], "model_name": name, "params": params},
            ).json()
            if job.get("status") != "succeeded":
                raise RuntimeError(f"training {method} failed: {job}")
            features[name] = X
    return features


@dataclass
class Result:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_us: float  # server CPU time per request


_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNIT_MS[unit]


def lua_string(data: bytes) -> str:
    """``data`` as a Lua string literal (bytes outside printable ASCII as three-digit escapes)."""
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b:03d}" for b in data) + '"'


def wrk(url: str, body: Body, seconds: int, scripts: Path, pid: int) -> Result:
    """One wrk run (1 thread, 16 connections) POSTing ``body``; fails on any non-2xx response or socket error."""
    headers = {"Content-Type": "application/json"} if isinstance(body, bytes) else body[1]
    content = body if isinstance(body, bytes) else body[0]
    script = scripts / f"post-{abs(hash((content, *headers.items())))}.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        + "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers.items())
        + f"wrk.body = {lua_string(content)}\n"
    )
    command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "-s", str(script), url]
    before = cpu_seconds(pid)
    out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    used = cpu_seconds(pid) - before
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests on {url}:\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    return Result(rate, p50, p99, used / max(requests, 1) * 1e6)


def measure(url: str, body: Body, args: argparse.Namespace, scripts: Path, pid: int) -> Result:
    """A warm-up run (discarded), then the measured one."""
    wrk(url, body, args.warmup, scripts, pid)
    return wrk(url, body, args.duration, scripts, pid)


def v2_body(X: np.ndarray) -> bytes:
    tensor = {"name": "input-0", "shape": list(X.shape), "datatype": "FP64", "data": X.ravel().tolist()}
    return json.dumps({"inputs": [tensor]}).encode()


def v2_binary_body(X: np.ndarray) -> tuple[bytes, dict[str, str]]:
    """What Triton's client sends by default: binary input, all outputs asked as binary."""
    raw = X.astype("<f8").tobytes()
    tensor = {
        "name": "input-0",
        "shape": list(X.shape),
        "datatype": "FP64",
        "parameters": {"binary_data_size": len(raw)},
    }
    header = json.dumps({"inputs": [tensor], "parameters": {"binary_data_output": True}}).encode()
    return header + raw, {
        "Inference-Header-Content-Length": str(len(header)),
        "Content-Type": "application/octet-stream",
    }


GRPC_INFER = "/inference.GRPCInferenceService/ModelInfer"


def grpc_body(model: str, X: np.ndarray) -> bytes:
    """What Triton's gRPC client sends: a ModelInferRequest with the input in raw_input_contents and
    no outputs named (all of them), framed as gRPC frames a message (no compression, its length)."""
    from app.api.v2.proto import grpc_predict_v2_pb2 as pb

    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name="input-0", datatype="FP64", shape=list(X.shape))
    request.raw_input_contents.append(X.astype("<f8").tobytes())
    message = request.SerializeToString()
    return b"\x00" + len(message).to_bytes(4, "big") + message


def check_grpc(target: str, body: bytes) -> None:
    """One real gRPC call with the benchmark's message: raises unless it succeeds."""
    import grpc

    with grpc.insecure_channel(target) as channel:
        channel.unary_unary(GRPC_INFER)(body[5:], timeout=30)


def h2load(url: str, body: bytes, headers: dict[str, str], seconds: int, scripts: Path, pid: int, h1: bool) -> Result:
    """One h2load run (1 thread, 16 connections, 1 request in flight on each) POSTing ``body``, over
    HTTP/1.1 with ``h1``, else HTTP/2 cleartext; fails on any failed request or non-2xx status.
    ``p50_ms`` holds the mean latency (h2load gives no percentiles), ``p99_ms`` the slowest request."""
    data = scripts / f"h2load-{abs(hash(body))}.bin"
    data.write_bytes(body)
    command = ["h2load", "-t1", f"-c{CONNECTIONS}", "-m1", f"-D{seconds}", "-d", str(data), *(["--h1"] * h1)]
    command += [arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")] + [url]
    before = cpu_seconds(pid)
    out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    used = cpu_seconds(pid) - before
    ok, failed, errored = map(
        int,
        re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored", out).groups(),  # type: ignore[union-attr]
    )
    bad = sum(map(int, re.search(r"(\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out).groups()))  # type: ignore[union-attr]
    if failed or errored or bad or not ok:
        raise RuntimeError(f"h2load saw failed requests on {url}:\n{out}")
    rate = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))  # type: ignore[union-attr]
    latency = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    slowest, mean = _ms(latency.group(2)), _ms(latency.group(3))  # type: ignore[union-attr]
    return Result(rate, mean, slowest, used / max(ok, 1) * 1e6)


def grpc_rows(
    base: str, grpc_target: str, features: dict[str, np.ndarray], args: argparse.Namespace, scripts: Path, pid: int
) -> list[Row]:
    """gRPC infer against REST binary infer of the same instances, both under h2load: for each
    model and row count, the REST row then the gRPC row (compared with that REST row)."""
    out: list[Row] = []
    for n in ROWS:
        for name, X in features.items():
            rest_body, rest_headers = v2_binary_body(X[:n])
            body = grpc_body(name, X[:n])
            check_grpc(grpc_target, body)
            runs = {
                "REST binary": (f"{base}/v2/models/{name}/infer", rest_body, rest_headers, True),
                "gRPC": (
                    f"http://{grpc_target}{GRPC_INFER}",
                    body,
                    {"content-type": "application/grpc", "te": "trailers"},
                    False,
                ),
            }
            results = {}
            for label, (url, content, headers, h1) in runs.items():
                h2load(url, content, headers, args.warmup, scripts, pid, h1)
                results[label] = h2load(url, content, headers, args.duration, scripts, pid, h1)
            rest = results["REST binary"]
            what = f"{METHODS[name]}, {n} row{'s' * (n > 1)}"
            out += [(f"REST binary `POST /v2/models/{name}/infer`, {what}", rest, rest)]
            out += [(f"gRPC `ModelInfer`, {what}", results["gRPC"], rest)]
    return out


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


Row = tuple[str, Result, Result]  # label, result, the echo result it is compared with
Body = bytes | tuple[bytes, dict[str, str]]  # a JSON body, or a body and its headers


def service_rows(
    procs: Processes,
    tmp: Path,
    env: dict[str, str],
    database_url: str,
    workers: int,
    rows: tuple[int, ...],
    args: argparse.Namespace,
    echo: tuple[str, int],
    grpc_table: list[Row] | None = None,
) -> list[Row]:
    """Start ``labelserve serve`` with ``workers`` processes, train the two models, measure every
    endpoint (and, given a ``grpc_table``, add gRPC against REST binary infer to it)."""
    run = tmp / f"{args.database}-{workers}"
    run.mkdir()
    grpc_port = free_port()
    service_env = env | {
        "LABELSERVE_MODEL_DIR": str(run / "models"),
        "LABELSERVE_DATABASE_URL": database_url,
        "LABELSERVE_GRPC_PORT": str(grpc_port),
    }
    service_env.pop("LABELSERVE_API_KEY", None)
    service_env.pop("LABELSERVE_LOG_LEVEL", None)  # the default (INFO): one log line per request
    # as in production: the schema first, once, then the API processes (they only check it)
    subprocess.run(
        [sys.executable, "-m", "app.client.cli", "migrate"], cwd=ROOT, env=service_env, check=True, capture_output=True
    )
    command = ["-m", "app.client.cli", "serve", "--host", "127.0.0.1", "--port", "{port}", "--workers", str(workers)]
    base, pid = procs.start(f"service-{args.database}-{workers}", command, service_env, "/ready")
    features = train_models(base)
    out: list[Row] = []
    for n in () if args.grpc_only else rows:
        echo_base, echo_pid = echo
        bodies: list[tuple[str, str, Body]] = []
        for name, X in features.items():
            native = json.dumps({"model": name, "instances": X[:n].tolist()}).encode()
            v2 = f"/v2/models/{name}/infer"
            bodies.append((f"`POST /predict` {METHODS[name]}", "/predict", native))
            bodies.append((f"`POST {v2}` {METHODS[name]}", v2, v2_body(X[:n])))
            bodies.append((f"`POST {v2}` {METHODS[name]}, binary tensors", v2, v2_binary_body(X[:n])))
        # the echo endpoint gets the largest of the JSON bodies, so that its rate is not flattered
        largest = max((b for *_, b in bodies if isinstance(b, bytes)), key=len)
        echo_result = measure(echo_base + "/echo", largest, args, tmp, echo_pid)
        out.append((f"bare FastAPI `POST /echo`, {n}-row body", echo_result, echo_result))
        for label, path, body in bodies:
            result = measure(base + path, body, args, tmp, pid)
            out.append((f"{label}, {n} row{'s' * (n > 1)}, {workers} worker{'s' * (workers > 1)}", result, echo_result))
    if grpc_table is not None:
        grpc_table += grpc_rows(base, f"127.0.0.1:{grpc_port}", features, args, tmp, pid)
    procs.procs.remove(next(p for p in procs.procs if p.pid == pid))
    os.killpg(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    return out


def print_grpc_table(rows: list[Row] | None, args: argparse.Namespace) -> None:
    if rows is None:
        print("\nh2load not found on the PATH (Debian: apt-get install -y nghttp2-client): no gRPC table")
        return
    print(
        f"\nV2 inference, gRPC against REST binary tensors ({args.database}); h2load: 1 thread, {CONNECTIONS} "
        f"connections, 1 request in flight each, {args.warmup:g} s warm-up + {args.duration:g} s measured per row; "
        f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print("| call | req/s | mean latency | slowest | rate / REST binary | server CPU per request |")
    print("|---|---|---|---|---|---|")
    for label, r, rest in rows:
        print(
            f"| {label} | {r.rate:,.0f} | {r.p50_ms:.1f} ms | {r.p99_ms:.1f} ms | {r.rate / rest.rate:.2f} "
            f"| {r.cpu_us:,.0f} µs |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmup", type=int, default=3, help="seconds of wrk load before each measured run")
    ap.add_argument("--duration", type=int, default=8, help="seconds of each measured wrk run")
    ap.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,2")
    ap.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--grpc-only", action="store_true", help="only the table of gRPC against REST binary infer")
    ap.add_argument("--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args(argv)
    if shutil.which("wrk") is None and not args.grpc_only:
        print("wrk not found on the PATH (Debian: apt-get install -y wrk)", file=sys.stderr)
        return 1
    if shutil.which("h2load") is None and args.grpc_only:
        print("h2load not found on the PATH (Debian: apt-get install -y nghttp2-client)", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    tmp = Path(tempfile.mkdtemp(prefix="labelserve-serving-"))
    procs = Processes(tmp)
    try:
        env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        uvicorn = "-m uvicorn --host 127.0.0.1 --port {port} --loop uvloop --http httptools --no-access-log".split()
        echo = procs.start("echo", [*uvicorn, "benchmarks.serving:echo_app"], env, "/docs")
        rows: list[Row] = []
        grpc_table: list[Row] | None = [] if shutil.which("h2load") is not None else None
        for i, workers in enumerate(int(w) for w in args.workers.split(",")):
            counts = ROWS if i == 0 else ROWS[:1]
            table = grpc_table if i == 0 else None
            if args.database == "sqlite":
                url = f"sqlite:///{tmp / f'labelserve-{workers}.db'}"
                rows += service_rows(procs, tmp, env, url, workers, counts, args, echo, table)
            else:
                with throwaway_postgres(args.postgres_url) as url:
                    rows += service_rows(procs, tmp, env, url, workers, counts, args, echo, table)
        if rows:
            print(
                f"\n{args.database}; wrk: 1 thread, {CONNECTIONS} connections, {args.warmup:g} s warm-up + "
                f"{args.duration:g} s measured per row; load average at the end: {os.getloadavg()[0]:.1f} "
                f"on {os.cpu_count()} cores\n"
            )
            print("| endpoint | req/s | p50 | p99 | rate / echo | server CPU per request | echo's / this |")
            print("|---|---|---|---|---|---|---|")
        for label, r, e in rows:
            print(
                f"| {label} | {r.rate:,.0f} | {r.p50_ms:.1f} ms | {r.p99_ms:.1f} ms | {r.rate / e.rate:.2f} "
                f"| {r.cpu_us:,.0f} µs | {e.cpu_us / r.cpu_us:.2f} |"
            )
        print_grpc_table(grpc_table, args)
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
