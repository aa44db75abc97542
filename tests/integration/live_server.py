"""A real ``labelserve serve`` in a subprocess, for the reliability suite: concurrency, kill -9,
clean stops and what a process leaves behind.

Every process the server starts (uvicorn workers, the fork server, pool processes, the resource
tracker, MAT readers) inherits the environment variable ``LABELSERVE_TEST_TAG`` with a value
unique to the server, so ``processes()`` finds them all by reading ``/proc/*/environ``, whoever
their parent is now.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        self.command = [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)]
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
