"""Cached model references across processes: two real ``labelserve serve`` processes share one
database and one store; whatever one of them changes in the registry, the other's next
prediction sees (its cached ``name`` / ``name@alias`` resolutions are dropped)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers import csv_bytes, live_server, make_multilabel

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow


def _train(client: httpx.Client, dataset_id: str, k: int) -> int:
    job = client.post(
        "/train?wait=true",
        json={"method": "mlknn", "dataset_id": dataset_id, "model_name": "m", "params": {"k": k}},
    ).json()
    assert job["status"] == "succeeded", job
    return int(job["model"]["version"])


def _version(client: httpx.Client, ref: str, rows: list[list[float]]) -> int | None:
    r = client.post("/predict", json={"model": ref, "instances": rows})
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return int(r.json()["model"]["version"])


@pytest.mark.timeout(300)
def test_a_change_in_one_process_reaches_the_other(tmp_path: Path, database_url: str) -> None:
    env = {"LABELSERVE_DATABASE_URL": database_url, "LABELSERVE_MODEL_DIR": str(tmp_path / "store")}
    X, Y = make_multilabel()
    rows = X[:2].tolist()
    with live_server(tmp_path, env) as a_url, live_server(tmp_path, env) as b_url:
        with httpx.Client(base_url=a_url, timeout=120) as a, httpx.Client(base_url=b_url, timeout=120) as b:
            upload = a.post(
                "/datasets", files={"file": ("d.csv", csv_bytes(X, Y), "text/csv")}, data={"label_count": "3"}
            )
            dataset_id = upload.json()["id"]
            assert _train(a, dataset_id, 3) == 1
            assert a.put("/models/m/aliases/prod", json={"version": 1}).status_code == 200
            for _ in range(3):  # resolved, then served from B's cache
                assert _version(b, "m", rows) == 1 and _version(b, "m@prod", rows) == 1

            assert _train(a, dataset_id, 5) == 2  # a new latest version
            assert _version(b, "m", rows) == 2 and _version(b, "m@prod", rows) == 1
            assert a.put("/models/m/aliases/prod", json={"version": 2}).status_code == 200
            assert _version(b, "m@prod", rows) == 2
            assert a.delete("/models/m/aliases/prod").status_code == 204
            assert _version(b, "m@prod", rows) is None
            assert a.delete("/models/m/versions/2").status_code == 204
            assert _version(b, "m", rows) == 1 and _version(b, "m@2", rows) is None
            assert a.delete("/models/m").status_code == 204
            assert _version(b, "m", rows) is None and _version(b, "m@1", rows) is None
