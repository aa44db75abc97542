"""``POST /predict`` and ``POST /evaluate`` over HTTP, for every output kind and error path."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.helpers import make_distribution, make_multilabel, train, upload_csv


@pytest.fixture
def classifier(client, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "clf", k=5)
    return multilabel_dataset


def predict(client, **body):
    return client.post("/predict", json=body)


def test_gbm_trains_and_predicts_over_http(client, multilabel_dataset):
    job = train(client, "gbm", multilabel_dataset["id"], "boosted", n_estimators=20, n_jobs=-1)
    version = client.get("/models/boosted/versions/1").json()
    assert version["method"] == "gbm" and version["params"]["num_leaves"] == 7  # defaults filled in
    assert "lightgbm" in version["library_versions"] and job["progress"] == 1.0
    X, _ = make_multilabel()
    labels = predict(client, model="boosted", instances=X[:3].tolist()).json()
    assert labels["model"]["method"] == "gbm" and len(labels["predictions"]) == 3
    ranking = predict(client, model="boosted", instances=X[:3].tolist(), output="ranking").json()
    assert [len(p["ranking"]) for p in ranking["predictions"]] == [3, 3, 3]


def test_labels_ranking_and_scores(client, classifier):
    X, Y = make_multilabel()
    labels = predict(client, model="clf", instances=X[:4].tolist()).json()
    assert labels["model"] == {"name": "clf", "version": 1, "method": "mlknn"}
    assert labels["output"] == "labels" and len(labels["predictions"]) == 4
    assert set().union(*(p["labels"] for p in labels["predictions"])) <= {"label0", "label1", "label2"}

    ranking = predict(client, model="clf", instances=X[:4].tolist(), output="ranking").json()
    for item in ranking["predictions"]:
        scores = [entry["score"] for entry in item["ranking"]]
        assert scores == sorted(scores, reverse=True) and len(scores) == 3
    top = predict(client, model="clf", instances=X[:4].tolist(), output="ranking", top_k=1).json()
    assert [len(p["ranking"]) for p in top["predictions"]] == [1] * 4

    scored = predict(client, model="clf", instances=X[:2].tolist(), include_scores=True).json()
    for item in scored["predictions"]:
        assert set(item["scores"]) == {"label0", "label1", "label2"}
        assert set(item["labels"]) == {k for k, v in item["scores"].items() if v > 0.5}
    everything = predict(client, model="clf", instances=X[:5].tolist(), threshold=0.0).json()
    assert all(len(p["labels"]) == 3 for p in everything["predictions"])


def test_instances_as_objects_match_lists(client, classifier):
    X, _ = make_multilabel()
    names = classifier["feature_names"]
    as_lists = predict(client, model="clf", instances=X[:3].tolist(), output="ranking").json()
    objects = [dict(zip(reversed(names), reversed(row))) for row in X[:3].tolist()]
    as_objects = predict(client, model="clf", instances=objects, output="ranking").json()
    assert as_objects == as_lists


def test_batch_prediction_of_a_stored_dataset(client, classifier):
    r = predict(client, model="clf", dataset_id=classifier["id"])
    assert r.status_code == 200 and len(r.json()["predictions"]) == classifier["n_samples"]


def test_large_batch_runs_as_a_job_with_a_downloadable_result(client, classifier):
    client.app.state.settings.batch_job_rows = 10
    r = predict(client, model="clf", dataset_id=classifier["id"], output="ranking", format="csv")
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    from tests.helpers import wait_status

    assert wait_status(client, job_id, ("succeeded", "failed"))["status"] == "succeeded"
    result = client.get(f"/jobs/{job_id}/result")
    rows = result.text.strip().splitlines()
    assert result.headers["content-type"].startswith("text/csv")
    assert rows[0] == "row,label0,label1,label2" and len(rows) == classifier["n_samples"] + 1


def test_prediction_errors(client, classifier, distribution_dataset):
    X, _ = make_multilabel()
    cases = [
        ({"model": "clf", "instances": X[:2, :3].tolist()}, 422, "expected 6 features, received 3"),
        ({"model": "clf", "instances": [{"f0": 1.0}]}, 422, "missing"),
        ({"model": "clf", "instances": [{**{f"f{j}": 0.1 for j in range(6)}, "zz": 1.0}]}, 422, "zz"),
        ({"model": "clf", "instances": []}, 422, "at least one"),
        ({"model": "clf", "instances": X[:1].tolist(), "output": "distribution"}, 422, "output"),
        ({"model": "clf"}, 422, "instances"),
        ({"model": "clf", "dataset_id": distribution_dataset["id"]}, 422, "features"),
        ({"model": "clf", "dataset_id": "missing"}, 404, "missing"),
        ({"model": "nope", "instances": X[:1].tolist()}, 404, "nope"),
        ({"model": "clf@7", "instances": X[:1].tolist()}, 404, "clf@7"),
        ({"model": "clf@prod", "instances": X[:1].tolist()}, 404, "prod"),
        ({"model": "bad ref!", "instances": X[:1].tolist()}, 422, "reference"),
        ({"model": "clf", "instances": [["a"] * 6]}, 422, "instances"),
    ]
    for body, code, text in cases:
        r = client.post("/predict", json=body)
        assert r.status_code == code, (body, r.text)
        assert text in r.text, (text, r.text)


def test_nan_instances_are_rejected(client, classifier):
    payload = '{"model": "clf", "instances": [[0.1, NaN, 0.2, 0.3, 0.4, 0.5]]}'
    r = client.post("/predict", content=payload, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "finite" in r.text


def test_distribution_output_sums_to_one(client, distribution_dataset):
    train(client, "ldlkm", distribution_dataset["id"], "ldl", k=3)
    X, _ = make_distribution()
    body = predict(client, model="ldl", instances=X[:5].tolist()).json()
    assert body["output"] == "distribution"
    for item in body["predictions"]:
        assert set(item["distribution"]) == set(distribution_dataset["label_names"])
        assert np.isclose(sum(item["distribution"].values()), 1.0)


def test_features_output_of_selectors(client, multilabel_dataset):
    train(client, "elcfs", multilabel_dataset["id"], "sel", max_iter=50)
    body = predict(client, model="sel").json()
    assert body["output"] == "features" and "predictions" not in body
    assert sorted(f["index"] for f in body["features"]) == list(range(6))
    scores = [f["score"] for f in body["features"]]
    assert scores == sorted(scores, reverse=True)
    assert body["features"][0]["name"] == f"f{body['features'][0]['index']}"
    assert len(predict(client, model="sel", top_k=2).json()["features"]) == 2


def test_classifier_on_selected_features_takes_full_instances(client, multilabel_dataset):
    train(client, "elcfs", multilabel_dataset["id"], "sel", max_iter=50)
    r = client.post(
        "/train?wait=true",
        json={
            "method": "mlknn",
            "dataset_id": multilabel_dataset["id"],
            "model_name": "clf-sel",
            "feature_selector": {"model": "sel", "top_k": 3},
        },
    )
    assert r.json()["status"] == "succeeded", r.text
    params = client.get("/models/clf-sel/versions/1").json()["params"]
    assert params["feature_selector"]["resolved"] == "sel@1"
    assert len(params["feature_selector"]["feature_indices"]) == 3
    X, _ = make_multilabel()
    assert predict(client, model="clf-sel", instances=X[:2].tolist()).status_code == 200
    bad = client.post(
        "/train",
        json={
            "method": "mlknn",
            "dataset_id": multilabel_dataset["id"],
            "model_name": "x",
            "feature_selector": {"model": "clf-sel", "top_k": 3},
        },
    )
    assert bad.status_code == 422 and "not a feature selector" in bad.text


def test_concurrent_predictions_agree(client, classifier):
    X, _ = make_multilabel()
    body = {"model": "clf", "instances": X[:8].tolist(), "output": "ranking"}
    expected = predict(client, **body).json()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: client.post("/predict", json=body), range(48)))
    assert all(r.status_code == 200 for r in results)
    assert all(r.json() == expected for r in results)


@pytest.mark.parametrize("route", ["/predict", "/v2/models/clf/infer", "/v2/models/clf"])
def test_requests_waiting_for_a_model_load_hold_no_database_connection(client, classifier, monkeypatch, route):
    """Requests for a version still loading wait for the load without a session. Holding theirs,
    sixteen of them had taken every connection of the pool: the loader could not read its version
    row and an alias move behind them waited the pool's 30 s timeout (benchmarks/faults.py)."""
    core = client.app.state.core
    core.cache.clear()
    pool, load = core.database.engine.pool, core.store.load_artifact
    held: list[int] = []

    def slow_load(sha256: str):
        time.sleep(1.0)  # the other requests meanwhile reach the cache and wait for this load
        held.append(pool.checkedout())
        return load(sha256)

    monkeypatch.setattr(core.store, "load_artifact", slow_load)
    X = make_multilabel()[0][:1]
    tensor = {"name": "input-0", "shape": list(X.shape), "datatype": "FP64", "data": X.ravel().tolist()}

    def ask(_: int):
        if route == "/predict":
            return client.post(route, json={"model": "clf", "instances": X.tolist()})
        return client.post(route, json={"inputs": [tensor]}) if route.endswith("infer") else client.get(route)

    with ThreadPoolExecutor(8) as threads:
        answers = list(threads.map(ask, range(8)))
    assert [r.status_code for r in answers] == [200] * 8
    assert len(held) == 1 and held[0] <= 1  # before: the seven waiting requests held one each


