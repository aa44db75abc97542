"""The V2 protocol over gRPC as stock clients speak it: Triton's own Python client
(``tritonclient[grpc]``) against ``labelserve serve`` with ``LABELSERVE_GRPC_PORT`` set, and the
standard health service (``grpc.health.v1``) as probes call it.

Every inference is made on two paths of the live server: ``route`` (just after an alias was set,
a registry change, so the process has dropped its resolved references: the servicer resolves the
model in a worker thread, loading it, as the model cache holds one model at a time here) and
``fast path`` (the reference resolved, answered on the event loop). Both equal ``POST /predict``
to 1e-12. The server has API keys, so every call carries one in its metadata, as
``authorization: Bearer`` or as ``x-api-key``.

This process never imports labelserve's generated protocol code: ``tritonclient.grpc`` registers
the same message names (``inference.*``) in protobuf's one pool. The messages Triton's proto lacks
(the metadata's ``parameters``, typed input ``contents``) are built from the project's descriptor
in a pool of their own (``_ours``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from app.services.keys import Role, add_key
from tests.helpers import REPO, free_port, live_server, predict_ok, train_v2_models, v2_next_on

grpc = pytest.importorskip("grpc")
triton = pytest.importorskip("tritonclient.grpc")
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

# real `labelserve serve` processes: left out of the quick subset
pytestmark = pytest.mark.slow

PATHS = ("route", "fast path")
#: the answer bound of the server under test: 7 rows of 3 labels (21 cells + 2 of scores) fit, 20 rows do not
MAX_ANSWER_CELLS = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A live server with a classifier (``clf``), an LDL model (``dist``) and a selector (``sel``),
    gRPC on its own port, keys of the roles ``admin``, ``predict`` and ``read``."""
    workdir = tmp_path_factory.mktemp("triton-grpc")
    keys = workdir / "keys.jsonl"
    key = {role: add_key(keys, role.value, role) for role in (Role.ADMIN, Role.PREDICT, Role.READ)}
    port = free_port()
    env = {
        "LABELSERVE_GRPC_PORT": str(port),
        "LABELSERVE_API_KEYS_FILE": str(keys),
        "LABELSERVE_MODEL_CACHE_MB": "0.001",  # one loaded model at a time: the route's path loads
        "LABELSERVE_MAX_ANSWER_CELLS": str(MAX_ANSWER_CELLS),
        "LABELSERVE_MAX_UPLOAD_MB": "1",
    }
    with live_server(workdir, env) as url:
        with httpx.Client(base_url=url, timeout=120, headers={"x-api-key": key[Role.ADMIN]}) as http:
            yield {"url": url, "grpc": f"127.0.0.1:{port}", "http": http, "key": key, **train_v2_models(http)}


@pytest.fixture
def client(server: dict[str, Any]) -> Iterator[Any]:
    client = triton.InferenceServerClient(server["grpc"])
    yield client
    client.close()


def _auth(server: dict[str, Any], role: Role = Role.PREDICT) -> dict[str, str]:
    return {"authorization": f"Bearer {server['key'][role]}"}


def _input(X: np.ndarray, datatype: str = "FP64") -> Any:
    tensor = triton.InferInput("input-0", list(X.shape), datatype)
    tensor.set_data_from_numpy(X.astype(np.float64 if datatype == "FP64" else np.float32))
    return tensor


def _loads(server: dict[str, Any]) -> float:
    """Model loads so far: the model cache's misses (``/metrics``)."""
    text = server["http"].get("/metrics").text
    return float(re.search(r'^labelserve_model_cache_lookups_total\{result="miss"\} (\S+)', text, re.M)[1])


def _on(server: dict[str, Any], path: str, model: str) -> None:
    """The next inference on ``model`` through ``path``; on the route's, another model is loaded
    first (``sel``, or ``clf`` for ``sel``), so that ``model`` is loaded again."""
    if path == "route":
        other = "clf" if model == "sel" else "sel"
        assert server["http"].get(f"/v2/models/{other}/ready").status_code == 200
    v2_next_on(server["http"], path, model)


def _infer(client: Any, server: dict[str, Any], path: str, model: str, *args: Any, **kwargs: Any) -> Any:
    """``client.infer`` through ``path``; on the route's, the model is asserted to have been loaded."""
    _on(server, path, model)
    loads = _loads(server)
    result = client.infer(model, *args, headers=_auth(server), **kwargs)
    assert (_loads(server) > loads) == (path == "route")
    return result


