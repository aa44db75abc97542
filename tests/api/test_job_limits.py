"""Limits on what one request may ask of the job machinery (issue 24): a job's own time limit
(``max_seconds``) and the jobs one API key may have queued, over HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.client import Client
from app.config import Settings
from app.main import create_app
from app.services.keys import Role, add_key
from app.storage.db import Database
from app.storage.orm import Job
from tests.helpers import long_job, make_multilabel, train, upload_csv, wait_status


def test_a_training_past_its_own_max_seconds_fails_naming_it(client: TestClient):
    X, Y = make_multilabel(n=30)
    dataset = upload_csv(client, X, Y)
    body = {"method": "elcfs", "dataset_id": dataset["id"], "model_name": "endless"}
    body |= {"params": {"max_iter": 1_000_000, "tol": 0.0}, "max_seconds": 1}  # long_job's, with a limit
    r = client.post("/train", json=body)
    assert r.status_code == 202, r.text
    job = wait_status(client, r.json()["job_id"], ("failed", "succeeded", "cancelled"), timeout=60)
    assert job["status"] == "failed", job
    assert (
        "the request's time limit is 1 s (max_seconds); give a larger max_seconds, up to the server's 21600 s"
        in (job["error"])
    ), job
    assert job["max_seconds"] == 1


def test_jobs_are_bounded_by_default(settings: Settings):
    """No default time limit and no maximum of ecc's n_chains: one request could hold a training
    process for days. A job past the server's limit fails saying which setting to raise."""
    assert Settings().max_job_seconds == 6 * 3600
    with TestClient(create_app(settings.model_copy(update={"max_job_seconds": 1.0}))) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        r = client.post(
            "/train",
            json={"method": "ecc", "dataset_id": dataset["id"], "model_name": "m", "params": {"n_chains": 100_000}},
        )
        assert r.status_code == 422, r.text
        [item] = r.json()["detail"]
        assert item["loc"] == ["body", "params", "n_chains"] and "less than or equal to 100" in item["msg"], item
        r = client.post("/compare", json={"dataset_id": dataset["id"], "methods": ["br", "mlknn", "br"]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "methods", 2], r.text
        auto = {"method": "auto", "dataset_id": dataset["id"], "model_name": "m"}
        r = client.post("/train", json=auto | {"params": {"candidates": ["br", "br"]}})
        assert r.status_code == 422 and "'br' is listed twice" in r.text, r.text
        job = wait_status(client, long_job(client, dataset["id"], "endless"), ("failed", "succeeded"), timeout=60)
        assert "the server's job time limit is 1 s" in job["error"], job
        assert "raise LABELSERVE_MAX_JOB_SECONDS for longer jobs" in job["error"], job


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


def test_a_key_with_the_most_jobs_queued_is_refused_429_and_nothing_is_stored(settings: Settings):
    # nothing bounded the queue: one client could queue thousands of jobs ahead of everyone else
    key = "s3cret-key"
    limited = {"api_key": key, "max_queued_jobs_per_key": 2, "batch_job_rows": 10}
    with TestClient(create_app(settings.model_copy(update=limited)), headers={"X-API-Key": key}) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        train(client, "mlknn", dataset["id"], "clf", k=3)  # the model of the batch prediction below
        running = long_job(client, dataset["id"], "first")  # holds the one training process
        wait_status(client, running, ("running",))
        compare = {"dataset_id": dataset["id"], "methods": ["br"], "cv": 2}
        with ThreadPoolExecutor(4) as pool:  # at the bound at once: the count and the insert are one transaction
            answers = list(pool.map(lambda _: client.post("/compare", json=compare), range(4)))
        assert sorted(a.status_code for a in answers) == [202, 202, 429, 429], [a.text for a in answers]
        refused = next(a for a in answers if a.status_code == 429)
        assert refused.headers["Retry-After"].isdigit()
        assert "LABELSERVE_MAX_QUEUED_JOBS_PER_KEY=2" in refused.json()["detail"], refused.text
        jobs_before = client.get("/jobs").json()["items"]
        datasets_before = client.get("/datasets").json()["items"]
        inline = {"X": X.tolist(), "Y": Y.tolist()}
        for route, body in (
            ("/train", {"method": "br", "data": inline, "model_name": "inline"}),  # its data are not stored either
            ("/predict", {"model": "clf", "dataset_id": dataset["id"]}),  # 30 rows > 10: a batch job
        ):
            r = client.post(route, json=body)
            assert r.status_code == 429 and "Retry-After" in r.headers, r.text
        assert [job["id"] for job in client.get("/jobs").json()["items"]] == [job["id"] for job in jobs_before]
        assert client.get("/datasets").json()["items"] == datasets_before
        for job in jobs_before:
            if job["status"] in ("queued", "running"):
                client.delete(f"/jobs/{job['id']}")
    with Database(settings.resolved_database_url).reading() as session:
        submitters = set(session.scalars(select(Job.submitter)))
    assert submitters == {"default"}  # the key's name, never the key


def test_each_key_has_its_own_share_of_the_queue(settings: Settings, tmp_path: Path):
    path = tmp_path / "keys.jsonl"
    one, other = add_key(path, "one", Role.TRAIN), add_key(path, "other", Role.TRAIN)
    limited = {"api_keys_file": path, "max_queued_jobs_per_key": 1}
    with TestClient(create_app(settings.model_copy(update=limited)), headers={"X-API-Key": one}) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        running = long_job(client, dataset["id"], "first")  # holds the one training process
        wait_status(client, running, ("running",))
        compare = {"dataset_id": dataset["id"], "methods": ["br"], "cv": 2}
        assert client.post("/compare", json=compare).status_code == 202
        refused = client.post("/compare", json=compare)
        assert refused.status_code == 429 and "this API key ('one') has 1 jobs queued" in refused.json()["detail"]
        assert client.post("/compare", json=compare, headers={"X-API-Key": other}).status_code == 202
        for job in client.get("/jobs").json()["items"]:
            client.delete(f"/jobs/{job['id']}")


def test_without_keys_each_client_address_has_its_own_share(settings: Settings):
    api = create_app(settings.model_copy(update={"max_queued_jobs_per_key": 1}))
    with TestClient(api, client=("192.0.2.1", 5000)) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        running = long_job(client, dataset["id"], "first")
        wait_status(client, running, ("running",))
        compare = {"dataset_id": dataset["id"], "methods": ["br"], "cv": 2}
        assert client.post("/compare", json=compare).status_code == 202
        refused = client.post("/compare", json=compare)
        assert refused.status_code == 429 and "this client (192.0.2.1) has 1 jobs queued" in refused.json()["detail"]
        elsewhere = TestClient(api, client=("192.0.2.2", 5000))  # the same app, started above
        assert elsewhere.post("/compare", json=compare).status_code == 202
        for job in client.get("/jobs").json()["items"]:
            client.delete(f"/jobs/{job['id']}")


# the Python client sets each long poll's read timeout; Starlette's TestClient has none to set
@pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")
def test_waiters_beyond_the_bound_are_refused_429_and_queue_nothing(settings: Settings):
    # 300 concurrent long polls slowed every other route 35x: nothing bounded the parked waiters
    with TestClient(create_app(settings.model_copy(update={"max_waiters": 2}))) as client:
        events = client.app.state.core.runner.events  # type: ignore[attr-defined]
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        running = long_job(client, dataset["id"], "endless")
        with ThreadPoolExecutor(2) as pool:
            parked = [pool.submit(client.get, f"/jobs/{running}", params={"wait": 60}) for _ in range(2)]
            deadline = time.monotonic() + 30
            while events.waiting() < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            r = client.get(f"/jobs/{running}", params={"wait": 5})
            assert r.status_code == 429 and r.headers["Retry-After"].isdigit(), r.text
            assert "LABELSERVE_MAX_WAITERS=2" in r.json()["detail"], r.text
            body = {"method": "mlknn", "dataset_id": dataset["id"], "model_name": "m"}
            r = client.post("/train", params={"wait": "true"}, json=body)
            assert r.status_code == 429 and "Retry-After" in r.headers, r.text
            assert [job["id"] for job in client.get("/jobs").json()["items"]] == [running]  # nothing queued
            assert client.get(f"/jobs/{running}").status_code == 200  # no wait: no place needed
            with ThreadPoolExecutor(1) as waiting:  # the Python client waits on: it retries after Retry-After
                followed = waiting.submit(Client(http=client).wait, running, poll=1.0)
                time.sleep(0.5)
                client.delete(f"/jobs/{running}")
                assert [f.result().json()["status"] for f in parked] == ["cancelled", "cancelled"]
                assert followed.result(timeout=30)["status"] == "cancelled"
        job = client.post("/train", params={"wait": "true"}, json=body).json()  # the places are free again
        assert job["status"] == "succeeded", job