def test_corrupt_artifact_is_refused_not_loaded(client, settings, classifier):
    sha = client.get("/models/clf/versions/1").json()["artifact_sha256"]
    client.app.state.core.cache.clear()
    path = settings.model_dir / "artifacts" / f"{sha}.pkl"
    path.write_bytes(path.read_bytes()[:-10] + b"tampered!!")
    r = predict(client, model="clf", instances=make_multilabel()[0][:1].tolist())
    assert r.status_code == 409 and "corrupt" in r.text


def test_evaluate_classifier_ldl_and_selector(client, classifier, distribution_dataset):
    r = client.post("/evaluate", json={"model": "clf", "dataset_id": classifier["id"]})
    assert r.status_code == 200, r.text
    metrics = r.json()["metrics"]
    assert {
        "hamming_loss",
        "ranking_loss",
        "one_error",
        "coverage",
        "average_precision",
        "subset_accuracy",
        "micro_f1",
        "macro_f1",
        "example_f1",
    } <= set(metrics)
    assert 0 <= metrics["hamming_loss"] <= 1 and 0 <= metrics["average_precision"] <= 1
    stored = client.get("/models/clf/versions/1").json()["metrics"]
    assert stored[classifier["id"]]["hamming_loss"] == metrics["hamming_loss"]

    train(client, "ldlkm", distribution_dataset["id"], "ldl", k=3)
    ldl = client.post("/evaluate", json={"model": "ldl", "dataset_id": distribution_dataset["id"]})
    assert {"chebyshev", "clark", "canberra", "kl_divergence", "cosine", "intersection"} == set(ldl.json()["metrics"])

    train(client, "elcfs", classifier["id"], "sel", max_iter=50)
    sel = client.post("/evaluate", json={"model": "sel", "dataset_id": classifier["id"], "top_k": 2})
    assert sel.status_code == 200, sel.text
    assert sel.json()["downstream"] == {
        "method": "mlknn",
        "k": 10,
        "top_k": 2,
        "train_dataset_id": classifier["id"],
    }

    wrong = client.post("/evaluate", json={"model": "clf", "dataset_id": distribution_dataset["id"]})
    assert wrong.status_code == 422


