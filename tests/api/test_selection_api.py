"""``"method": "auto"`` in POST /train, POST /compare with its leaderboard and HTML report, and
the evaluation report of one version."""

from __future__ import annotations

from tests.helpers import make_multilabel, upload_csv, wait_status
from tests.unit.test_reports import assert_self_contained


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
    assert {row["method"] for row in board} == {"br", "mlknn"}
    assert version["method"] == board[0]["method"]
    assert board[0]["mean"] >= board[1]["mean"]
    X, _ = make_multilabel()
    predicted = client.post("/predict", json={"model": "auto-ml", "instances": X[:2].tolist()})
    assert predicted.status_code == 200, predicted.text


def test_auto_on_distributions_ranks_by_chebyshev(client, distribution_dataset):
    job = _auto(client, distribution_dataset["id"], "auto-ldl", cv=3, tune=True, candidates=["aa-knn"]).json()
    assert job["status"] == "succeeded", job
    version = client.get("/models/auto-ldl/versions/1").json()
    assert version["method"] == "aa-knn" and version["selection"]["metric"] == "chebyshev"
    assert len(version["selection"]["leaderboard"]) == 4  # the documented k grid
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
    assert len(assert_self_contained(report.text).refs) == 3  # bars, per-label scores, selector curve


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
        assert len(assert_self_contained(page.text).refs) == 1
    assert client.get("/models/r-br/versions/1/report", params={"dataset_id": ldl}).status_code == 422
    assert client.get("/models/r-br/versions/9/report", params={"dataset_id": ml}).status_code == 404
