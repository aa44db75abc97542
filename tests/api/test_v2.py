"""The open inference protocol (V2): metadata, readiness, and inference that equals ``/predict``."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def models(served_models):
    ml = served_models["ml"]
    return {"ml": served_models["X"], "ldl": served_models["Xd"], "labels": ml["label_names"]}


def tensor(X: np.ndarray, flat: bool = True) -> dict:
    return {"name": "input-0", "shape": list(X.shape), "datatype": "FP64", "data": (X.ravel() if flat else X).tolist()}


def infer(client, path: str, X: np.ndarray | None, **extra) -> dict:
    body = {"inputs": [] if X is None else [tensor(X)], **extra}
    r = client.post(f"/v2/models/{path}/infer", json=body)
    assert r.status_code == 200, r.text
    return {o["name"]: o for o in r.json()["outputs"]} | {"_": r.json()}


@pytest.mark.parametrize("name", ["clf", "dm"])
def test_classifier_outputs_equal_predict(client, models, name):
    X, labels = models["ml"][:7], models["labels"]
    for _ in range(2):  # resolved, then cached
        v2 = infer(client, name, X)
        native = client.post("/predict", json={"model": name, "instances": X.tolist(), "include_scores": True}).json()
        scores = np.array([[p["scores"][lab] for lab in labels] for p in native["predictions"]])
        sets = np.array([[lab in p["labels"] for lab in labels] for p in native["predictions"]])
        assert v2["scores"]["shape"] == [7, 3] and v2["scores"]["datatype"] == "FP64"
        np.testing.assert_allclose(np.reshape(v2["scores"]["data"], (7, 3)), scores, rtol=0, atol=1e-9)
        assert v2["labels"]["datatype"] == "BOOL"
        np.testing.assert_array_equal(np.reshape(v2["labels"]["data"], (7, 3)), sets)
        assert v2["_"]["model_name"] == name and v2["_"]["model_version"] == "1"
    low = infer(client, name, X, parameters={"threshold": 0.05}, outputs=[{"name": "labels"}])
    native = client.post("/predict", json={"model": name, "instances": X.tolist(), "threshold": 0.05}).json()
    assert list(low) == ["labels", "_"]
    sets = np.array([[lab in p["labels"] for lab in labels] for p in native["predictions"]])
    np.testing.assert_array_equal(np.reshape(low["labels"]["data"], (7, 3)), sets)


def test_distribution_and_features_equal_predict(client, models):
    Xd = models["ldl"][:5]
    v2 = infer(client, "dist", Xd)["distribution"]
    native = client.post("/predict", json={"model": "dist", "instances": Xd.tolist()}).json()["predictions"]
    expected = np.array([list(p["distribution"].values()) for p in native])
    np.testing.assert_allclose(np.reshape(v2["data"], v2["shape"]), expected, rtol=0, atol=1e-9)
    features = infer(client, "sel", None)["features"]
    native = client.post("/predict", json={"model": "sel", "output": "features"}).json()["features"]
    assert features["datatype"] == "INT64" and features["data"] == [f["index"] for f in native]


def test_versions_aliases_nested_data_and_fp32(client, models):
    X = models["ml"][:4]
    assert client.put("/models/clf/aliases/prod", json={"version": 1}).status_code == 200
    latest = infer(client, "clf", X)["scores"]["data"]
    assert infer(client, "clf/versions/1", X)["scores"]["data"] == latest
    assert infer(client, "clf@prod", X)["scores"]["data"] == latest
    nested = client.post("/v2/models/clf/infer", json={"inputs": [tensor(X, flat=False)]}).json()
    assert nested["outputs"][0]["data"] == latest
    fp32 = {**tensor(X), "datatype": "FP32"}
    assert client.post("/v2/models/clf/infer", json={"inputs": [fp32]}).status_code == 200


def test_metadata_and_readiness(client, models):
    meta = client.get("/v2/models/clf").json()
    assert meta == {
        "name": "clf",
        "versions": ["1"],
        "platform": "labelserve",
        "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [-1, 6]}],
        "outputs": [
            {"name": "scores", "datatype": "FP64", "shape": [-1, 3]},
            {"name": "labels", "datatype": "BOOL", "shape": [-1, 3]},
        ],
    }
    assert client.get("/v2/models/sel/versions/1").json()["outputs"] == [
        {"name": "features", "datatype": "INT64", "shape": [6]}
    ]
    assert client.get("/v2/models/dist").json()["outputs"][0]["name"] == "distribution"
    assert client.get("/v2/models/clf/ready").json() == {"name": "clf", "ready": True}
    assert client.get("/v2/models/clf/versions/1/ready").status_code == 200
    assert client.get("/v2/health/live").json() == {"live": True}
    assert client.get("/v2/health/ready").json() == {"ready": True}


@pytest.mark.parametrize(
    "path,body,status,words",
    [
        ("nope/infer", {"inputs": []}, 404, "not found"),
        ("clf/versions/9/infer", {"inputs": []}, 404, "not found"),
        ("clf@prod/versions/1/infer", {"inputs": []}, 400, "version"),
        ("clf/infer", {"inputs": []}, 400, "input-0"),
        (
            "clf/infer",
            {"inputs": [{"name": "x", "shape": [1, 6], "datatype": "FP64", "data": [0] * 6}]},
            400,
            "input-0",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [1, 5], "datatype": "FP64", "data": [0] * 5}]},
            400,
            "[n, 6]",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [2, 6], "datatype": "FP64", "data": [0] * 6}]},
            400,
            "12",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "INT8", "data": [0] * 6}]},
            400,
            "datatype",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": ["a"] * 6}]},
            400,
            "numbers",
        ),
        (
            "clf/infer",
            {
                "inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [0] * 6}],
                "outputs": [{"name": "distribution"}],
            },
            400,
            "scores, labels",
        ),
        (
            "clf/infer",
            {
                "inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [0] * 6}],
                "parameters": {"threshold": "high"},
            },
            400,
            "threshold",
        ),
        ("clf/infer", {}, 400, "inputs"),
    ],
)
def test_errors_have_the_protocol_shape(client, models, path, body, status, words):
    for _ in range(2):  # uncached and cached references fail alike
        r = client.post(f"/v2/models/{path}", json=body)
        assert r.status_code == status and set(r.json()) == {"error"} and words in r.json()["error"], r.text


def test_bodies_that_are_not_json_or_not_finite(client, models):
    r = client.post("/v2/models/clf/infer", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    nan = b'{"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [NaN, 0, 0, 0, 0, 0]}]}'
    r = client.post("/v2/models/clf/infer", content=nan, headers={"content-type": "application/json"})
    assert r.status_code == 400 and set(r.json()) == {"error"}
    assert client.get("/v2/models/nope").status_code == 404
