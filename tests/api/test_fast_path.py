"""``app.api.fast_path``: the hot path answers exactly what the ``/predict`` route answers.

Every body is sent twice to the same server: once as it comes (a cached reference with
instances is answered by the fast path) and once with the fast path switched off (the route
answers). Status codes and bodies must be equal, for every output kind and for errors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.api import fast_path
from app.api.routes import predict as predict_route
from app.config import Settings
from app.main import create_app
from tests.helpers import make_multilabel, train, upload_csv


@pytest.fixture
def models(served_models):
    return {"ml": (served_models["X"], served_models["ml"]), "ldl": (served_models["Xd"], served_models["ldl"])}


def _both(
    client, monkeypatch, body: dict | bytes, headers: list[tuple[str, str]] | None = None
) -> tuple[tuple[int, object], tuple[int, object]]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = headers or [("content-type", "application/json")]
    fast = client.post("/predict", content=content, headers=headers)
    with monkeypatch.context() as patch:
        patch.setattr(fast_path, "_answer", lambda predictor, body: None)
        patch.setattr(fast_path, "_answer_by_work", _no_answer)
        slow = client.post("/predict", content=content, headers=headers)
    return (fast.status_code, fast.json()), (slow.status_code, slow.json())


async def _no_answer(*args: object) -> None:
    return None


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
        {"model": "clf", "instances": rows, "output": "scores"},
        {"model": "dist", "instances": Xd[:2].tolist(), "output": "scores"},
        {"model": "sel", "output": "scores"},
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


def test_the_answer_bound_holds_on_the_fast_path_and_the_route(database_url, tmp_path, monkeypatch):
    settings = Settings(database_url=database_url, model_dir=tmp_path / "store", max_answer_cells=10)
    X, Y = make_multilabel(q=3)
    with TestClient(create_app(settings)) as client:
        dataset = upload_csv(client, X, Y, "ml")
        train(client, "br", dataset["id"], "clf")
        client.post("/predict", json={"model": "clf", "instances": X[:1].tolist()})  # resolved: the fast path
        refused = {"model": "clf", "instances": X[:5].tolist(), "output": "ranking"}  # 5 x 3 = 15 cells
        fast, slow = _both(client, monkeypatch, refused)
        assert fast == slow and fast[0] == 413, fast
        message = fast[1]["detail"]
        assert "5 rows x 3 labels" in message and "LABELSERVE_MAX_ANSWER_CELLS = 10" in message
        assert "at most 3 instances" in message and "top_k <= 2" in message and "dataset_id" in message
        for body in (
            {"model": "clf", "instances": X[:5].tolist(), "output": "ranking", "top_k": 2},  # 10 cells
            {"model": "clf", "instances": X[:40].tolist(), "output": "scores"},  # 120 scores: 8 cells
            {"model": "clf", "instances": X[:3].tolist()},
        ):
            fast, slow = _both(client, monkeypatch, body)
            assert fast == slow and fast[0] == 200, (body, fast)
        # a stored dataset whose answer exceeds the bound becomes a batch job, whatever its rows
        r = client.post("/predict", json={"model": "clf", "dataset_id": dataset["id"], "output": "ranking"})
        assert r.status_code == 202, r.text


def test_the_fast_path_computes_a_wide_answer_of_a_small_body_in_a_thread(client, models, monkeypatch):
    """Issue 24 item 2: the inline/thread decision is the answer's rows x labels, not the body's bytes."""
    X, _ = models["ml"]
    client.post("/predict", json={"model": "clf", "instances": X[:1].tolist()})  # resolved
    offloaded: list[object] = []
    limiter = fast_path.large_body_limiter

    def recording(state):
        offloaded.append(state)
        return limiter(state)

    monkeypatch.setattr(fast_path, "large_body_limiter", recording)
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    assert client.post("/predict", json={"model": "clf", "instances": X[:2].tolist()}).status_code == 200
    assert offloaded == []  # 2 x 3 cells: on the event loop
    monkeypatch.setattr(fast_path, "INLINE_CELLS", 5)
    r = client.post("/predict", json={"model": "clf", "instances": X[:2].tolist(), "output": "ranking"})
    assert r.status_code == 200 and len(r.json()["predictions"]) == 2
    assert len(offloaded) == 1  # 6 cells, a body of a few hundred bytes: in the thread


def test_the_v2_fast_path_decides_inline_or_thread_by_its_output_cells(client, models, monkeypatch):
    X, _ = models["ml"]
    assert client.get("/v2/models/clf/ready").status_code == 200  # resolved
    offloaded: list[object] = []
    limiter = fast_path.large_body_limiter
    monkeypatch.setattr(fast_path, "large_body_limiter", lambda state: offloaded.append(state) or limiter(state))
    body = {
        "inputs": [{"name": "input-0", "shape": [2, X.shape[1]], "datatype": "FP64", "data": X[:2].ravel().tolist()}]
    }
    assert client.post("/v2/models/clf/infer", json=body).status_code == 200
    assert offloaded == []
    monkeypatch.setattr(fast_path, "INLINE_CELLS", 5)  # 2 rows x 3 labels
    r = client.post("/v2/models/clf/infer", json=body)
    assert r.status_code == 200 and len(offloaded) == 1


def _route_is_off(*args: object) -> None:
    raise AssertionError("the route was called")


def _served_count(client: TestClient, status: int = 200) -> float:
    series = f'labelserve_requests_total{{method="POST",route="/predict",status="{status}"}} '
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(series)]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_cached_references_are_answered_without_the_route(client, models, monkeypatch):
    """Proof that the fast path answers (the equality above would also hold without it), and
    that what it answers is counted once, like any request."""
    X, _ = models["ml"]
    first = client.post("/predict", json={"model": "clf", "instances": X[:1].tolist()})  # resolves it
    assert first.status_code == 200
    before = _served_count(client)
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    for rows in (X[:1], np.vstack([X] * 3)):  # on the event loop, and in a worker thread
        r = client.post("/predict", json={"model": "clf", "instances": rows.tolist()})
        assert r.status_code == 200 and r.json() == json.loads(r.text)
        assert len(r.json()["predictions"]) == len(rows)
    assert _served_count(client) == before + 2


def test_a_large_body_of_a_reference_not_yet_resolved_is_answered_without_the_route(client, models, monkeypatch):
    """The first batch for a version this process has not resolved yet: resolved and answered in
    the large body's thread, as the route would, so the body is decoded once."""
    X, _ = models["ml"]
    batch = {"model": "clf@1", "instances": np.vstack([X] * 30).tolist()}  # larger than INLINE_BYTES
    _, slow = _both(client, monkeypatch, batch)  # the route's answer (it resolves clf@1 too)
    client.put("/models/clf/aliases/x", json={"version": 1})  # the registry changed: nothing resolved
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    fresh = client.post("/predict", json=batch)
    assert (fresh.status_code, fresh.json()) == slow
    unknown = client.post("/predict", json=batch | {"model": "clf@9"})
    assert unknown.status_code == 404 and "clf@9" in unknown.text


