"""Memory known before it is spent, over HTTP: a training estimated above
``LABELSERVE_MAX_MODEL_MB`` is a 422 before any job exists, and a sparse dataset trains with CSR
inside for the methods that take it (the others get the densified copy)."""

from __future__ import annotations

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


def test_auto_candidates_above_the_bound_are_left_out_with_the_reason():
    shape = DataShape(4880, 1836, 1000, 100_000)
    kept, left_out = memory_bounds.fitting(["br", "rf"], shape, memory_bounds.MemoryBudget(3072, DENSE_MAX_CELLS))
    assert kept == ["br"] and "n_estimators" in left_out["rf"]


def test_auto_leaves_out_the_candidates_above_the_bound_and_says_why(database_url, tmp_path):
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_model_mb=1)
    X, Y = make_multilabel(n=80, d=6, q=3)
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y, "ml")
        job = train(client, "auto", dataset["id"], "chosen", candidates=["br", "rf"], cv=3)
        assert job["status"] == "succeeded", job
        record = client.get("/models/chosen/versions/1").json()["selection"]
        assert [row["method"] for row in record["leaderboard"]] == ["br"]
        refused = {row["method"]: row["reason"] for row in record["left_out"] if "reason" in row}
        assert "LABELSERVE_MAX_MODEL_MB" in refused["rf"]
