"""``POST /train`` and ``/jobs`` over HTTP: validation before any work, versions, cancellation,
crash recovery and restart persistence."""

from __future__ import annotations

import io
import time
import zipfile

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.methods.base import InvalidParameterError
from app.methods.catalog import catalog
from app.storage.db import Database
from app.storage.orm import Job
from tests.helpers import long_job, make_distribution, make_multilabel, train, upload_csv, wait_status


def test_training_adds_versions_with_full_metadata(client, distribution_dataset):
    first = train(client, "ldlkm", distribution_dataset["id"], "ldl", k=3)
    second = train(client, "ldlkm", distribution_dataset["id"], "ldl", k=4)
    assert first["model"] == {"name": "ldl", "version": 1}
    assert second["model"] == {"name": "ldl", "version": 2}
    assert first["progress"] == 1.0 and first["started_at"] and first["finished_at"]
    version = client.get("/models/ldl/versions/2").json()
    assert version["params"]["k"] == 4 and "max_iter" in version["params"]  # defaults filled in
    assert version["dataset_id"] == distribution_dataset["id"]
    assert version["dataset_sha256"] == distribution_dataset["sha256"]
    assert version["label_names"] == distribution_dataset["label_names"]
    assert {"numpy", "scikit-learn", "python"} <= set(version["library_versions"])
    assert len(version["artifact_sha256"]) == 64 and version["training_seconds"] >= 0


def test_train_without_wait_returns_202_and_a_status_url(client, multilabel_dataset):
    r = client.post("/train", json={"method": "mlknn", "dataset_id": multilabel_dataset["id"], "model_name": "async"})
    assert r.status_code == 202
    body = r.json()
    assert body["status"] == "queued" and body["status_url"] == f"/jobs/{body['job_id']}"
    deadline = time.time() + 60
    while client.get(body["status_url"]).json()["status"] not in ("succeeded", "failed"):
        assert time.time() < deadline
        time.sleep(0.05)
    assert client.get(body["status_url"]).json()["status"] == "succeeded"
    assert client.get("/jobs").json()["items"][0]["id"] == body["job_id"]
    assert client.get("/jobs?status=failed").json()["items"] == []


def test_inline_data_is_stored_as_a_dataset(client):
    X, Y = make_multilabel(n=30)
    r = client.post(
        "/train?wait=true",
        json={
            "method": "mlknn",
            "model_name": "inline",
            "params": {"k": 3},
            "data": {"X": X.tolist(), "Y": Y.tolist(), "label_names": ["a", "b", "c"]},
        },
    )
    assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
    version = client.get("/models/inline/versions/1").json()
    assert version["label_names"] == ["a", "b", "c"]
    assert client.get(f"/datasets/{version['dataset_id']}").json()["name"] == "inline"


def test_bad_requests_are_rejected_before_any_work(client, multilabel_dataset, distribution_dataset):
    ml, ldl = multilabel_dataset["id"], distribution_dataset["id"]
    cases = [
        ({"method": "nope", "dataset_id": ml, "model_name": "m"}, 422, "method"),
        ({"method": "mlknn", "dataset_id": ml, "model_name": "m", "params": {"kk": 3}}, 422, "kk"),
        ({"method": "mlknn", "dataset_id": ml, "model_name": "m", "params": {"k": "many"}}, 422, "k"),
        ({"method": "mlknn", "dataset_id": ml, "model_name": "m", "params": {"k": 0}}, 422, "k"),
        ({"method": "ldlkm", "dataset_id": ml, "model_name": "m"}, 422, "distribution"),
        ({"method": "mlknn", "dataset_id": ldl, "model_name": "m"}, 422, "multilabel"),
        ({"method": "mlknn", "dataset_id": "missing", "model_name": "m"}, 404, "missing"),
        ({"method": "mlknn", "model_name": "m"}, 422, "dataset_id"),
        ({"method": "mlknn", "dataset_id": ml, "model_name": "bad name!"}, 422, "model_name"),
        ({"method": "mlknn", "dataset_id": ml, "model_name": "m", "extra": 1}, 422, "extra"),
        ({"method": "mlknn", "model_name": "m", "data": {"X": [[1, 2], [3]], "Y": [[1], [0]]}}, 422, "data"),
        (
            {"method": "mlknn", "model_name": "m", "data": {"X": [[1.0], [2.0]], "Y": [[1], [5]]}},
            422,
            "label",
        ),
    ]
    for body, code, word in cases:
        r = client.post("/train", json=body)
        assert r.status_code == code, (body, r.text)
        assert word in r.text, (word, r.text)
    assert client.get("/jobs").json()["items"] == []


