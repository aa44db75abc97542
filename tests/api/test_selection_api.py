"""``"method": "auto"`` in POST /train, POST /compare with its leaderboard and HTML report, and
the evaluation report of one version."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_self_contained, make_mixed_multilabel, make_multilabel, upload_csv, wait_status


def _auto(client, dataset_id: str, name: str, **params: object):
    return client.post(
        "/train?wait=true",
        json={"method": "auto", "dataset_id": dataset_id, "model_name": name, "params": params, "random_state": 3},
    )


def test_auto_registers_the_winner_with_its_leaderboard(client, multilabel_dataset):
    response = _auto(client, multilabel_dataset["id"], "auto-ml", candidates=["br", "mlknn"], cv=3)
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["status"] == "succeeded", job
    version = client.get(f"/models/auto-ml/versions/{job['model']['version']}").json()
    board = version["selection"]["leaderboard"]
    assert version["selection"]["metric"] == "average_precision" and version["selection"]["cv"] == 3
    assert {row["method"] for row in board} - {"blend"} == {"br", "mlknn"}
    assert version["method"] == board[0]["method"]
    assert board[0]["mean"] >= board[1]["mean"]
    X, _ = make_multilabel()
    predicted = client.post("/predict", json={"model": "auto-ml", "instances": X[:2].tolist()})
    assert predicted.status_code == 200, predicted.text


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_auto_registers_a_blend_served_like_any_version(client):
    X, Y = make_mixed_multilabel()
    dataset = upload_csv(client, X, Y, "mixed")
    job = _auto(client, dataset["id"], "auto-blend", candidates=["br", "rf"], cv=5).json()
    assert job["status"] == "succeeded", job
    version = client.get("/models/auto-blend/versions/1").json()
    board = version["selection"]["leaderboard"]
    assert version["method"] == "blend" and board[0]["method"] == "blend", board
    assert {row["method"] for row in board} == {"blend", "br", "rf"}
    assert board[0]["mean"] > max(row["mean"] for row in board[1:])
    params = version["params"]
    assert params == board[0]["params"]
    assert {m["method"] for m in params["members"]} == {"br", "rf"} and all(m["weight"] > 0 for m in params["members"])
    assert 0 < params["threshold"] < 1
    rows = X[:5].tolist()
    labels = client.post("/predict", json={"model": "auto-blend", "instances": rows, "include_scores": True})
    assert labels.status_code == 200, labels.text
    body = labels.json()
    assert body["model"]["method"] == "blend" and body["output"] == "labels"
    assert isinstance(params["fill_empty"], bool)  # the never-empty fallback, learned on out-of-fold scores
    for item in body["predictions"]:
        above = {name for name, score in item["scores"].items() if score > params["threshold"]}
        if not above and params["fill_empty"]:
            above = {max(item["scores"], key=item["scores"].get)}
        assert set(item["labels"]) == above
    ranking = client.post("/predict", json={"model": "auto-blend", "instances": rows, "output": "ranking"}).json()
    assert len(ranking["predictions"][0]["ranking"]) == 4
    v2 = client.post(
        "/v2/models/auto-blend/infer",
        json={"inputs": [{"name": "input-0", "shape": [5, 8], "datatype": "FP64", "data": X[:5].ravel().tolist()}]},
    )
    assert v2.status_code == 200, v2.text
    scores = next(o for o in v2.json()["outputs"] if o["name"] == "scores")["data"]
    expected = [[item["scores"][f"label{j}"] for j in range(4)] for item in body["predictions"]]
    np.testing.assert_allclose(np.reshape(scores, (5, 4)), expected)
    evaluated = client.post("/evaluate", json={"model": "auto-blend", "dataset_id": dataset["id"]})
    assert evaluated.status_code == 200, evaluated.text
    assert evaluated.json()["metrics"]["average_precision"] > 0.8
    page = client.get("/models/auto-blend/versions/1/report", params={"dataset_id": dataset["id"]})
    assert page.status_code == 200 and assert_self_contained(page.text) == 1
    assert "Blend members" in page.text and "share of the blend" in page.text


def test_a_blend_is_trainable_by_name_and_checked_at_the_door(client, multilabel_dataset, distribution_dataset):
    ds = multilabel_dataset["id"]
    members = [{"method": "br", "weight": 2}, {"method": "mlknn", "params": {"k": 3}}]
    job = client.post(
        "/train?wait=true",
        json={"method": "blend", "dataset_id": ds, "model_name": "b", "params": {"members": members, "threshold": 0.4}},
    ).json()
    assert job["status"] == "succeeded", job
    version = client.get("/models/b/versions/1").json()
    assert version["params"]["members"][1] == {"method": "mlknn", "params": {"k": 3}, "weight": 1.0}
    bad = [{"method": "trans-ovk"}]
    r = client.post("/train", json={"method": "blend", "dataset_id": ds, "model_name": "x", "params": {"members": bad}})
    assert r.status_code == 422 and "probability scores" in r.text
    assert _auto(client, ds, "x", candidates=["blend", "br"]).status_code == 422
    ldl = client.post(
        "/train?wait=true", json={"method": "blend-ldl", "dataset_id": distribution_dataset["id"], "model_name": "bl"}
    ).json()
    assert ldl["status"] == "succeeded", ldl
    out = client.post("/predict", json={"model": "bl", "dataset_id": distribution_dataset["id"]}).json()
    assert abs(sum(out["predictions"][0]["distribution"].values()) - 1) < 1e-9


def test_auto_on_distributions_ranks_by_chebyshev(client, distribution_dataset):
    job = _auto(client, distribution_dataset["id"], "auto-ldl", cv=3, tune=True, candidates=["aa-knn"]).json()
    assert job["status"] == "succeeded", job
    version = client.get("/models/auto-ldl/versions/1").json()
    assert version["method"] == "aa-knn" and version["selection"]["metric"] == "chebyshev"
    rows = version["selection"]["leaderboard"]
    assert len([r for r in rows if r["method"] == "aa-knn"]) == 4  # the documented k grid
    assert {r["method"] for r in rows} <= {"aa-knn", "blend-ldl"}  # grid points may be blended too
    means = [row["mean"] for row in version["selection"]["leaderboard"]]
    assert means == sorted(means)


def test_auto_rejects_what_does_not_fit(client, multilabel_dataset):
    ds = multilabel_dataset["id"]
    assert _auto(client, ds, "x", candidates=["ldlkm"]).status_code == 422
    assert _auto(client, ds, "x", metric="chebyshev").status_code == 422
    assert _auto(client, ds, "x", folds=3).status_code == 422  # unknown key
    assert _auto(client, ds, "x", cv=1).status_code == 422
    assert client.post("/train", json={"method": "nope", "dataset_id": ds, "model_name": "x"}).status_code == 422


def test_auto_can_be_cancelled_mid_way(client):
    X, Y = make_multilabel(n=200, d=8)
    dataset = upload_csv(client, X, Y, "big")
    r = client.post(
        "/train",
        json={
            "method": "auto",
            "dataset_id": dataset["id"],
            "model_name": "c",
            "params": {"candidates": ["rf"], "tune": True},
        },
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    deadline_job = wait_status(client, job_id, ("running", "succeeded", "failed"))
    assert deadline_job["status"] == "running", deadline_job
    for _ in range(400):  # until the cross-validation reports a candidate and fold
        stage = client.get(f"/jobs/{job_id}").json()["stage"]
        if "fold" in stage:
            break
        wait_status(client, job_id, ("running",))
    assert "rf" in stage and "fold" in stage, stage
    assert client.delete(f"/jobs/{job_id}").status_code == 200
    assert wait_status(client, job_id, ("cancelled",))["status"] == "cancelled"
    assert client.get("/models/c").status_code == 404


def test_compare_job_leaderboard_and_report(client, multilabel_dataset):
    r = client.post("/compare", json={"dataset_id": multilabel_dataset["id"], "methods": ["br", "mi-filter"], "cv": 3})
    assert r.status_code == 202, r.text
    assert r.json()["kind"] == "compare"
    job = wait_status(client, r.json()["id"], ("succeeded", "failed"), timeout=120)
    assert job["status"] == "succeeded", job
    result = client.get(f"/jobs/{job['id']}/result")
    assert result.status_code == 200 and result.headers["content-type"].startswith("application/json")
    body = result.json()
    assert body["metric"] == "average_precision" and body["cv"] == 3
    assert {row["method"] for row in body["leaderboard"]} == {"br", "mi-filter"}
    row = body["leaderboard"][0]
    assert set(row["metrics"]["average_precision"]) == {"mean", "std"} and row["fit_seconds"] >= 0
    report = client.get(f"/jobs/{job['id']}/report")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/html")
    assert assert_self_contained(report.text) == 3  # bars, per-label heat map, selector curve
    csv = client.get(f"/jobs/{job['id']}/report", params={"format": "csv"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    header = csv.text.splitlines()[0].split(",")
    assert header[:3] == ["rank", "method", "parameters"] and "average_precision mean" in header
    assert {line.split(",")[1] for line in csv.text.splitlines()[1:]} == {"br", "mi-filter"}


def test_compare_rejects_and_report_needs_a_compare_job(client, multilabel_dataset, distribution_dataset):
    ds = multilabel_dataset["id"]
    assert client.post("/compare", json={"dataset_id": ds, "methods": ["sa-maxent"]}).status_code == 422
    assert client.post("/compare", json={"dataset_id": ds, "metric": "chebyshev"}).status_code == 422
    assert client.post("/compare", json={"dataset_id": "0" * 16}).status_code == 404
    job = client.post(
        "/train?wait=true", json={"method": "mlknn", "dataset_id": ds, "model_name": "m", "params": {"k": 3}}
    ).json()
    assert client.get(f"/jobs/{job['id']}/report").status_code == 404
    ldl = client.post("/compare", json={"dataset_id": distribution_dataset["id"], "cv": 2}).json()
    done = wait_status(client, ldl["id"], ("succeeded", "failed"), timeout=120)
    assert done["status"] == "succeeded", done
    methods = {row["method"] for row in client.get(f"/jobs/{ldl['id']}/result").json()["leaderboard"]}
    assert methods == {"aa-knn", "ldlkm", "sa-maxent"}
    assert_self_contained(client.get(f"/jobs/{ldl['id']}/report").text)


def test_version_report_by_task(client, multilabel_dataset, distribution_dataset):
    ml, ldl = multilabel_dataset["id"], distribution_dataset["id"]
    for method, name, ds in (("br", "r-br", ml), ("aa-knn", "r-ldl", ldl), ("mi-filter", "r-sel", ml)):
        job = client.post("/train?wait=true", json={"method": method, "dataset_id": ds, "model_name": name}).json()
        assert job["status"] == "succeeded", job
        page = client.get(f"/models/{name}/versions/1/report", params={"dataset_id": ds})
        assert page.status_code == 200, page.text
        assert assert_self_contained(page.text) == (2 if method == "aa-knn" else 1)
        assert "trained on" in page.text and "server" in page.text
    assert client.get("/models/r-br/versions/1/report", params={"dataset_id": ldl}).status_code == 422
    assert client.get("/models/r-br/versions/9/report", params={"dataset_id": ml}).status_code == 404


def test_version_report_computes_with_no_session_open(client, multilabel_dataset, monkeypatch):
    """The report reads its rows, closes the session, then loads the model and computes: a report
    takes seconds on large data, and its session had held a pool connection all that time."""
    job = client.post(
        "/train?wait=true", json={"method": "br", "dataset_id": multilabel_dataset["id"], "model_name": "r"}
    ).json()
    assert job["status"] == "succeeded", job
    core = client.app.state.core
    core.cache.clear()
    pool, load, held = core.database.engine.pool, core.store.load_artifact, []

    def observed_load(sha256: str):
        held.append(pool.checkedout())
        return load(sha256)

    monkeypatch.setattr(core.store, "load_artifact", observed_load)
    page = client.get("/models/r/versions/1/report", params={"dataset_id": multilabel_dataset["id"]})
    assert page.status_code == 200 and held == [0]  # before: the route's session, open throughout


@pytest.mark.slow  # a whole selection or job life: over 5 s
def test_auto_without_a_seed_uses_the_fixed_default_and_says_so(client, multilabel_dataset):
    """The same auto request twice picks the same model with the same leaderboard: the seed of
    the folds and candidates is 0 unless one is given, shown in the 202 answer and the job."""
    body = {
        "method": "auto",
        "dataset_id": multilabel_dataset["id"],
        "model_name": "auto-default-seed",
        "params": {"candidates": ["br", "rf"], "cv": 3},
    }
    accepted = client.post("/train", json=body)
    assert accepted.status_code == 202 and accepted.json()["random_state"] == 0
    first = wait_status(client, accepted.json()["job_id"], ("succeeded", "failed"))
    assert first["status"] == "succeeded" and first["random_state"] == 0, first
    second = client.post("/train?wait=true", json=body).json()
    assert second["status"] == "succeeded" and second["random_state"] == 0
    versions = [client.get(f"/models/auto-default-seed/versions/{v}").json() for v in (1, 2)]
    assert versions[0]["selection"]["random_state"] == versions[1]["selection"]["random_state"] == 0
    assert versions[0]["method"] == versions[1]["method"]
    timing = {"predicted_seconds", "measured_seconds"}  # this machine's seconds, not the choice
    boards = [
        [{k: v for k, v in row.items() if k not in timing} for row in v["selection"]["leaderboard"]] for v in versions
    ]
    assert boards[0] == boards[1]
    seeded = client.post("/train", json={**body, "random_state": 7}).json()
    assert seeded["random_state"] == 7
    wait_status(client, seeded["job_id"], ("succeeded", "failed"))
