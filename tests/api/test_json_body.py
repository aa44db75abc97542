"""JSON bodies are decoded by orjson (``app.api.json_body``); what only the standard library
reads keeps the answers it had."""

from __future__ import annotations

import json

import pytest
import starlette.requests
from fastapi.testclient import TestClient

from tests.helpers import make_multilabel

JSON = {"content-type": "application/json"}


def _inline(n: int = 30) -> dict:
    X, Y = make_multilabel(n=n)
    return {"method": "mlknn", "model_name": "inline", "params": {"k": 3}, "data": {"X": X.tolist(), "Y": Y.tolist()}}


def test_the_json_routes_decode_with_orjson(client: TestClient, monkeypatch: pytest.MonkeyPatch):
    async def standard_library(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded by Starlette's Request.json")

    monkeypatch.setattr(starlette.requests.Request, "json", standard_library)
    trained = client.post("/train?wait=true", json=_inline())
    assert trained.status_code == 200 and trained.json()["status"] == "succeeded", trained.text
    again = client.post("/train?wait=true", json=_inline())  # the same data: the same dataset
    assert again.json()["dataset_id"] == trained.json()["dataset_id"]


def test_what_orjson_refuses_is_answered_as_before(client: TestClient):
    body = json.dumps(_inline())
    with_nan = _inline()
    with_nan["data"]["X"][1][2] = float("nan")  # json.dumps writes the NaN literal
    nan = client.post("/train?wait=true", content=json.dumps(with_nan), headers=JSON)
    assert nan.status_code == 422 and "finite" in nan.text and nan.json()["detail"][0]["loc"][:2] == ["body", "data"]
    huge = client.post("/train", content=body.replace('"k": 3', '"k": 123456789012345678901234567890'), headers=JSON)
    assert huge.status_code == 422 and "params" in huge.text  # read (as the standard library does), then refused
    broken = client.post("/train", content=body[:-1], headers=JSON)
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"