def _labels(server: dict[str, Any], model: str) -> list[str]:
    return server["http"].get(f"/v2/models/{model}").json()["parameters"]["labels"]


def test_health_and_metadata(client: Any, server: dict[str, Any]) -> None:
    headers = _auth(server, Role.READ)
    assert client.is_server_live() and client.is_server_ready()  # open, as /v2/health/* are
    assert client.is_model_ready("clf", headers=headers) and client.is_model_ready("dist", "1", headers=headers)
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "labelserve" and meta["extensions"] == ["binary_tensor_data"]
    assert meta["version"] == server["http"].get("/v2").json()["version"]
    model = client.get_model_metadata("clf", headers=headers, as_json=True)
    assert (model["name"], model["versions"], model["platform"]) == ("clf", ["1"], "labelserve")
    assert model["inputs"] == [{"name": "input-0", "datatype": "FP64", "shape": ["-1", "6"]}]
    assert [(o["name"], o["datatype"], o["shape"]) for o in model["outputs"]] == [
        ("scores", "FP64", ["-1", "3"]),
        ("labels", "BOOL", ["-1", "3"]),
    ]
    assert client.get_model_metadata("sel", "1", headers=headers).outputs[0].datatype == "INT64"


def test_metadata_parameters_name_the_columns(server: dict[str, Any]) -> None:
    """The protocol's metadata ``parameters`` (which Triton's proto lacks): the label and feature
    names, as the REST metadata gives them, so a gRPC client can map columns to names."""
    rest = server["http"].get("/v2/models/clf").json()
    got = _call(server, "ModelMetadata", _ours("ModelMetadataRequest")(name="clf"), "ModelMetadataResponse")
    assert json.loads(got.parameters["labels"].string_param) == rest["parameters"]["labels"]
    assert json.loads(got.parameters["features"].string_param) == rest["parameters"]["features"]
    assert got.parameters["method"].string_param == "mlknn"
    assert json.loads(got.inputs[0].parameters["features"].string_param) == rest["parameters"]["features"]
    assert json.loads(got.outputs[1].parameters["labels"].string_param) == rest["parameters"]["labels"]


@pytest.mark.parametrize("path", PATHS)
def test_a_classifiers_label_sets_scores_and_ranking_equal_predict(
    client: Any, server: dict[str, Any], path: str
) -> None:
    """Label sets as BOOL, scores as FP64; the ranking is the scores' order, as /predict ranks."""
    X, labels = server["X"][:7], _labels(server, "clf")
    native = predict_ok(server["http"], {"model": "clf", "instances": X.tolist(), "include_scores": True})
    ranked = predict_ok(server["http"], {"model": "clf", "instances": X.tolist(), "output": "ranking"})
    result = _infer(client, server, path, "clf", [_input(X)])
    scores, sets = result.as_numpy("scores"), result.as_numpy("labels")
    assert scores.dtype == np.float64 and sets.dtype == np.bool_ and scores.shape == sets.shape == (7, 3)
    expected = np.array([[p["scores"][lab] for lab in labels] for p in native["predictions"]])
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)
    assert [[lab for lab, on in zip(labels, row) if on] for row in sets] == [
        sorted(p["labels"]) for p in native["predictions"]
    ]
    order = np.argsort(-scores, axis=1, kind="stable")
    for row, scored, p in zip(order, scores, ranked["predictions"]):
        assert [labels[j] for j in row] == [r["label"] for r in p["ranking"]]
        np.testing.assert_allclose(scored[row], [r["score"] for r in p["ranking"]], rtol=0, atol=1e-12)
    response = result.get_response()
    assert (response.model_name, response.model_version) == ("clf", "1")