def test_a_boolean_or_a_numeric_string_is_no_integer(client, multilabel_dataset):
    """Issue 24: pydantic's lax mode took ``"random_state": false`` as 0 (and ``true`` as 1, ``"5"``
    as 5): every integer of a request, the methods' parameters included, is a 422 at its field for
    them, and nothing is queued."""
    ml = multilabel_dataset["id"]
    train = {"method": "mlknn", "dataset_id": ml, "model_name": "m"}
    cases = [
        ("/train", {**train, "random_state": False}, ["body", "random_state"]),
        ("/train", {**train, "random_state": "3"}, ["body", "random_state"]),
        ("/train", {**train, "random_state": 3.5}, ["body", "random_state"]),
        ("/train", {**train, "params": {"k": True}}, ["body", "params", "k"]),
        ("/train", {**train, "params": {"k": "5"}}, ["body", "params", "k"]),
        ("/train", {**train, "method": "auto", "params": {"cv": True}}, ["body", "params", "cv"]),
        (
            "/train",
            {**train, "feature_selector": {"model": "sel", "top_k": True}},
            ["body", "feature_selector", "top_k"],
        ),
        (
            "/train",
            {**train, "method": "dmknn", "params": {"beta_prior": [True, 1]}},
            ["body", "params", "beta_prior", 0],
        ),
        ("/compare", {"dataset_id": ml, "methods": ["br"], "random_state": False}, ["body", "random_state"]),
        ("/compare", {"dataset_id": ml, "methods": ["br"], "cv": True}, ["body", "cv"]),
        (f"/datasets/{ml}/split", {"random_state": False}, ["body", "random_state"]),
        (f"/datasets/{ml}/split", {"test_fraction": "0.5"}, ["body", "test_fraction"]),
    ]
    for path, body, loc in cases:
        r = client.post(path, json=body)
        assert r.status_code == 422, (path, body, r.text)
        assert [item["loc"] for item in r.json()["detail"]] == [loc], (body, r.text)
    assert client.get("/jobs").json()["items"] == []
    assert client.put("/models/m/aliases/prod", json={"version": True}).status_code == 422
    # what the lax mode was right to take still validates: a JSON array for a tuple, an integer for a float
    r = client.post(
        "/train", json={**train, "method": "dmknn", "params": {"beta_prior": [1, 2], "s": 1}, "random_state": 0}
    )
    assert r.status_code == 202, r.text


def test_k_larger_than_the_training_set_is_refused_at_submit(client, multilabel_dataset):
    # the estimator would refuse it at fit time; the submit already knows the dataset's size
    r = client.post(
        "/train?wait=true",
        json={
            "method": "mlknn",
            "dataset_id": multilabel_dataset["id"],
            "model_name": "too-big",
            "params": {"k": 500},
        },
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "params", "k"]
    assert client.get("/models/too-big").status_code == 404
    assert client.get("/jobs").json()["items"] == []