def test_metrics_no_sample_defines_are_null(client, classifier):
    X, Y = make_multilabel()
    empty = upload_csv(client, X, np.zeros_like(Y), "no-labels")
    r = client.post("/evaluate", json={"model": "clf", "dataset_id": empty["id"]})
    assert r.status_code == 200, r.text
    metrics = r.json()["metrics"]
    assert metrics["ranking_loss"] is None and metrics["average_precision"] is None
    assert metrics["hamming_loss"] is not None


def test_reads_and_predictions_do_not_wait_for_the_write_lock(client, classifier, settings):
    """A prediction through the route (of a stored dataset, the reference not resolved yet) and a
    listing read in read-only sessions: while another connection holds SQLite's write lock they
    answer at once, instead of waiting out the busy timeout and then failing."""
    if not settings.resolved_database_url.startswith("sqlite:///"):
        pytest.skip("SQLite's write lock")
    holder = sqlite3.connect(settings.resolved_database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with ThreadPoolExecutor(1) as pool:
            listing = pool.submit(client.get, "/models").result(timeout=10)
            body = {"model": "clf@1", "dataset_id": classifier["id"]}
            stored = pool.submit(client.post, "/predict", json=body).result(timeout=10)
    finally:
        holder.rollback()
        holder.close()
    assert listing.status_code == 200, listing.text
    assert stored.status_code == 200, stored.text
    assert len(stored.json()["predictions"]) == classifier["n_samples"]
