"""The README's first command, for real: ``labelserve serve`` on embedded defaults answers HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import csv_bytes, live_server, make_multilabel

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    # embedded defaults: SQLite and the store under ./models of the working directory
    with live_server(tmp_path) as url:
        yield url
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
