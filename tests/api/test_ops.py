"""Operations routes, the method catalog, the docs and the optional API key."""

from __future__ import annotations

import json
import logging

from fastapi.testclient import TestClient

from app.main import create_app
from app.runtime.observability import JsonFormatter
from tests.helpers import make_multilabel, train, upload_csv


def test_health_ready_docs(client):
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["database"] == "ok"
    assert client.get("/docs").status_code == 200
    assert "/predict" in client.get("/openapi.json").json()["paths"]


def test_methods_catalog(client):
    body = client.get("/methods").json()
    ids = [m["id"] for m in body["items"]]
    assert ids == sorted(
        [
            "dmknn",
            "elcfs",
            "ghc-dr",
            "ldlkm",
            "mlknn",
            "trans-ovk",
            "br",
            "ecc",
            "gbm",
            "rf",
            "mi-filter",
            "aa-knn",
            "sa-maxent",
            "blend",
            "blend-ldl",
        ]
    )
    ldlkm = client.get("/methods/ldlkm").json()
    assert ldlkm["outputs"] == ["distribution"] and ldlkm["dataset_kind"] == "distribution"
    assert {"k", "max_iter", "p"} <= set(ldlkm["params"]["properties"])
    assert client.get("/methods/nope").status_code == 404
    assert client.get("/methods?limit=2").json()["next_offset"] == 2


def test_metrics_count_requests_jobs_and_cache(client):
    X, Y = make_multilabel(n=30)
    dataset = upload_csv(client, X, Y)
    client.post("/train?wait=true", json={"method": "mlknn", "dataset_id": dataset["id"], "model_name": "m"})
    for _ in range(2):
        client.post("/predict", json={"model": "m", "instances": X[:1].tolist()})
    text = client.get("/metrics").text
    assert 'labelserve_requests_total{method="POST",route="/predict",status="200"} 2.0' in text
    assert 'labelserve_jobs{status="succeeded"} 1.0' in text
    assert 'labelserve_model_cache_lookups_total{result="hit"} 1.0' in text
    assert "labelserve_request_seconds_bucket" in text


def test_api_key_guards_everything_but_operations(settings):
    settings.api_key = "s3cret"
    with TestClient(create_app(settings)) as client:
        assert client.get("/datasets").status_code == 401
        assert client.get("/datasets", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get("/datasets", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert client.get("/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        for open_route in ("/health", "/ready", "/metrics", "/docs", "/openapi.json"):
            assert client.get(open_route).status_code == 200, open_route


class Records(logging.Handler):
    """Keeps the records it is given (a handler of its own: what pytest's caplog attaches to
    non-propagating loggers depends on when they became so)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_one_json_log_line_per_request(client, multilabel_dataset):
    """Each request is one INFO record of ``labelserve.http``: route template (not the raw path),
    method, status and duration, formatted as one JSON line like every other log line."""
    logger, captured = logging.getLogger("labelserve.http"), Records()
    level = logging.getLogger("labelserve").level
    train(client, "mlknn", multilabel_dataset["id"], "logged", k=3)
    logger.addHandler(captured)
    try:
        client.get("/health")
        client.get("/datasets/0123456789abcdef")
        client.get("/no/such/path")
        client.post("/predict", json={"model": "logged", "instances": [[0.5] * 6]})  # the ASGI fast path
        lines = [json.loads(JsonFormatter().format(r)) for r in captured.records]
        assert [(e["method"], e["route"], e["status"]) for e in lines] == [
            ("GET", "/health", 200),
            ("GET", "/datasets/{dataset_id}", 404),
            ("GET", "unmatched", 404),
            ("POST", "/predict", 200),
        ]
        for entry in lines:
            assert entry["level"] == "INFO" and entry["message"] == "request" and entry["logger"] == "labelserve.http"
            assert isinstance(entry["duration_ms"], float) and 0 <= entry["duration_ms"] < 60_000
        # below INFO's priority nothing is logged (and nothing but the level check is spent)
        captured.records.clear()
        logging.getLogger("labelserve").setLevel(logging.WARNING)
        client.get("/health")
        assert captured.records == []
    finally:
        logger.removeHandler(captured)
        logging.getLogger("labelserve").setLevel(level)
