"""The README's first command, for real: ``labelserve serve`` on embedded defaults answers HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import csv_bytes, make_multilabel


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELSERVE_")}
    # embedded defaults: SQLite and the store under ./models of the working directory
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            pytest.fail("labelserve serve did not become ready within 60 s")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert (tmp_path / "models" / "labelserve.db").exists()


def test_serve_on_embedded_defaults(server: str) -> None:
    X, Y = make_multilabel(n=40)
    with httpx.Client(base_url=server, timeout=60) as client:
        dataset = client.post("/datasets", files={"file": ("d.csv", csv_bytes(X, Y))}, data={"label_count": "3"}).json()
        job = client.post(
            "/train?wait=true",
            json={"method": "mlknn", "dataset_id": dataset["id"], "model_name": "m", "params": {"k": 5}},
        ).json()
        assert job["status"] == "succeeded", job
        predicted = client.post("/predict", json={"model": "m", "instances": X[:2].tolist()})
        assert predicted.status_code == 200 and len(predicted.json()["predictions"]) == 2
        assert "labelserve_requests_total" in client.get("/metrics").text
