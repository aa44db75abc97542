"""Operations routes, the method catalog, the docs and the optional API key."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app
from tests.helpers import make_multilabel, upload_csv


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
            "rf",
            "mi-filter",
            "aa-knn",
            "sa-maxent",
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
        assert client.get("/datasets", headers={"X-API-Key": "wrong"}).status_code == 403
        assert client.get("/datasets", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert client.get("/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        for open_route in ("/health", "/ready", "/metrics", "/docs", "/openapi.json"):
            assert client.get(open_route).status_code == 200, open_route
