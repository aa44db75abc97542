"""The open inference protocol (V2): metadata, readiness, and inference that equals ``/predict``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import __version__
from app.main import create_app
from tests.helpers import make_multilabel, train, upload_csv


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
    labels, features = models["labels"], [f"f{j}" for j in range(6)]
    assert meta == {
        "name": "clf",
        "versions": ["1"],
        "platform": "labelserve",
        "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [-1, 6], "parameters": {"features": features}}],
        "outputs": [
            {"name": "scores", "datatype": "FP64", "shape": [-1, 3], "parameters": {"labels": labels}},
            {"name": "labels", "datatype": "BOOL", "shape": [-1, 3], "parameters": {"labels": labels}},
        ],
        "parameters": {"method": "mlknn", "task": "multilabel", "labels": labels, "features": features},
    }
    assert client.get("/v2/models/sel/versions/1").json()["outputs"] == [
        {"name": "features", "datatype": "INT64", "shape": [6], "parameters": {"features": features}}
    ]
    dist = client.get("/v2/models/dist").json()
    assert dist["outputs"][0]["name"] == "distribution"
    assert dist["outputs"][0]["parameters"]["labels"] == dist["parameters"]["labels"] == [f"label{j}" for j in range(4)]
    assert client.get("/v2").json() == {
        "name": "labelserve",
        "version": __version__,
        "extensions": ["binary_tensor_data"],
    }
    assert client.get("/v2/models/clf/ready").json() == {"name": "clf", "ready": True}
    assert client.get("/v2/models/clf/versions/1/ready").status_code == 200
    assert client.get("/v2/health/live").json() == {"live": True}
    assert client.get("/v2/health/ready").json() == {"ready": True}


def test_readiness_of_a_loaded_reference_takes_no_worker_thread(client, models, monkeypatch):
    """Orchestrators poll readiness while the process serves: a reference this process holds
    resolved and loaded is answered on the event loop; a registry change makes it look again."""
    import anyio.to_thread

    client.post("/predict", json={"model": "clf", "instances": models["ml"][:1].tolist()})  # resolved here
    hops: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func, *args, **kwargs):
        hops.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    assert client.get("/v2/models/clf/ready").json() == {"name": "clf", "ready": True}
    assert hops == []
    client.app.state.core.store.registry_changed()  # another process's change
    assert client.get("/v2/models/clf/ready").status_code == 200 and len(hops) == 1
    assert client.get("/v2/models/nope/ready").status_code == 404


@pytest.mark.parametrize(
    "path,body,status,words",
    [
        ("nope/infer", {"inputs": []}, 404, "not found"),
        ("clf/versions/9/infer", {"inputs": []}, 404, "not found"),
        ("clf@prod/versions/1/infer", {"inputs": []}, 404, "version"),
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
            "inputs[0].data[0] must be a number",
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
        # issue 24: the bounds and types of /predict's instances (1e300 and "0.5" were answered 200)
        *(
            (
                "clf/infer",
                {
                    "inputs": [
                        {"name": "input-0", "shape": [1, 6], "datatype": datatype, "data": [0, 1e300, 0, 0, 0, 0]}
                    ]
                },
                400,
                "the value at [0, 1] is 1e+300; feature values must be finite numbers within +-1e+15, as in datasets",
            )
            for datatype in ("FP64", "FP32")  # checked before FP32 rounds it to infinity
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [0, 0, "0.5", 0, 0, 0]}]},
            400,
            "inputs[0].data[2] must be a number",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [[0, 0, 0, 0, 0, True]]}]},
            400,
            "inputs[0].data[0][5] must be a number",
        ),
        (
            "clf/infer",
            {"inputs": [{"name": "input-0", "shape": [True, 6], "datatype": "FP64", "data": [0] * 6}]},
            400,
            "inputs[0].shape[0] must be an integer",
        ),
    ],
)
def test_errors_have_the_protocol_shape(client, models, path, body, status, words):
    for _ in range(2):  # uncached and cached references fail alike
        r = client.post(f"/v2/models/{path}", json=body)
        assert r.status_code == status and set(r.json()) == {"error"} and words in r.json()["error"], r.text


def test_bodies_that_are_not_json_or_not_finite(client, models):
    """Errors say what is wrong in the protocol's terms, never with the JSON parser's own text."""
    headers = {"content-type": "application/json"}
    r = client.post("/v2/models/clf/infer", content=b"{", headers=headers)
    assert r.status_code == 400 and r.json() == {
        "error": "the body is not JSON: it ends at line 1, column 2, before the JSON is complete"
    }
    nan = b'{"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "FP64", "data": [NaN, 0, 0, 0, 0, 0]}]}'
    r = client.post("/v2/models/clf/infer", content=nan, headers=headers)
    assert r.status_code == 400 and "JSON has no NaN or Infinity" in r.json()["error"]
    assert (
        client.post("/v2/models/clf/infer", content=b"", headers=headers)
        .json()["error"]
        .startswith("the body is empty")
    )
    assert client.post("/v2/models/clf/infer", json=[1]).json() == {
        "error": "the inference request must be a JSON object with 'inputs'"
    }
    wrong = {"inputs": [{"name": "input-0", "shape": "1x6", "datatype": "FP64", "data": []}]}
    assert client.post("/v2/models/clf/infer", json=wrong).json() == {"error": "inputs[0].shape must be a list"}
    int8 = {"inputs": [{"name": "input-0", "shape": [1, 6], "datatype": "INT8", "data": [0] * 6}]}
    assert client.post("/v2/models/clf/infer", json=int8).json() == {
        "error": "inputs[0].datatype is 'INT8'; this server takes 'FP32' or 'FP64'"
    }
    assert client.post("/v2/models/clf/infer", json={"inputs": [{}]}).json() == {
        "error": "inputs[0].name is required (and 2 more faults)"
    }
    assert client.get("/v2/models/nope").status_code == 404


@pytest.mark.parametrize(
    "body,error",
    [
        (b'{"inputs": [}', "the body is not JSON: unexpected '}' at line 1, column 13"),
        (b'{"inputs" []}', "the body is not JSON: unexpected '[' at line 1, column 11"),
        (b'{"inputs": [], "id": tru}', "the body is not JSON: unexpected 'tru' at line 1, column 22"),
        (
            b'{"inputs": [\n  1e400]}',
            "the body is not JSON: the number 1e400 at line 2, column 3 is too large "
            "(every value must be a finite number)",
        ),
        (b'{"inputs": [\x01]}', "the body is not JSON: unexpected byte 0x01 at line 1, column 13"),
        (b'{"inputs": [', "the body is not JSON: it ends at line 1, column 13, before the JSON is complete"),
    ],
)
def test_a_body_that_is_not_json_is_told_in_the_services_words(client, models, caplog, body, error):
    """Issue 24 item 4: the error says what is wrong and where, in the service's words; the JSON
    parser's own text ("unexpected character: line 1 column 2 (char 1)") is in the log only."""
    for _ in range(2):  # the route, then the fast path with the reference resolved
        with caplog.at_level("INFO", logger="labelserve.api"):
            r = client.post("/v2/models/clf/infer", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json() == {"error": error}
        assert "(char " not in error and "unexpected character" not in error  # orjson's phrases
        [parsed] = {record.parser for record in caplog.records if record.getMessage() == "inference body is not JSON"}
        assert "(char " in parsed  # orjson's text, with its line, column and character offset
        caplog.clear()
    framed = client.post(
        "/v2/models/clf/infer", content=b'{"inputs" []}' + b"\0" * 8, headers={"inference-header-content-length": "13"}
    )
    assert framed.json() == {
        "error": "the first 13 bytes of the body (Inference-Header-Content-Length) are not a JSON inference request: "
        "unexpected '[' at line 1, column 11"
    }


def framed(X: np.ndarray, datatype: str = "FP64", **request: object) -> tuple[bytes, dict[str, str]]:
    """A request in the binary tensor data extension: the JSON header, then the input's raw bytes."""
    raw = X.astype("<f8" if datatype == "FP64" else "<f4").tobytes()
    tensor = {
        "name": "input-0",
        "shape": list(X.shape),
        "datatype": datatype,
        "parameters": {"binary_data_size": len(raw)},
    }
    header = json.dumps({"inputs": [tensor], **request}).encode()
    return header + raw, {"inference-header-content-length": str(len(header))}


def unframed(r) -> dict[str, np.ndarray]:
    """The output tensors of a response, binary or JSON, as arrays."""
    assert r.status_code == 200, r.text
    length = r.headers.get("inference-header-content-length")
    header = json.loads(r.content if length is None else r.content[: int(length)])
    rest, out = r.content[int(length or len(r.content)) :], {}
    for o in header["outputs"]:
        size = (o.get("parameters") or {}).get("binary_data_size")
        dtype = {"FP64": "<f8", "INT64": "<i8", "BOOL": "?"}[o["datatype"]]
        if size is None:
            out[o["name"]] = np.array(o["data"], dtype=dtype).reshape(o["shape"])
        else:
            out[o["name"]] = np.frombuffer(rest[:size], dtype=dtype).reshape(o["shape"])
            rest = rest[size:]
    assert rest == b""
    return out


@pytest.mark.parametrize("name", ["clf", "dm", "dist", "sel"])
def test_binary_tensors_give_the_json_answers(client, models, name):
    X = models["ldl"][:5] if name == "dist" else models["ml"][:5]
    body = {"inputs": [] if name == "sel" else [tensor(X)]}
    expected = unframed(client.post(f"/v2/models/{name}/infer", json=body))
    for _ in range(2):  # resolved by the route, then cached (the fast path)
        if name == "sel":
            content, headers = json.dumps({**body, "parameters": {"binary_data_output": True}}).encode(), {}
        else:
            content, headers = framed(X, parameters={"binary_data_output": True})
        r = client.post(f"/v2/models/{name}/infer", content=content, headers=headers)
        assert r.headers["content-type"] == "application/octet-stream"
        got = unframed(r)
        assert list(got) == list(expected)
        for key, value in expected.items():
            assert got[key].dtype == value.dtype and got[key].shape == value.shape
            np.testing.assert_array_equal(got[key], value)
    if name != "sel":  # binary input, JSON output (nothing asked binary)
        content, headers = framed(X)
        r = client.post(f"/v2/models/{name}/infer", content=content, headers=headers)
        assert r.headers["content-type"] == "application/json" and "inference-header-content-length" not in r.headers
        assert {k: v.tolist() for k, v in unframed(r).items()} == {k: v.tolist() for k, v in expected.items()}


def test_binary_fp32_inputs_and_per_output_choice(client, models):
    X = models["ml"][:4]
    json32 = client.post("/v2/models/clf/infer", json={"inputs": [{**tensor(X), "datatype": "FP32"}]})
    content, headers = framed(
        X,
        "FP32",
        outputs=[{"name": "labels", "parameters": {"binary_data": False}}, {"name": "scores"}],
        parameters={"binary_data_output": True},
    )
    r = client.post("/v2/models/clf/infer", content=content, headers=headers)
    header = json.loads(r.content[: int(r.headers["inference-header-content-length"])])
    assert [o["name"] for o in header["outputs"]] == ["labels", "scores"]
    assert "data" in header["outputs"][0] and header["outputs"][1]["parameters"] == {"binary_data_size": 4 * 3 * 8}
    got, expected = unframed(r), unframed(json32)
    np.testing.assert_array_equal(got["scores"], expected["scores"])
    np.testing.assert_array_equal(got["labels"], expected["labels"])


def _binary_errors(X: np.ndarray) -> list[tuple[bytes, dict[str, str], str]]:
    content, headers = framed(X)
    length = int(headers["inference-header-content-length"])
    header = json.loads(content[:length])

    def reframed(**changes: object) -> bytes:
        tensor = {**header["inputs"][0], **changes}
        head = json.dumps({"inputs": [tensor]}).encode()
        return head + content[length:], {"inference-header-content-length": str(len(head))}

    return [
        (content, {}, "binary tensor data after the JSON inference request needs the Inference-Header-Content-Length"),
        (content, {"inference-header-content-length": "x"}, "Inference-Header-Content-Length must be"),
        (content, {"inference-header-content-length": str(len(content) + 1)}, f"the body's {len(content)} bytes"),
        (content, {"inference-header-content-length": "3"}, "the first 3 bytes of the body"),
        (
            content + b"\0",
            headers,
            "49 bytes follow the inference header, but the inputs' binary_data_size add up to 48",
        ),
        (*reframed(parameters={"binary_data_size": 40}), "8 bytes follow the inference header"),
        (*reframed(parameters={"binary_data_size": 56}), "binary_data_size 56 goes past the end of the body"),
        (*reframed(parameters={"binary_data_size": -1}), "inputs[0].parameters.binary_data_size must be a whole"),
        (*reframed(data=[0] * 6), "has both data and binary_data_size"),
        (*reframed(shape=[2, 6]), "shape [2, 6] of FP64 is 96 bytes of binary data, but its binary_data_size is 48"),
        (*reframed(datatype="FP32"), "shape [1, 6] of FP32 is 24 bytes"),
        (
            json.dumps({"inputs": [header["inputs"][0]]}).encode(),
            {},
            "has a binary_data_size, but the request has no Inference-Header-Content-Length header",
        ),
        (framed(np.full((1, 6), np.nan))[0], framed(np.full((1, 6), np.nan))[1], "[0, 0] is not a finite number"),
        (
            *framed(X, parameters={"binary_data_output": "yes"}),
            "parameters.binary_data_output must be true or false, not 'yes'",
        ),
        (
            *framed(X, outputs=[{"name": "scores", "parameters": {"binary_data": 1}}]),
            "outputs[0].parameters.binary_data must be true or false",
        ),
    ]


def test_binary_errors_have_the_protocol_shape(client, models):
    X = models["ml"][:1]
    for content, headers, words in _binary_errors(X):
        for _ in range(2):  # uncached and cached references fail alike
            r = client.post("/v2/models/clf/infer", content=content, headers=headers)
            assert r.status_code == 400 and set(r.json()) == {"error"}, r.text
            assert words in r.json()["error"], (words, r.json())


def test_binary_inference_behind_the_key_and_the_upload_limit(settings):
    settings.api_key = "s3cret"
    with TestClient(create_app(settings), headers={"x-api-key": "s3cret"}) as client:
        X, Y = make_multilabel()
        train(client, "mlknn", upload_csv(client, X, Y, "ml")["id"], "clf", k=3)
        content, headers = framed(X[:2], parameters={"binary_data_output": True})
        url = "/v2/models/clf/infer"
        for _ in range(2):  # resolved, then cached
            assert unframed(client.post(url, content=content, headers=headers))["labels"].shape == (2, 3)
        del client.headers["x-api-key"]
        assert client.post(url, content=content, headers=headers).status_code == 401
        assert client.post(url, content=content, headers={**headers, "x-api-key": "no"}).status_code == 401
        big, big_headers = framed(np.vstack([X] * 300))  # 1.15 MB, over the tests' 1 MB limit
        r = client.post(url, content=big, headers={**big_headers, "x-api-key": "s3cret"})
        assert r.status_code == 413


def test_binary_bodies_fast_path_and_route_answer_alike(client, models, monkeypatch):
    """Binary bodies (answers and errors) get the same status, headers and bytes from the fast
    path as from the route, and a cached reference is answered without the route."""
    from app.api import fast_path
    from app.api.v2 import routes as v2

    X = models["ml"]
    bodies = [framed(X[:3], parameters={"binary_data_output": True}), framed(X[:3], "FP32")]
    bodies += [framed(np.vstack([X] * 30), parameters={"binary_data_output": True})]  # over INLINE_BYTES
    bodies += [(content, headers) for content, headers, _ in _binary_errors(X[:1])]
    for content, headers in bodies:
        assert client.get("/v2/models/clf/ready").status_code == 200  # resolved in this process
        fast = client.post("/v2/models/clf/infer", content=content, headers=headers)
        with monkeypatch.context() as patch:
            patch.setattr(fast_path, "_infer", lambda *args, **kwargs: None)
            patch.setattr(fast_path, "_infer_by_work", _no_answer)
            slow = client.post("/v2/models/clf/infer", content=content, headers=headers)
        assert (fast.status_code, fast.content) == (slow.status_code, slow.content)
        for header in ("content-type", "inference-header-content-length"):
            assert fast.headers.get(header) == slow.headers.get(header)
    monkeypatch.setattr(v2, "_infer", lambda *args: (_ for _ in ()).throw(AssertionError("the route was called")))
    content, headers = bodies[0]
    assert unframed(client.post("/v2/models/clf/infer", content=content, headers=headers))["scores"].shape == (3, 3)


async def _no_answer(*args: object) -> None:
    return None


def test_an_answer_over_the_cell_bound_is_refused_on_both_paths(client, models, settings, monkeypatch):
    """The answer bound of /predict (LABELSERVE_MAX_ANSWER_CELLS, scores at 1/16 of a cell) holds
    for V2 inference too, from the fast path and the route alike; asking fewer outputs fits."""
    from app.api import fast_path

    settings.max_answer_cells = 20  # the app's settings: 7 rows x 3 labels + 2 cells of scores are 23
    X = models["ml"][:7]
    body = {"inputs": [tensor(X)]}
    for patched in (False, True):
        with monkeypatch.context() as patch:
            if patched:  # the route alone
                patch.setattr(fast_path, "_infer", lambda *args, **kwargs: None)
                patch.setattr(fast_path, "_infer_by_work", _no_answer)
            assert client.get("/v2/models/clf/ready").status_code == 200
            r = client.post("/v2/models/clf/infer", json=body)
            assert r.status_code == 413 and set(r.json()) == {"error"}, r.text
            assert r.json()["error"].startswith("the answer would be 7 rows x 3 labels (23 cells of the outputs")
            assert "send at most 5 instances per request" in r.json()["error"]
            assert infer(client, "clf", X, outputs=[{"name": "scores"}])["scores"]["shape"] == [7, 3]
