"""The compact ``scores`` output: the label names once and a row-major score matrix."""

from __future__ import annotations

import json

import numpy as np

from app.methods.br import BinaryRelevance
from tests.helpers import make_multilabel, train, upload_csv


def test_scores_are_the_models_scores_once_per_label_in_float32(client):
    X, Y = make_multilabel(n=80, d=6, q=4)
    dataset = upload_csv(client, X, Y, "ml")
    train(client, "br", dataset["id"], "clf")
    for _ in range(2):  # the route, then the fast path
        r = client.post("/predict", json={"model": "clf", "instances": X[:7].tolist(), "output": "scores"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["output"] == "scores" and body["labels"] == dataset["label_names"]
        assert "predictions" not in body
        expected = BinaryRelevance().fit(X, Y).decision_function(X[:7]).astype(np.float32)
        np.testing.assert_array_equal(np.array(body["scores"], dtype=np.float32), expected)
    ranking = client.post("/predict", json={"model": "clf", "instances": X[:7].tolist(), "output": "ranking"})
    assert len(r.content) < len(json.dumps(ranking.json())) / 2


def test_scores_of_a_selector_are_refused_naming_its_outputs(client):
    X, Y = make_multilabel()
    dataset = upload_csv(client, X, Y, "ml")
    train(client, "mi-filter", dataset["id"], "sel", estimator="binned")
    r = client.post("/predict", json={"model": "sel", "output": "scores"})
    assert r.status_code == 422 and "features" in r.json()["detail"][0]["msg"]


def test_csr_instances_predict_as_their_dense_rows(client):
    """Sparse instances (the CSR triplet) give the answer of the same rows as lists, on a model
    that keeps them sparse (br), one that takes them into a dense-trained index (mlknn: a CSR
    query block is densified by the index) and one that needs them dense (trans-ovk)."""
    X, Y = make_multilabel(n=80, d=6, q=3)
    X[X < 0.5] = 0.0
    dataset = upload_csv(client, X, Y, "ml")
    train(client, "br", dataset["id"], "br")
    train(client, "mlknn", dataset["id"], "knn", k=5)
    train(client, "trans-ovk", dataset["id"], "ovk")
    rows = X[:5]
    indptr = np.concatenate([[0], np.cumsum((rows != 0).sum(axis=1))]).tolist()
    csr = {"indptr": indptr, "indices": np.nonzero(rows)[1].tolist(), "values": rows[rows != 0].tolist()}
    for model in ("br", "knn", "ovk", "br"):  # the route, then the fast path
        dense = client.post("/predict", json={"model": model, "instances": rows.tolist(), "output": "ranking"})
        sparse = client.post("/predict", json={"model": model, "csr": csr, "output": "ranking"})
        assert sparse.status_code == 200, sparse.text
        scores = [[(e["label"], e["score"]) for e in p["ranking"]] for p in sparse.json()["predictions"]]
        expected = [[(e["label"], e["score"]) for e in p["ranking"]] for p in dense.json()["predictions"]]
        assert [[label for label, _ in row] for row in scores] == [[label for label, _ in row] for row in expected]
        np.testing.assert_allclose(
            [[v for _, v in row] for row in scores], [[v for _, v in row] for row in expected], rtol=0, atol=1e-12
        )


def test_bad_csr_instances_are_422s_naming_the_field(client):
    X, Y = make_multilabel(n=80, d=6, q=3)
    dataset = upload_csv(client, X, Y, "ml")
    train(client, "br", dataset["id"], "br")
    cases = [
        ({"indptr": [0], "indices": [], "values": []}, "indptr"),
        ({"indptr": [0, 2], "indices": [0], "values": [1.0]}, "indptr"),
        ({"indptr": [0, 1], "indices": [6], "values": [1.0]}, "indices"),
        ({"indptr": [0, 1], "indices": [0], "values": [1.0, 2.0]}, "values"),
    ]
    for csr, field in cases:
        r = client.post("/predict", json={"model": "br", "csr": csr})
        assert r.status_code == 422, (csr, r.text)
        assert r.json()["detail"][0]["loc"] == ["body", "csr", field], r.text
    both = client.post("/predict", json={"model": "br", "csr": cases[0][0], "instances": X[:1].tolist()})
    assert both.status_code == 422 and "exactly one" in both.json()["detail"][0]["msg"]
