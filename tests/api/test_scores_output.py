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
