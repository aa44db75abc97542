"""Memory known before it is spent, over HTTP: a training estimated above
``LABELSERVE_MAX_MODEL_MB`` is a 422 before any job exists that names the largest sizes that
fit, ``auto`` trains a candidate that fits only smaller at that size, and a sparse dataset trains
with CSR inside for the methods that take it (the others get the densified copy)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.methods import memory_bounds
from app.methods.base import DataShape
from app.methods.br import BinaryRelevance
from app.methods.catalog import catalog
from app.methods.mlknn import MLkNN
from app.storage.store import DENSE_MAX_CELLS
from tests.helpers import make_multilabel, train, upload_csv


def sparse_file(n: int = 80, d: int = 300, seed: int = 0) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A LIBSVM file of 4 stored values a row (1.3 % dense), 3 labels, and its dense arrays."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    Y = np.zeros((n, 3), dtype=int)
    lines = []
    for i in range(n):
        cols = np.sort(rng.choice(d, size=4, replace=False))
        X[i, cols] = 1 + (i + cols) % 3
        Y[i] = [(i + k) % 3 == 0 or cols[0] % (k + 2) == 0 for k in range(3)]
        labels = ",".join(str(k) for k in range(3) if Y[i, k])
        lines.append(f"{labels} " + " ".join(f"{j + 1}:{X[i, j]:g}" for j in cols))
    return "\n".join(lines).encode(), X, Y


@pytest.fixture
def small_budget_client(database_url: str, tmp_path) -> Iterator[TestClient]:
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_model_mb=2)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _upload(client: TestClient) -> dict:
    content, _, _ = sparse_file()
    r = client.post("/datasets", files={"file": ("s.svm", content)})
    assert r.status_code == 201, r.text
    assert r.json()["storage"] == "sparse"
    return r.json()


def test_a_training_estimated_above_the_bound_is_refused_before_any_job(small_budget_client):
    client = small_budget_client
    dataset = _upload(client)
    r = client.post("/train", json={"method": "rf", "dataset_id": dataset["id"], "model_name": "big"})
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "params"]
    assert "estimated" in error["msg"] and "LABELSERVE_MAX_MODEL_MB" in error["msg"]
    assert "n_estimators" in error["msg"] and "max_depth" in error["msg"] and "min_samples_leaf" in error["msg"]
    assert client.get("/jobs").json()["items"] == []
    assert client.get("/models/big").status_code == 404
    # what the message says to change is enough
    job = train(client, "rf", dataset["id"], "small", n_estimators=5, max_depth=3)
    assert job["status"] == "succeeded", job


def test_sparse_datasets_train_with_csr_inside_and_predict_as_dense_fits(client):
    dataset = _upload(client)
    _, X, Y = sparse_file()
    X = X[:, : dataset["n_features"]]  # LIBSVM's width is its largest index
    for method in ("br", "rf", "ecc", "mlknn"):
        job = train(client, method, dataset["id"], f"sparse-{method}")
        assert job["status"] == "succeeded", (method, job)
    for model, dense_fit in (("sparse-br", BinaryRelevance()), ("sparse-mlknn", MLkNN())):
        r = client.post("/predict", json={"model": model, "instances": X[:10].tolist(), "output": "ranking"})
        assert r.status_code == 200, r.text
        expected = dense_fit.fit(X, Y).decision_function(X[:10])
        got = np.array(
            [
                [item["score"] for item in sorted(row["ranking"], key=lambda i: i["label"])]
                for row in r.json()["predictions"]
            ]
        )
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=model)


def test_a_dense_method_on_a_sparse_set_above_the_densifying_bound_names_the_sparse_methods():
    spec = catalog()["trans-ovk"]
    shape = DataShape(20_000, 50_000, 100, 2_000_000)
    reason = memory_bounds.problem(
        spec, spec.params().model_dump(), shape, memory_bounds.MemoryBudget(3072, DENSE_MAX_CELLS)
    )
    assert reason is not None
    assert "20000 x 50000" in reason and "2000000 non-zeros" in reason
    assert "br, dmknn, ecc, gbm, mlknn, rf" in reason
    budget = memory_bounds.MemoryBudget(3072, DENSE_MAX_CELLS)
    br = catalog()["br"]
    assert memory_bounds.problem(br, br.params().model_dump(), shape, budget) is None
    # mlknn takes CSR, so no densifying bound; at 20,000 rows its approximate search's
    # cell-ordered float32 rows (4 n (d + 1) bytes) are what its estimate refuses
    mlknn = catalog()["mlknn"]
    reason = memory_bounds.problem(mlknn, mlknn.params().model_dump(), shape, budget)
    assert reason is not None and "needs dense features" not in reason and "estimated" in reason


def many_labels(n: int = 300, d: int = 10, q: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Dense features and q labels, each a half-space of random direction: a forest's every node
    stores q scores, so its estimate grows with q (77 MB at rf's defaults for these sizes)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = ((X - 0.5) @ rng.standard_normal((d, q)) + 0.3 * rng.standard_normal((n, q)) > 0.3).astype(int)
    return X, Y


def _rf_problem(params: dict, shape: DataShape, max_model_mb: float) -> str | None:
    rf = catalog()["rf"]
    budget = memory_bounds.MemoryBudget(max_model_mb, DENSE_MAX_CELLS)
    return memory_bounds.problem(rf, rf.params().model_dump() | params, shape, budget)


def test_a_refusal_names_the_largest_sizes_that_fit_and_the_named_size_trains(database_url, tmp_path):
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_model_mb=20)
    X, Y = many_labels()
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y, "many")
        r = client.post("/train", json={"method": "rf", "dataset_id": dataset["id"], "model_name": "big"})
        assert r.status_code == 422, r.text
        [error] = r.json()["detail"]
        assert "LABELSERVE_MAX_MODEL_MB = 20" in error["msg"]
        trees = int(re.search(r"n_estimators=(\d+) \(", error["msg"]).group(1))
        depth = int(re.search(r"max_depth=(\d+) \(", error["msg"]).group(1))
        assert 1 <= trees < 200 and depth >= 1
        job = train(client, "rf", dataset["id"], "named", n_estimators=trees)  # what the refusal named trains
        assert job["status"] == "succeeded"
        over = client.post(  # and it is the largest
            "/train",
            json={
                "method": "rf",
                "dataset_id": dataset["id"],
                "model_name": "over",
                "params": {"n_estimators": trees + 1},
            },
        )
        assert over.status_code == 422, over.text
    shape = DataShape(*X.shape, Y.shape[1])
    assert _rf_problem({"max_depth": depth}, shape, 20) is None
    assert _rf_problem({"max_depth": depth + 1}, shape, 20) is not None


def test_auto_candidates_fit_smaller_or_are_left_out_with_the_reason():
    budget = memory_bounds.MemoryBudget(3072, DENSE_MAX_CELLS)
    shape = DataShape(4880, 1836, 1000, 100_000)
    fit = memory_bounds.fitting(["br", "rf"], shape, budget)
    assert fit.kept == ["br", "rf"] and not fit.left_out
    trees = fit.resized["rf"]["n_estimators"]  # 28: the largest forest that fits
    assert _rf_problem({"n_estimators": trees}, shape, 3072) is None
    assert _rf_problem({"n_estimators": trees + 1}, shape, 3072) is not None
    assert f"n_estimators={trees} (" in fit.reasons["rf"]
    # mlknn has no size to shrink: above the bound it is left out
    fit = memory_bounds.fitting(["br", "mlknn"], DataShape(20_000, 50_000, 100, 2_000_000), budget)
    assert fit.kept == ["br"] and not fit.resized and "estimated" in fit.left_out["mlknn"]


@pytest.mark.slow  # about 6 s on a quiet 2-core machine
def test_auto_trains_rf_at_the_largest_size_that_fits(database_url, tmp_path):
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_model_mb=20)
    X, Y = many_labels()
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y, "many")
        job = train(client, "auto", dataset["id"], "chosen", candidates=["br", "rf"], cv=3)
        assert job["status"] == "succeeded", job
        record = client.get("/models/chosen/versions/1").json()["selection"]
    [rf] = [row for row in record["leaderboard"] if row["method"] == "rf"]
    trees = rf["params"]["n_estimators"]
    assert 1 <= trees < 200 and rf["measured_seconds"] is not None  # priced and cross-validated at that size
    shape = DataShape(*X.shape, Y.shape[1])
    assert _rf_problem(rf["params"], shape, 20) is None
    assert _rf_problem({**rf["params"], "n_estimators": trees + 1}, shape, 20) is not None
    [resized] = record["resized"]
    assert resized["method"] == "rf" and resized["params"] == {"n_estimators": trees}
    assert "LABELSERVE_MAX_MODEL_MB" in resized["reason"] and not record["left_out"]


def test_auto_leaves_out_the_candidates_that_fit_at_no_size_and_says_why(database_url, tmp_path):
    # 0.06 MB: br fits; not even one tree of rf does, and mlknn has no size to shrink
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_model_mb=0.06)
    X, Y = make_multilabel(n=80, d=6, q=3)
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y, "ml")
        job = train(client, "auto", dataset["id"], "chosen", candidates=["br", "rf", "mlknn"], cv=3)
        assert job["status"] == "succeeded", job
        record = client.get("/models/chosen/versions/1").json()["selection"]
        assert [row["method"] for row in record["leaderboard"]] == ["br"]
        refused = {row["method"]: row["reason"] for row in record["left_out"] if "reason" in row}
        assert set(refused) == {"rf", "mlknn"} and "LABELSERVE_MAX_MODEL_MB" in refused["rf"]
        assert "resized" not in record
