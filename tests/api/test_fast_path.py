"""``app.api.fast_path``: the hot path answers exactly what the ``/predict`` route answers.

Every body is sent twice to the same server: once as it comes (a cached reference with
instances is answered by the fast path) and once with the fast path switched off (the route
answers). Status codes and bodies must be equal, for every output kind and for errors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.api import fast_path
from app.api.routes import predict as predict_route
from tests.helpers import train


@pytest.fixture
def models(served_models):
    return {"ml": (served_models["X"], served_models["ml"]), "ldl": (served_models["Xd"], served_models["ldl"])}


def _both(client, monkeypatch, body: dict | bytes) -> tuple[tuple[int, object], tuple[int, object]]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    fast = client.post("/predict", content=content, headers=headers)
    with monkeypatch.context() as patch:
        patch.setattr(fast_path, "_answer", lambda predictor, body: None)
        slow = client.post("/predict", content=content, headers=headers)
    return (fast.status_code, fast.json()), (slow.status_code, slow.json())


def _bodies(models) -> list[dict | bytes]:
    X, ml = models["ml"]
    Xd, _ = models["ldl"]
    names = ml["feature_names"]
    rows = X[:3].tolist()
    return [
        {"model": "clf", "instances": rows},
        {"model": "clf", "instances": rows, "include_scores": True, "threshold": 0.3},
        {"model": "clf", "instances": rows, "output": "ranking", "top_k": 2},
        {"model": "clf@1", "instances": [dict(zip(names, r)) for r in rows]},
        {"model": "dm", "instances": rows, "include_scores": True},
        {"model": "dist", "instances": Xd[:2].tolist()},
        {"model": "sel", "output": "features", "top_k": 3},
        {"model": "clf", "instances": np.vstack([X] * 30).tolist()},  # larger than INLINE_BYTES: a thread
        # errors
        {"model": "clf", "instances": [[1.0, 2.0]]},
        {"model": "clf", "instances": []},
        {"model": "clf", "instances": rows, "output": "distribution"},
        {"model": "clf", "instances": rows, "dataset_id": ml["id"]},
        {"model": "clf", "instances": [[*rows[0][:-1], "x"]]},
        {"model": "clf", "instances": [rows[0], dict(zip(names, rows[1]))]},
        {"model": "clf", "instances": rows, "colour": "red"},
        {"model": "clf", "instances": rows, "top_k": 0},
        {"model": "clf"},
        {"model": "nope", "instances": rows},
        {"model": "clf@9", "instances": rows},
        {"model": "bad name!", "instances": rows},
        b'{"model": "clf", "instances": [[NaN, 1, 2, 3, 4, 5]]}',  # json.loads takes NaN, orjson does not
        b'{"model": "clf", "instances": [[1e999, 1, 2, 3, 4, 5]]}',
        b'{"model": "clf", "instances": ',
        b"[]",
    ]


def test_fast_path_and_route_answer_alike(client, models, monkeypatch):
    assert len(json.dumps({"instances": np.vstack([models["ml"][0]] * 30).tolist()})) > fast_path.INLINE_BYTES
    for body in _bodies(models):
        client.post("/predict", json={"model": "clf", "instances": models["ml"][0][:1].tolist()})  # resolved
        fast, slow = _both(client, monkeypatch, body)
        assert fast == slow, body


def test_cached_references_are_answered_without_the_route(client, models, monkeypatch):
    """Proof that the fast path answers (the equality above would also hold without it)."""
    X, _ = models["ml"]
    first = client.post("/predict", json={"model": "clf", "instances": X[:1].tolist()})  # resolves it
    assert first.status_code == 200

    def route_is_off(*args: object) -> None:
        raise AssertionError("the route was called")

    monkeypatch.setattr(predict_route, "_predict", route_is_off)
    for rows in (X[:1], np.vstack([X] * 3)):  # on the event loop, and in a worker thread
        r = client.post("/predict", json={"model": "clf", "instances": rows.tolist()})
        assert r.status_code == 200 and r.json() == json.loads(r.text)
        assert len(r.json()["predictions"]) == len(rows)
    assert 'labelserve_requests_total{method="POST",route="/predict",status="200"}' in client.get("/metrics").text


def test_a_new_version_is_seen_at_once(client, models):
    X, ml = models["ml"]
    body = {"model": "clf", "instances": X[:1].tolist()}
    assert client.post("/predict", json=body).json()["model"]["version"] == 1
    assert client.post("/predict", json=body).json()["model"]["version"] == 1  # from the cache
    train(client, "mlknn", ml["id"], "clf", k=3)
    assert client.post("/predict", json=body).json()["model"]["version"] == 2
    assert client.put("/models/clf/aliases/prod", json={"version": 1}).status_code == 200
    assert client.post("/predict", json={**body, "model": "clf@prod"}).json()["model"]["version"] == 1
    assert client.put("/models/clf/aliases/prod", json={"version": 2}).status_code == 200
    assert client.post("/predict", json={**body, "model": "clf@prod"}).json()["model"]["version"] == 2
    assert client.delete("/models/clf/versions/2").status_code == 204
    assert client.post("/predict", json=body).json()["model"]["version"] == 1
    scores = client.post("/predict", json={**body, "include_scores": True}).json()["predictions"][0]["scores"]
    assert np.isfinite(scores["label0"])
