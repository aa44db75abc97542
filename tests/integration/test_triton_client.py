"""The V2 protocol as a stock client speaks it: Triton's own Python client (``tritonclient[http]``)
against ``labelserve serve``.

The client's documented call sequence (``set_data_from_numpy``, outputs left at their defaults)
sends and asks for binary tensor data; with ``binary_data=False`` it speaks plain JSON. Each
inference is made twice on the live server: once just after an alias was set (a registry change,
so that the process has dropped its resolved references and the FastAPI route answers) and once
again at once (the reference now resolved, so the fast path answers; ``tests/api/test_v2.py``
proves in-process that it does). Both must equal ``POST /predict`` to 1e-12.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers import live_server, predict_ok, train_v2_models, v2_next_on

triton = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

# a real `labelserve serve` process: left out of the quick subset
pytestmark = pytest.mark.slow

PATHS = ("route", "fast path")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A live server with a classifier (``clf``, mlknn), an LDL model (``dist``) and a selector (``sel``)."""
    with live_server(tmp_path_factory.mktemp("triton")) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield {"url": url, "http": http, **train_v2_models(http)}


@pytest.fixture
def client(server: dict[str, Any]) -> Iterator[Any]:
    client = triton.InferenceServerClient(server["url"].removeprefix("http://"))
    yield client
    client.close()


def _on(server: dict[str, Any], path: str, model: str) -> None:
    v2_next_on(server["http"], path, model)


def _input(X: np.ndarray, binary: bool, datatype: str = "FP64") -> Any:
    tensor = triton.InferInput("input-0", list(X.shape), datatype)
    tensor.set_data_from_numpy(X.astype(np.float64 if datatype == "FP64" else np.float32), binary_data=binary)
    return tensor


def _predict(server: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return predict_ok(server["http"], body)


def test_health_and_metadata(client: Any, server: dict[str, Any]) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("clf") and client.is_model_ready("dist", "1")
    meta = client.get_server_metadata()
    assert meta["name"] == "labelserve" and "binary_tensor_data" in meta["extensions"]
    model = client.get_model_metadata("clf")
    labels = model["parameters"]["labels"]
    assert labels == [f"label{j}" for j in range(3)]
    assert model["inputs"] == [
        {
            "name": "input-0",
            "datatype": "FP64",
            "shape": [-1, 6],
            "parameters": {"features": model["parameters"]["features"]},
        }
    ]
    assert [o["name"] for o in model["outputs"]] == ["scores", "labels"]
    assert all(o["parameters"]["labels"] == labels for o in model["outputs"])
    assert client.get_model_metadata("sel", "1")["outputs"][0]["parameters"]["features"] == [f"f{j}" for j in range(6)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_a_classifiers_labels_and_scores_equal_predict(
    client: Any, server: dict[str, Any], path: str, binary: bool
) -> None:
    """The client's documented sequence, and a protocol-only mapping from columns to label names."""
    X = server["X"][:7]
    labels = client.get_model_metadata("clf")["parameters"]["labels"]
    native = _predict(server, {"model": "clf", "instances": X.tolist(), "include_scores": True})["predictions"]
    outputs = None if binary else [triton.InferRequestedOutput(n, binary_data=False) for n in ("scores", "labels")]
    _on(server, path, "clf")
    result = client.infer("clf", [_input(X, binary)], outputs=outputs)
    scores, sets = result.as_numpy("scores"), result.as_numpy("labels")
    assert scores.dtype == np.float64 and sets.dtype == np.bool_ and scores.shape == sets.shape == (7, 3)
    expected = np.array([[p["scores"][lab] for lab in labels] for p in native])
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)
    assert [[lab for lab, on in zip(labels, row) if on] for row in sets] == [sorted(p["labels"]) for p in native]
    assert result.get_response()["model_name"] == "clf" and result.get_response()["model_version"] == "1"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_a_distribution_equals_predict(client: Any, server: dict[str, Any], path: str, binary: bool) -> None:
    Xd = server["Xd"][:5]
    labels = client.get_model_metadata("dist")["parameters"]["labels"]
    native = _predict(server, {"model": "dist", "instances": Xd.tolist()})["predictions"]
    outputs = [triton.InferRequestedOutput("distribution", binary_data=binary)]
    _on(server, path, "dist")
    got = client.infer("dist", [_input(Xd, binary)], outputs=outputs, model_version="1").as_numpy("distribution")
    expected = np.array([[p["distribution"][lab] for lab in labels] for p in native])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_a_selectors_features_equal_predict(client: Any, server: dict[str, Any], path: str, binary: bool) -> None:
    features = client.get_model_metadata("sel")["parameters"]["features"]
    native = _predict(server, {"model": "sel", "output": "features"})["features"]
    _on(server, path, "sel")
    got = client.infer("sel", [], outputs=[triton.InferRequestedOutput("features", binary_data=binary)])
    ranking = got.as_numpy("features")
    assert ranking.dtype == np.int64 and ranking.tolist() == [f["index"] for f in native]
    assert [features[i] for i in ranking] == [f["name"] for f in native]


@pytest.mark.parametrize("path", PATHS)
def test_fp32_binary_input_and_a_threshold(client: Any, server: dict[str, Any], path: str) -> None:
    X = server["X"][:4]
    labels = client.get_model_metadata("clf")["parameters"]["labels"]
    native = _predict(server, {"model": "clf", "instances": X.astype(np.float32).tolist(), "threshold": 0.05})
    _on(server, path, "clf")
    sets = client.infer("clf", [_input(X, True, "FP32")], parameters={"threshold": 0.05}).as_numpy("labels")
    assert [[lab for lab, on in zip(labels, row) if on] for row in sets] == [
        sorted(p["labels"]) for p in native["predictions"]
    ]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_errors_as_the_client_reports_them(client: Any, server: dict[str, Any], path: str, binary: bool) -> None:
    X = server["X"][:2]
    _on(server, path, "clf")
    with pytest.raises(InferenceServerException) as unknown:
        client.infer("nope", [_input(X, binary)])
    assert str(unknown.value) == "[404] model 'nope' not found"
    with pytest.raises(InferenceServerException) as narrow:
        client.infer("clf", [_input(X[:, :5], binary)])
    assert str(narrow.value) == "[400] input 'input-0' must have shape [n, 6] with n >= 1, not [2, 5]"
    with pytest.raises(InferenceServerException) as missing:
        client.get_model_metadata("nope")
    assert str(missing.value) == "[404] model 'nope' not found"
    assert not client.is_model_ready("nope")


def test_the_documented_sequence_unchanged(server: dict[str, Any]) -> None:
    """The three lines of the client's documentation, nothing set by hand."""
    X = server["X"][:3].astype(np.float64)
    client = triton.InferenceServerClient(url=server["url"].removeprefix("http://"))
    tensor = triton.InferInput("input-0", list(X.shape), "FP64")
    tensor.set_data_from_numpy(X)
    result = client.infer("clf", [tensor])
    client.close()
    assert result.as_numpy("labels").shape == (3, 3) and result.as_numpy("scores").shape == (3, 3)
    assert all(o["parameters"]["binary_data_size"] > 0 for o in result.get_response()["outputs"])