def test_submit_refuses_exactly_what_fit_refuses_for_the_size_of_the_data(client):
    """The bounds the number of training rows n sets are declared once, on the estimator: submit
    answers a 422 at the parameter with fit's own message where fit refuses, and trains where
    fit fits. aa-knn's k may be n (a query is no training row) unless the leave-one-out choice
    of its shrinkage predicts each training row from the n - 1 others."""
    n = 12
    X, Y = make_multilabel(n=n, seed=1)
    Xd, D = make_distribution(n=n)
    ml, ldl = upload_csv(client, X, Y, "ml12")["id"], upload_csv(client, Xd, D, "ldl12")["id"]
    cases = [  # (method, params, whether fit takes them)
        ("mlknn", {"k": n - 1}, True),
        ("mlknn", {"k": n}, False),
        ("dmknn", {"k": n}, False),
        ("aa-knn", {"k": n, "shrinkage": 0.3}, True),
        ("aa-knn", {"k": n}, False),  # shrinkage="loo"
        ("aa-knn", {"k": n + 1, "shrinkage": 0.3}, False),
        ("ldlkm", {"k": n}, True),
        ("ldlkm", {"k": n + 1}, False),
        ("elcfs", {"n_clusters": n, "max_iter": 5}, True),
        ("elcfs", {"n_clusters": n + 1}, False),
    ]
    for method, params, fits in cases:
        spec = catalog()[method]
        data = (Xd, D) if spec.dataset_kind == "distribution" else (X, Y)
        try:
            spec.build(params).fit(*data)
            refused = None
        except InvalidParameterError as exc:
            refused = exc
        assert (refused is None) is fits, (method, params, refused)
        dataset = ldl if spec.dataset_kind == "distribution" else ml
        body = {"method": method, "dataset_id": dataset, "model_name": "bounds", "params": params}
        r = client.post("/train?wait=true", json=body)
        if refused is None:
            assert r.status_code == 200 and r.json()["status"] == "succeeded", (method, params, r.text)
        else:
            assert r.status_code == 422, (method, params, r.text)
            [item] = r.json()["detail"]
            assert item["loc"] == ["body", "params", refused.param] and item["msg"] == refused.errors[0]["msg"]


def test_failed_training_reports_why(client):
    # fewer distinct rows than clusters: only the fit can tell, and the job says why
    X = np.repeat(np.random.default_rng(0).random((3, 4)), 10, axis=0)
    D = np.full((30, 2), 0.5)
    dataset = upload_csv(client, X, D, "dupes")
    r = client.post(
        "/train?wait=true",
        json={"method": "ldlkm", "dataset_id": dataset["id"], "model_name": "dupes", "params": {"k": 5}},
    )
    job = r.json()
    assert r.status_code == 200 and job["status"] == "failed" and "distinct training rows" in job["error"]
    assert client.get("/models/dupes").status_code == 404


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_cancel_running_and_queued_jobs(client):
    X, Y = make_multilabel(n=300, d=60, q=4)
    dataset = upload_csv(client, X, Y, "cancel")
    running = long_job(client, dataset["id"], "long")
    queued = long_job(client, dataset["id"], "long")  # one pool process: this one waits
    job = wait_status(client, running, ("running",))
    while job["progress"] == 0.0 or job["stage"] != "iterations":
        job = client.get(f"/jobs/{running}").json()
    assert client.get(f"/jobs/{queued}").json()["status"] == "queued"
    assert client.delete(f"/jobs/{queued}").json()["status"] == "cancelled"
    cancelled = client.delete(f"/jobs/{running}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.delete(f"/jobs/{running}").status_code == 409
    # the worker notices at its next progress report; nothing is registered, and the pool is
    # free again for the next job
    ok = client.post("/train?wait=true", json={"method": "mlknn", "dataset_id": dataset["id"], "model_name": "after"})
    assert ok.json()["status"] == "succeeded"
    assert client.get("/models/long").status_code == 404
    assert client.get(f"/jobs/{queued}").json()["started_at"] is None
    assert client.delete("/jobs/unknown").status_code == 404


def _worker_of(settings, job_id: str) -> str:
    with Database(settings.database_url).reading() as session:
        worker = session.get_one(Job, job_id).worker
    assert worker is not None
    return worker


@pytest.mark.parametrize("bound", [0.001, 0])
def test_a_training_process_whose_job_grew_large_is_replaced(settings, bound):
    """A pool process kept its high-water memory (1.34 GB after a cancelled rf) until the API
    stopped; past LABELSERVE_RECYCLE_WORKER_MB (here a tiny bound) it is replaced after its job,
    cancelled or not. 0 keeps the process."""
    with TestClient(create_app(settings.model_copy(update={"recycle_worker_mb": bound}))) as client:
        X, Y = make_multilabel(n=60)
        dataset = upload_csv(client, X, Y)
        first = long_job(client, dataset["id"], "cancelled")
        wait_status(client, first, ("running",))
        assert client.delete(f"/jobs/{first}").json()["status"] == "cancelled"
        second = train(client, "br", dataset["id"], "after")["id"]
        third = train(client, "br", dataset["id"], "after")["id"]
        workers = [_worker_of(settings, job) for job in (first, second, third)]
    assert len(set(workers)) == (3 if bound else 1), workers  # one pool process (LABELSERVE_WORKERS=1)


def test_crash_recovery_fails_running_and_requeues_queued(settings, tmp_path):
    X, Y = make_multilabel(n=40)
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y)
    with Database(settings.resolved_database_url).session() as session:
        request = {"method": "mlknn", "dataset_id": dataset["id"], "model_name": "recovered", "params": {}}
        session.add(
            Job(
                id="crashed",
                kind="train",
                status="running",
                request=request,
                method="mlknn",
                dataset_id=dataset["id"],
                model_name="recovered",
            )
        )
        session.add(
            Job(
                id="waiting",
                kind="train",
                status="queued",
                request=request,
                method="mlknn",
                dataset_id=dataset["id"],
                model_name="recovered",
            )
        )
    with TestClient(create_app(settings)) as client:
        crashed = client.get("/jobs/crashed").json()
        assert crashed["status"] == "failed" and "interrupted" in crashed["error"]
        assert wait_status(client, "waiting", ("succeeded", "failed"))["status"] == "succeeded"