def test_the_upload_limit_holds_in_front_of_the_fast_path(client, models, monkeypatch):
    """The fast path sits in front of the upload limit: it takes only a declared length within
    the limit, so a larger body is still refused (413) and one of undeclared length (chunked)
    goes through the limit and the route."""
    X, _ = models["ml"]
    small = {"model": "clf", "instances": X[:2].tolist()}
    assert client.post("/predict", json=small).status_code == 200  # resolved
    rows = np.vstack([X] * 200).tolist()  # over the tests' 1 MB limit
    big = client.post("/predict", json={"model": "clf", "instances": rows})
    assert big.status_code == 413 and "LABELSERVE_MAX_UPLOAD_MB" in big.json()["detail"]

    def chunks():
        yield json.dumps(small).encode()

    chunked = client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
    assert chunked.status_code == 200 and chunked.json() == client.post("/predict", json=small).json()
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    with pytest.raises(AssertionError, match="the route was called"):  # chunked: the route answered
        client.post("/predict", content=chunks(), headers={"content-type": "application/json"})


def test_with_an_api_key_the_fast_path_answers_only_the_right_key(settings, monkeypatch):
    settings.api_key = "s3cret"
    with TestClient(create_app(settings), headers={"x-api-key": "s3cret"}) as client:
        X, Y = make_multilabel()
        train(client, "mlknn", upload_csv(client, X, Y, "ml")["id"], "clf", k=3)
        body = {"model": "clf", "instances": X[:1].tolist()}
        expected = client.post("/predict", json=body).json()  # resolved
        monkeypatch.setattr(predict_route, "_predict", _route_is_off)
        assert client.post("/predict", json=body).json() == expected
        del client.headers["x-api-key"]
        bearer = client.post("/predict", json=body, headers={"authorization": "Bearer s3cret"})
        assert bearer.status_code == 200 and bearer.json() == expected
        missing = client.post("/predict", json=body)
        assert missing.status_code == 401 and "missing API key" in missing.json()["detail"]
        wrong = client.post("/predict", json=body, headers={"x-api-key": "s3creT"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid API key (unknown or revoked)"}


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


def _v2_bodies(models) -> list[tuple[str, dict | bytes]]:
    X, _ = models["ml"]
    Xd, _ = models["ldl"]

    def tensor(A: np.ndarray, **extra: object) -> dict:
        return {"name": "input-0", "shape": list(A.shape), "datatype": "FP64", "data": A.ravel().tolist(), **extra}

    rows = X[:3]
    return [
        ("clf", {"inputs": [tensor(rows)]}),
        ("clf", {"inputs": [tensor(rows)], "outputs": [{"name": "labels"}], "parameters": {"threshold": 0.2}}),
        ("clf/versions/1", {"inputs": [tensor(rows)], "id": "r-1"}),
        ("dm", {"inputs": [tensor(rows)]}),
        ("dist", {"inputs": [tensor(Xd[:2])]}),
        ("sel", {"inputs": []}),
        ("clf", {"inputs": [tensor(np.vstack([X] * 30))]}),  # larger than INLINE_BYTES: a thread
        # errors
        ("clf", {"inputs": [tensor(rows[:, :2])]}),
        ("clf", {"inputs": [tensor(rows)], "outputs": [{"name": "distribution"}]}),
        ("clf", {"inputs": [tensor(rows)], "parameters": {"threshold": "high"}}),
        ("clf", {"inputs": [{**tensor(rows), "name": "x"}]}),
        ("clf", {"inputs": [tensor(rows)], "colour": "red"}),
        ("nope", {"inputs": [tensor(rows)]}),
        ("clf/versions/9", {"inputs": [tensor(rows)]}),
        ("clf@prod/versions/1", {"inputs": [tensor(rows)]}),
        (
            "clf",
            b'{"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [NaN, 1, 2, 3, 4, 5]}]}',
        ),
        ("clf", b'{"inputs": '),
        ("clf", {"inputs": [tensor(np.vstack([rows[0], rows[1] * 1e300]))]}),
        ("clf", {"inputs": [tensor(rows, datatype="FP32", data=[1e16, *rows.ravel()[1:].tolist()])]}),
        ("clf", {"inputs": [tensor(rows, data=["0.5", *rows.ravel()[1:].tolist()])]}),
        ("clf", {"inputs": [tensor(rows, data=[rows[0].tolist(), [True, *rows[1, 1:].tolist()], rows[2].tolist()])]}),
        ("clf", {"inputs": [tensor(rows, shape=[True, rows.shape[1]], data=rows[0].tolist())]}),
    ]


def test_v2_inference_fast_path_and_route_answer_alike(client, models, monkeypatch):
    """The V2 inference paths are answered in front of FastAPI's router too, with the answers
    (and the protocol's error shape, from the route) the route gives."""
    assert client.put("/models/clf/aliases/prod", json={"version": 1}).status_code == 200
    headers = {"content-type": "application/json"}
    for name, body in _v2_bodies(models):
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        for ref in ("clf", "dm", "dist", "sel", "clf@1"):  # resolved in this process
            assert client.get(f"/v2/models/{ref}/ready").status_code == 200
        fast = client.post(f"/v2/models/{name}/infer", content=content, headers=headers)
        with monkeypatch.context() as patch:
            patch.setattr(fast_path, "_infer", lambda predictor, body, name, version, header_length: None)
            patch.setattr(fast_path, "_infer_by_work", _no_answer)
            slow = client.post(f"/v2/models/{name}/infer", content=content, headers=headers)
        assert (fast.status_code, fast.json()) == (slow.status_code, slow.json()), (name, body)


def test_cached_v2_inference_is_answered_without_the_router(client, models, monkeypatch):
    from app.api.v2 import routes as v2

    X, _ = models["ml"]
    body = {"inputs": [{"name": "input-0", "shape": [1, X.shape[1]], "datatype": "FP64", "data": X[0].tolist()}]}
    for path in ("/v2/models/clf/infer", "/v2/models/clf/versions/1/infer"):
        expected = client.post(path, json=body)  # resolves the reference
        assert expected.status_code == 200
        with monkeypatch.context() as patch:
            patch.setattr(v2, "_infer", _route_is_off)
            assert client.post(path, json=body).json() == expected.json()
    metrics = client.get("/metrics").text
    assert 'labelserve_requests_total{method="POST",route="/v2/models/{name}/infer",status="200"} 2.0' in metrics
    assert 'route="/v2/models/{name}/versions/{version}/infer",status="200"} 2.0' in metrics


def _fallbacks(client: TestClient, route: str, exception: str) -> float:
    series = f'labelserve_fast_path_fallbacks_total{{exception="{exception}",route="{route}"}} '
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(series)]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_a_fallback_caused_by_an_exception_is_logged_and_counted(client, models, caplog, monkeypatch):
    """A failure the fast path meets (not one of the service's checks) is still answered by the
    route, and is no longer silent."""
    X, _ = models["ml"]
    body = {"model": "clf", "instances": X[:1].tolist()}
    client.post("/predict", json=body)  # resolved

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(fast_path, "predict_cached", broken)
    with caplog.at_level("WARNING", logger="labelserve.api"):
        r = client.post("/predict", json=body)
    assert r.status_code == 200
    assert _fallbacks(client, "/predict", "RuntimeError") == 1
    [record] = [r for r in caplog.records if r.getMessage() == "fast path fell back to the route"]
    assert record.levelname == "WARNING" and record.exc_info is not None and record.route == "/predict"


def test_the_services_checks_are_answered_by_the_fast_path(client, models, monkeypatch):
    """The service's refusals of a resolved reference (the answer bound's 413, a 422 for an
    output or features the model does not have) come from ``predict_cached``, which checks as
    the route does: answered without decoding the body again in the route (issue 24 item 2:
    refused 14 KB bodies held ``/health`` to a p99 of 236 ms) and not counted as fallbacks
    (``test_the_answer_bound_holds_on_the_fast_path_and_the_route`` compares the 413s)."""
    X, _ = models["ml"]
    client.post("/predict", json={"model": "clf", "instances": X[:1].tolist()})  # resolved
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    for body, status in (
        ({"model": "clf", "instances": X[:1].tolist(), "output": "distribution"}, 422),
        ({"model": "clf", "instances": [[1.0, 2.0]]}, 422),
        ({"model": "clf", "instances": X[:1].tolist() * 2000, "output": "distribution"}, 422),  # a large body
    ):
        assert client.post("/predict", json=body).status_code == status
    assert "labelserve_fast_path_fallbacks_total{" not in client.get("/metrics").text


def test_a_fallback_without_an_exception_is_not_counted(client, models, caplog):
    """An unresolved reference is the route's job, not a failure of the fast path."""
    X, _ = models["ml"]
    with caplog.at_level("WARNING", logger="labelserve.api"):
        r = client.post("/predict", json={"model": "nope", "instances": X[:1].tolist()})
    assert r.status_code == 404
    assert "labelserve_fast_path_fallbacks_total{" not in client.get("/metrics").text
    assert not [r for r in caplog.records if r.getMessage() == "fast path fell back to the route"]


def test_a_refused_reference_is_answered_without_the_route(client, models, monkeypatch):
    """Issue 24: 100 connections predicting an unknown model each went to the route and its hop
    to the shared thread pool, where a plain ``GET /models/{name}`` then waited (p99 146 ms).
    A reference refused since the registry last changed is answered by the fast path, with the
    route's status, bytes and headers, and counted under the route's template."""
    X, ml = models["ml"]
    rows = X[:2].tolist()
    bodies = [
        {"model": "nope", "instances": rows},
        {"model": "clf@9", "instances": rows},
        {"model": "clf@staging", "instances": rows},
        {"model": "nope", "dataset_id": ml["id"]},
        {"model": "nope", "instances": np.vstack([X] * 30).tolist()},  # larger than INLINE_BYTES: a thread
    ]
    first = [client.post("/predict", json=body) for body in bodies]  # the route refuses each, once
    assert [r.status_code for r in first] == [404] * len(bodies)
    before = _served_count(client, 404)
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    for body, expected in zip(bodies, first):
        again = client.post("/predict", json=body)
        assert again.status_code == expected.status_code and again.content == expected.content, body
        assert again.headers["content-type"] == expected.headers["content-type"]
    assert _served_count(client, 404) == before + len(bodies)


def test_a_refused_v2_reference_is_answered_without_a_worker_thread(client, models, monkeypatch):
    """The V2 routes answer a reference refused since the registry last changed on the event loop
    (metadata, readiness and inference alike): no hop to the thread pool the other routes need."""
    from app.api.v2 import routes as v2

    calls = [
        ("GET", "/v2/models/nope", None),
        ("GET", "/v2/models/nope/ready", None),
        ("GET", "/v2/models/clf/versions/9", None),
        ("POST", "/v2/models/nope/infer", {"inputs": []}),
    ]
    first = [client.request(method, path, json=body) for method, path, body in calls]
    assert [r.status_code for r in first] == [404] * len(calls)
    monkeypatch.setattr(v2, "run_in_threadpool", _route_is_off)
    for (method, path, body), expected in zip(calls, first):
        again = client.request(method, path, json=body)
        assert (again.status_code, again.json()) == (404, expected.json()), path


def _refusals(client: TestClient, monkeypatch, body: bytes) -> list[tuple[list[object], str]]:
    """The 422 items of a body, the same through the fast path and the route."""
    fast, slow = _both(client, monkeypatch, body)
    assert fast == slow, body
    assert fast[0] == 422, (body, fast)
    return [(item["loc"], item["msg"]) for item in fast[1]["detail"]]


def test_prediction_inputs_are_numbers_bounded_as_datasets_are(client, models, monkeypatch):
    """Issue 24: ``[[1e300, ...]]``, ``[["0.9", ...]]`` and ``"threshold": NaN`` were answered 200
    (coerced, or empty label sets); each is a 422 naming the field, from the fast path and the route."""
    X, ml = models["ml"]
    names = ml["feature_names"]
    row = X[0].tolist()
    client.post("/predict", json={"model": "clf", "instances": [row]})  # resolved: the fast path answers

    def body(**fields: object) -> bytes:
        return json.dumps({"model": "clf", "instances": [row], **fields}).encode()

    def csr(indptr: list[object], indices: list[object], values: list[object]) -> bytes:
        return json.dumps({"model": "clf", "csr": {"indptr": indptr, "indices": indices, "values": values}}).encode()

    def rows(*values: object) -> bytes:
        return body(instances=[[*values, *row[len(values) :]]])

    bound = "feature values must be finite numbers within +-1e+15, as in datasets"
    for content, loc, words in (
        (rows(1e300), ["body", "instances", 0, 0], bound),
        (rows(0.5, -1.5e15), ["body", "instances", 0, 1], bound),
        (body(instances=[dict(zip(names, [1e16, *row[1:]]))]), ["body", "instances", 0, names[0]], bound),
        (csr([0, 2], [0, 3], [0.5, 1e300]), ["body", "csr", "values", 1], bound),
        (rows("0.9"), ["body", "instances", 0, 0], "valid number"),
        (rows(True), ["body", "instances", 0, 0], "valid number"),
        (body(instances=[dict(zip(names, ["0.9", *row[1:]]))]), ["body", "instances", 0, names[0]], "valid number"),
        (csr([0, 1], [0], ["0.5"]), ["body", "csr", "values", 0], "valid number"),
        (csr([0, True], [0], [0.5]), ["body", "csr", "indptr", 1], "valid integer"),
        (csr([0, 1], [False], [0.5]), ["body", "csr", "indices", 0], "valid integer"),
        (body(threshold="0.5"), ["body", "threshold"], "valid number"),
        (body(threshold=True), ["body", "threshold"], "valid number"),
        (body()[:-1] + b', "threshold": NaN}', ["body", "threshold"], "finite number"),  # json.loads takes NaN
        (body()[:-1] + b', "threshold": -Infinity}', ["body", "threshold"], "finite number"),
        (body(output="ranking", top_k=True), ["body", "top_k"], "valid integer"),
        (body(output="ranking", top_k="2"), ["body", "top_k"], "valid integer"),
        (body(output="ranking", top_k=2.5), ["body", "top_k"], "integer"),
        (body(include_scores="true"), ["body", "include_scores"], "valid boolean"),
        (body(include_scores=1), ["body", "include_scores"], "valid boolean"),
    ):
        [(found, message)] = _refusals(client, monkeypatch, content)
        assert found == loc and words in message, (content, found, message)
    # the bound itself is a feature value, as in datasets; an integer is a number, and 2.0 an integer
    # (JSON Schema's, which the OpenAPI document declares)
    for content in (rows(1e15, -1e15), rows(1, 0), body(threshold=1), body(output="ranking", top_k=2.0)):
        fast, slow = _both(client, monkeypatch, content)
        assert fast == slow and fast[0] == 200, (content, fast)


def test_two_content_types_are_refused_by_the_fast_path_and_the_route_alike(client, models, monkeypatch):
    """Issue 24: with ``text/plain`` then ``application/json`` the fast path (reading the last
    header) answered 200 and the route (Starlette reads the first) 422; either order is now a 400
    naming the header, from both, and a V2 inference is refused the same way."""
    X, _ = models["ml"]
    content = json.dumps({"model": "clf", "instances": X[:1].tolist()}).encode()
    assert client.post("/predict", content=content, headers={"content-type": "application/json"}).status_code == 200
    assert client.get("/v2/models/clf/ready").status_code == 200  # resolved: the fast path would take both
    v2 = {"inputs": [{"name": "input-0", "shape": [1, X.shape[1]], "datatype": "FP64", "data": X[0].tolist()}]}
    for types in (("application/json", "text/plain"), ("text/plain", "application/json")):
        headers = [("content-type", value) for value in types]
        fast, slow = _both(client, monkeypatch, content, headers)
        assert fast == slow, types
        assert fast[0] == 400 and fast[1] == {
            "detail": f"Content-Type: the request has 2 Content-Type headers ({', '.join(types)}); "
            "send one, the media type of the body"
        }
        r = client.post("/v2/models/clf/infer", content=json.dumps(v2).encode(), headers=headers)
        assert r.status_code == 400 and r.json() == fast[1]
