"""One error body everywhere: 422 in FastAPI's list shape, whoever found the problem; every other
4xx a message string; and the OpenAPI document declares the statuses each route answers."""

from __future__ import annotations

from tests.helpers import make_multilabel, train


def items(response) -> list[dict]:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    for item in detail:
        assert set(item) == {"loc", "msg", "type"}, item
    return detail


def test_rule_errors_and_schema_errors_share_the_422_shape(client, multilabel_dataset, distribution_dataset):
    ml, ldl = multilabel_dataset["id"], distribution_dataset["id"]
    # schema validation (FastAPI), a query bound, a path pattern
    assert items(client.post("/train", json={"method": "mlknn", "model_name": "m"}))[0]["loc"] == ["body"]
    assert items(client.get("/datasets?limit=1001"))[0]["loc"] == ["query", "limit"]
    assert items(client.put("/models/m/aliases/7", json={"version": 1}))[0]["loc"] == ["path", "alias"]
    # a pydantic model the service validates: every error, located under body.params
    bad_params = {"method": "mlknn", "dataset_id": ml, "model_name": "m", "params": {"k": 0, "kk": 1}}
    locs = [item["loc"] for item in items(client.post("/train", json=bad_params))]
    assert ["body", "params", "k"] in locs and ["body", "params", "kk"] in locs
    # a rule of the service: the dataset's kind does not fit the method
    wrong_kind = {"method": "mlknn", "dataset_id": ldl, "model_name": "m"}
    [item] = items(client.post("/train", json=wrong_kind))
    assert item["loc"] == ["body", "dataset_id"] and "multilabel" in item["msg"] and item["type"] == "value_error"
    # an upload that does not parse, located at the file
    r = client.post("/datasets", files={"file": ("x.csv", b"")})
    assert items(r)[0]["loc"] == ["body", "file"]


def test_instance_errors_say_which_instance(client, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "clf", k=3)
    X, _ = make_multilabel()
    r = client.post("/predict", json={"model": "clf", "instances": [X[0].tolist(), X[1, :2].tolist()]})
    [item] = items(r)
    assert item["loc"] == ["body", "instances", 1] and "expected 6 features, received 2" in item["msg"]


def test_other_errors_are_a_message(client, multilabel_dataset):
    r = client.post("/train", json={"method": "mlknn", "dataset_id": "nope", "model_name": "m"})
    assert r.status_code == 404 and r.json() == {"detail": "dataset_id: dataset 'nope' not found"}
    r = client.get("/models/nope/versions/3")
    assert r.status_code == 404 and r.json() == {"detail": "model 'nope' has no version 3"}
    r = client.delete("/jobs/nope")
    assert r.status_code == 404 and isinstance(r.json()["detail"], str)


def test_method_not_allowed_lists_every_method_of_the_path(client):
    r = client.post("/models/m")
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "DELETE"}


def test_openapi_declares_statuses_and_constraints(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    assert {"400", "404", "413", "422", "202"} <= set(paths["/predict"]["post"]["responses"])
    assert {"404", "409"} <= set(paths["/datasets/{dataset_id}"]["delete"]["responses"])
    error = paths["/models/{name}"]["get"]["responses"]["404"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorBody"}
    limit = next(p for p in paths["/models"]["get"]["parameters"] if p["name"] == "limit")["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    offset = next(p for p in paths["/jobs"]["get"]["parameters"] if p["name"] == "offset")["schema"]
    assert offset["minimum"] == 0
    alias = next(p for p in paths["/models/{name}/aliases/{alias}"]["put"]["parameters"] if p["name"] == "alias")
    assert alias["schema"]["pattern"] and alias["schema"]["maxLength"] == 64
    method = doc["components"]["schemas"]["TrainRequest"]["properties"]["method"]
    assert set(method["enum"]) >= {"mlknn", "dmknn", "ldlkm", "elcfs", "ghc-dr", "trans-ovk"}
    # no API key configured: no security scheme declared (and none enforced)
    assert "securitySchemes" not in doc.get("components", {})