def test_restart_gives_identical_predictions(settings):
    X, Y = make_multilabel(n=60)
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y)
        train(client, "mlknn", dataset["id"], "persist", k=5)
        body = {"model": "persist", "instances": X[:10].tolist(), "output": "ranking"}
        before = client.post("/predict", json=body).json()
    with TestClient(create_app(settings)) as client:
        after = client.post("/predict", json=body).json()
        assert after == before
        assert client.get("/models/persist").json()["latest_version"] == 1
        assert np.isclose(
            after["predictions"][0]["ranking"][0]["score"], before["predictions"][0]["ranking"][0]["score"]
        )


def test_unseeded_training_records_the_seed_it_used(client, distribution_dataset):
    train(client, "ldlkm", distribution_dataset["id"], "seeded", k=3)
    seed = client.get("/models/seeded/versions/1").json()["params"]["random_state"]
    assert isinstance(seed, int)
    # retraining with the recorded seed reproduces the model exactly
    train(client, "ldlkm", distribution_dataset["id"], "seeded", k=3, random_state=seed)
    X = [[0.1, 0.2, 0.3, 0.4, 0.5]]
    first = client.post("/predict", json={"model": "seeded@1", "instances": X}).json()
    second = client.post("/predict", json={"model": "seeded@2", "instances": X}).json()
    assert first["predictions"] == second["predictions"]


def test_version_lists_the_warnings_its_training_raised(client):
    # rare labels, one per sample: ML-kNN's 0.5 rule leaves most training samples with no label
    rng = np.random.default_rng(3)
    X = rng.random((120, 4))
    Y = np.zeros((120, 6), dtype=int)
    Y[np.arange(120), rng.integers(0, 6, size=120)] = 1
    dataset = upload_csv(client, X, Y, name="rare")
    train(client, "mlknn", dataset["id"], "literal", k=5, threshold="map", ensure_nonempty="off")
    warned = client.get("/models/literal/versions/1").json()["warnings"]
    assert [w["category"] for w in warned] == ["EmptyLabelSetWarning"]
    assert "empty label set" in warned[0]["message"]
    train(client, "mlknn", dataset["id"], "default", k=5)
    assert client.get("/models/default/versions/1").json()["warnings"] == []
    train(client, "elcfs", dataset["id"], "capped", max_iter=1, tol=0.0)
    capped = client.get("/models/capped").json()["versions"][0]["warnings"]
    assert "ConvergenceWarning" in [w["category"] for w in capped]


def test_version_records_the_neighbour_search_and_its_recall(client):
    rng = np.random.default_rng(4)
    X = rng.random((300, 5))
    Y = (X[:, :3] + 0.2 * rng.random((300, 3)) > 0.6).astype(int)
    dataset = upload_csv(client, X, Y, name="knn")
    train(client, "mlknn", dataset["id"], "approx", k=5, neighbors="approximate")
    details = client.get("/models/approx/versions/1").json()["fit_details"]
    assert details["neighbour_search"] == "approximate"
    assert isinstance(details["neighbour_recall"], float) and 0.9 <= details["neighbour_recall"] <= 1.0
    assert isinstance(details["neighbour_query_recall"], float) and 0.9 <= details["neighbour_query_recall"] <= 1.0
    train(client, "dmknn", dataset["id"], "exact", k=5)
    version = client.get("/models/exact/versions/1").json()
    exact = version["fit_details"]
    assert exact["neighbour_search"] == "exact" and exact["neighbour_recall"] is None
    assert exact["neighbour_query_recall"] is None
    assert exact["label_rule"] == "paper"  # dmknn's default: Algorithm 4
    # ML-kNN's rule does better on these data (0.920 against 0.865 leave-one-out): the version says so
    [better] = [w["message"] for w in version["warnings"] if w["category"] == "BetterRuleWarning"]
    assert "0.920 against 0.865" in better and 'label_sets="auto"' in better
    train(client, "br", dataset["id"], "plain")
    learned = client.get("/models/plain/versions/1").json()["fit_details"]
    assert set(learned) == {"threshold", "fill_empty", "memory_mb"} and 0 < learned["threshold"] < 1  # threshold="cv"