@pytest.mark.parametrize("path", PATHS)
def test_a_distribution_equals_predict(client: Any, server: dict[str, Any], path: str) -> None:
    Xd, labels = server["Xd"][:5], _labels(server, "dist")
    native = predict_ok(server["http"], {"model": "dist", "instances": Xd.tolist()})["predictions"]
    outputs = [triton.InferRequestedOutput("distribution")]
    got = _infer(client, server, path, "dist", [_input(Xd)], outputs=outputs, model_version="1")
    expected = np.array([[p["distribution"][lab] for lab in labels] for p in native])
    np.testing.assert_allclose(got.as_numpy("distribution"), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_a_selectors_features_equal_predict(client: Any, server: dict[str, Any], path: str) -> None:
    features = server["http"].get("/v2/models/sel").json()["parameters"]["features"]
    native = predict_ok(server["http"], {"model": "sel", "output": "features"})["features"]
    got = _infer(client, server, path, "sel", [], outputs=[triton.InferRequestedOutput("features")])
    ranking = got.as_numpy("features")
    assert ranking.dtype == np.int64 and ranking.tolist() == [f["index"] for f in native]
    assert [features[i] for i in ranking] == [f["name"] for f in native]


@pytest.mark.parametrize("path", PATHS)
def test_fp32_input_a_threshold_and_one_output(client: Any, server: dict[str, Any], path: str) -> None:
    X, labels = server["X"][:4], _labels(server, "clf")
    body = {"model": "clf", "instances": X.astype(np.float32).tolist(), "threshold": 0.05}
    native = predict_ok(server["http"], body)["predictions"]
    outputs = [triton.InferRequestedOutput("labels")]
    result = _infer(client, server, path, "clf", [_input(X, "FP32")], outputs=outputs, parameters={"threshold": 0.05})
    assert [o.name for o in result.get_response().outputs] == ["labels"]
    sets = result.as_numpy("labels")
    assert [[lab for lab, on in zip(labels, row) if on] for row in sets] == [sorted(p["labels"]) for p in native]


def test_typed_contents_and_an_id(server: dict[str, Any]) -> None:
    """Inputs in ``contents.fp64_contents`` rather than raw bytes (clients other than Triton's send
    them so), and the request's id echoed; outputs come back raw, as Triton answers."""
    X, labels = server["X"][:3], _labels(server, "clf")
    request = _ours("ModelInferRequest")(model_name="clf", id="r-1")
    request.inputs.add(name="input-0", datatype="FP64", shape=[3, 6]).contents.fp64_contents.extend(X.ravel().tolist())
    got = _call(server, "ModelInfer", request, "ModelInferResponse")
    assert got.id == "r-1" and [o.name for o in got.outputs] == ["scores", "labels"]
    scores = np.frombuffer(got.raw_output_contents[0], "<f8").reshape(3, 3)
    native = predict_ok(server["http"], {"model": "clf", "instances": X.tolist(), "include_scores": True})
    expected = [[p["scores"][lab] for lab in labels] for p in native["predictions"]]
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_errors_have_grpc_status_codes(client: Any, server: dict[str, Any], path: str) -> None:
    X = server["X"]
    v2_next_on(server["http"], path, "clf")
    headers = _auth(server)
    for call in (
        lambda: client.infer("nope", [_input(X[:2])], headers=headers),
        lambda: client.get_model_metadata("nope", headers=headers),
        lambda: client.is_model_ready("nope", headers=headers),
        lambda: client.infer("clf", [_input(X[:2])], model_version="9", headers=headers),
    ):
        assert _refusal(call)[0] == "StatusCode.NOT_FOUND"
    assert _refusal(lambda: client.infer("nope", [_input(X[:2])], headers=headers))[1] == "model 'nope' not found"
    narrow = _refusal(lambda: client.infer("clf", [_input(X[:2, :5])], headers=headers))
    assert narrow == ("StatusCode.INVALID_ARGUMENT", "input 'input-0' must have shape [n, 6] with n >= 1, not [2, 5]")
    outputs = [triton.InferRequestedOutput("x")]
    unknown = _refusal(lambda: client.infer("clf", [_input(X[:2])], outputs=outputs, headers=headers))
    assert unknown == ("StatusCode.INVALID_ARGUMENT", "a mlknn model has the outputs scores, labels; not x")
    too_many = _refusal(lambda: client.infer("clf", [_input(X[:20])], headers=headers))
    assert too_many[0] == "StatusCode.RESOURCE_EXHAUSTED" and "LABELSERVE_MAX_ANSWER_CELLS = 30" in too_many[1]
    assert "send at most 7 instances per request" in too_many[1]
    scores = client.infer("clf", [_input(X[:20])], outputs=[triton.InferRequestedOutput("scores")], headers=headers)
    assert scores.as_numpy("scores").shape == (20, 3)  # 60 scores are 4 cells
    big = np.vstack([X] * 300)  # 1.15 MB, over the server's 1 MB upload limit
    assert _refusal(lambda: client.infer("clf", [_input(big)], headers=headers))[0] == "StatusCode.RESOURCE_EXHAUSTED"


def test_keys_and_roles_from_the_metadata(client: Any, server: dict[str, Any]) -> None:
    X, key = server["X"][:2], server["key"]
    for headers in ({"x-api-key": key[Role.PREDICT]}, {"authorization": f"Bearer {key[Role.PREDICT]}"}):
        assert client.infer("clf", [_input(X)], headers=headers).as_numpy("labels").shape == (2, 3)
    for headers in ({}, {"x-api-key": "nope"}, {"authorization": "Bearer nope"}, {"authorization": key[Role.ADMIN]}):
        refused = _refusal(lambda h=headers: client.infer("clf", [_input(X)], headers=h))
        assert refused[0] == "StatusCode.UNAUTHENTICATED", headers
        assert (
            _refusal(lambda h=headers: client.get_model_metadata("clf", headers=h))[0] == "StatusCode.UNAUTHENTICATED"
        )
    reader = {"x-api-key": key[Role.READ]}
    assert client.get_model_metadata("clf", headers=reader).name == "clf"
    denied = _refusal(lambda: client.infer("clf", [_input(X)], headers=reader))
    assert denied == (
        "StatusCode.PERMISSION_DENIED",
        "this key (name 'read', role 'read') may not call ModelInfer: it needs the 'predict' role",
    )


def test_calls_are_counted_and_timed_as_requests(client: Any, server: dict[str, Any]) -> None:
    """In ``/metrics``, as method ``GRPC`` and the call's path, with the REST status of its answer."""

    def count(call: str, status: int) -> float:
        text = server["http"].get("/metrics").text
        series = f'labelserve_requests_total{{method="GRPC",route="/inference.GRPCInferenceService/{call}",status="{status}"}}'
        found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
        return float(found[1]) if found else 0.0

    before = {(c, s): count(c, s) for c, s in (("ModelInfer", 200), ("ModelInfer", 404), ("ModelInfer", 401))}
    assert client.infer("clf", [_input(server["X"][:1])], headers=_auth(server)).as_numpy("labels").shape == (1, 3)
    _refusal(lambda: client.infer("nope", [_input(server["X"][:1])], headers=_auth(server)))
    _refusal(lambda: client.infer("clf", [_input(server["X"][:1])]))
    assert {k: count(*k) - v for k, v in before.items()} == {k: 1.0 for k in before}
    assert client.is_server_live() and count("ServerLive", 200) >= 1


def test_the_health_service_follows_ready(tmp_path: Path) -> None:
    """SERVING while ``/ready`` is 200, NOT_SERVING while it is 503 (the model store gone), for
    ``Check`` and for a ``Watch`` stream, of the server and of the inference service."""
    port = free_port()
    with live_server(tmp_path, {"LABELSERVE_GRPC_PORT": str(port)}) as url:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)
        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        assert next(watch).status == serving

        def statuses() -> list[int]:
            return [stub.Check(health_pb2.HealthCheckRequest(service=s)).status for s in SERVICES]

        assert statuses() == [serving, serving] and httpx.get(f"{url}/ready").status_code == 200
        with pytest.raises(grpc.RpcError) as unknown:
            stub.Check(health_pb2.HealthCheckRequest(service="nope"))
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        store = tmp_path / "models"
        store.rename(tmp_path / "away")
        try:
            assert httpx.get(f"{url}/ready").status_code == 503
            assert statuses() == [not_serving, not_serving]
            assert next(watch).status == not_serving
        finally:
            (tmp_path / "away").rename(store)
        assert statuses() == [serving, serving] and httpx.get(f"{url}/ready").status_code == 200
        assert next(watch).status == serving
        watch.cancel()
        channel.close()


SERVICES = ("", "inference.GRPCInferenceService")


def _refusal(call: Any) -> tuple[str, str]:
    """The gRPC status and message a call is refused with."""
    with pytest.raises(InferenceServerException) as refused:
        call()
    return str(refused.value.status()), refused.value.message()


_POOL: list[Any] = []


def _ours(name: str) -> Any:
    """A message class of labelserve's protocol, built in a descriptor pool of its own from the
    serialized descriptor in the committed generated code (read, not imported)."""
    if not _POOL:
        source = (REPO / "app/api/v2/proto/grpc_predict_v2_pb2.py").read_text()
        call = next(
            node
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile"
        )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(call.args[0])))
        _POOL.append(pool)
    return message_factory.GetMessageClass(_POOL[0].FindMessageTypeByName(f"inference.{name}"))


def _call(server: dict[str, Any], method: str, request: Any, response: str) -> Any:
    """One unary call with messages of labelserve's ``.proto``, as a predict key."""
    with grpc.insecure_channel(server["grpc"]) as channel:
        call = channel.unary_unary(
            f"/inference.GRPCInferenceService/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_ours(response).FromString,
        )
        return call(request, metadata=tuple(_auth(server).items()), timeout=30)
