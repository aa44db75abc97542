"""Limits on what one request may ask of the job machinery (issue 24): a job's own time limit
(``max_seconds``), over HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.helpers import make_multilabel, upload_csv, wait_status


def test_a_training_past_its_own_max_seconds_fails_naming_it(client: TestClient):
    X, Y = make_multilabel(n=30)
    dataset = upload_csv(client, X, Y)
    body = {"method": "elcfs", "dataset_id": dataset["id"], "model_name": "endless"}
    body |= {"params": {"max_iter": 10_000_000, "tol": 0.0}, "max_seconds": 1}  # long_job's, with a limit
    r = client.post("/train", json=body)
    assert r.status_code == 202, r.text
    job = wait_status(client, r.json()["job_id"], ("failed", "succeeded", "cancelled"), timeout=60)
    assert job["status"] == "failed", job
    assert "the request's time limit is 1 s (max_seconds)" in job["error"], job
    assert job["max_seconds"] == 1


def test_a_comparison_past_its_own_max_seconds_fails_naming_it(client: TestClient):
    X, Y = make_multilabel(n=300, d=20)
    dataset = upload_csv(client, X, Y)
    body = {"dataset_id": dataset["id"], "methods": ["rf", "ecc", "mlknn"], "cv": 5, "max_seconds": 0.5}
    r = client.post("/compare", json=body)
    assert r.status_code == 202, r.text
    job = wait_status(client, r.json()["id"], ("failed", "succeeded", "cancelled"), timeout=60)
    assert job["status"] == "failed", job
    assert "the request's time limit is 0.5 s (max_seconds)" in job["error"], job


def test_max_seconds_beyond_the_servers_limit_is_refused_and_nothing_is_queued(settings: Settings):
    with TestClient(create_app(settings.model_copy(update={"max_job_seconds": 10.0}))) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        train = {"method": "mlknn", "dataset_id": dataset["id"], "model_name": "m", "max_seconds": 20}
        compare = {"dataset_id": dataset["id"], "max_seconds": 20}
        for route, body in (("/train", train), ("/compare", compare)):
            r = client.post(route, json=body)
            assert r.status_code == 422, r.text
            [item] = r.json()["detail"]
            assert item["loc"] == ["body", "max_seconds"]
            assert "10 s" in item["msg"] and "LABELSERVE_MAX_JOB_SECONDS" in item["msg"], item
        assert client.get("/jobs").json()["items"] == []
        for bad in (0, -1):
            assert client.post("/train", json=train | {"max_seconds": bad}).status_code == 422
        # within the limit: accepted, and the server's limit would still apply to the rest
        r = client.post("/train", json=train | {"max_seconds": 5})
        assert r.status_code == 202, r.text
        wait_status(client, r.json()["job_id"], ("succeeded",))