def test_version_records_its_memory_estimate_beside_the_measured_peak_and_artifact(client):
    rng = np.random.default_rng(5)
    X = rng.random((200, 6))
    Y = (X[:, :2] > 0.5).astype(int)
    dataset = upload_csv(client, X, Y, name="memory")
    train(client, "rf", dataset["id"], "forest", n_estimators=20)
    version = client.get("/models/forest/versions/1").json()
    memory = version["fit_details"]["memory_mb"]
    assert {"estimate_peak", "estimate_model", "artifact"} <= set(memory)
    assert memory["estimate_model"] > 0 and memory["estimate_peak"] >= memory["estimate_model"]
    export = client.get("/models/forest/versions/1/artifact")
    assert export.status_code == 200
    # the artifact's recorded size is the saved model file's (the export zips it with a manifest)
    with zipfile.ZipFile(io.BytesIO(export.content)) as archive:
        size_mb = archive.getinfo("model.pkl").file_size / 2**20
    assert abs(memory["artifact"] - size_mb) <= 0.05 + 1e-9
    if "measured_peak" in memory:  # Linux: the resident high-water mark of the fit
        assert memory["resident_peak"] >= memory["measured_peak"]


def test_every_route_that_queues_a_job_answers_the_same_202(settings):
    # /train answered {job_id, status, status_url, random_state} and /compare the job record (no job_id)
    with TestClient(create_app(settings.model_copy(update={"batch_job_rows": 10}))) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        train(client, "mlknn", dataset["id"], "clf", k=3)
        answers = {
            "train": client.post("/train", json={"method": "br", "dataset_id": dataset["id"], "model_name": "b"}),
            "compare": client.post("/compare", json={"dataset_id": dataset["id"], "methods": ["br"], "cv": 2}),
            "predict": client.post("/predict", json={"model": "clf", "dataset_id": dataset["id"]}),  # 30 rows: a job
        }
        for kind, r in answers.items():
            assert r.status_code == 202, (kind, r.text)
            body = r.json()
            assert body["job_id"] == body["id"] and body["status_url"] == f"/jobs/{body['job_id']}", body
            assert body["kind"] == kind and body["status"] == "queued" and "random_state" in body, body
            assert wait_status(client, body["job_id"], ("succeeded", "failed"))["status"] == "succeeded"


def test_a_dataset_training_is_checked_while_another_connection_holds_the_write_lock(
    client, multilabel_dataset, settings, monkeypatch
):
    """The submit reads the dataset and its stored file outside any write transaction: only the
    job's insert waits for the lock, so its checks finish while another writer holds it."""
    import sqlite3
    import threading

    from app.services import memory

    if not settings.database_url.startswith("sqlite"):
        pytest.skip("the write lock is SQLite's; PostgreSQL writers do not exclude each other")
    checked = threading.Event()
    shape_of = memory.dataset_shape

    def recorded(store, dataset):
        checked.set()
        return shape_of(store, dataset)

    monkeypatch.setattr(memory, "dataset_shape", recorded)
    holder = sqlite3.connect(settings.database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    answers: list = []
    body = {"method": "br", "dataset_id": multilabel_dataset["id"], "model_name": "locked"}
    submit = threading.Thread(target=lambda: answers.append(client.post("/train", json=body)))
    submit.start()
    try:
        assert checked.wait(20), "the submit's checks waited for another connection's write lock"
        assert not answers  # the job's insert is what waits for the lock
    finally:
        holder.execute("COMMIT")
        holder.close()
    submit.join(60)
    assert answers and answers[0].status_code == 202, answers
