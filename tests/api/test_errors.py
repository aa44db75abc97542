"""One error body everywhere: 422 in FastAPI's list shape, whoever found the problem; every other
4xx a message string; and the OpenAPI document declares the statuses each route answers."""

from __future__ import annotations

from app.storage.db import Database
from app.storage.orm import Job
from tests.helpers import csv_bytes, make_multilabel, train


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
    assert r.status_code == 404 and r.json() == {"detail": "dataset_id: dataset 'nope' not found (no such id or name)"}
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


def test_the_statuses_routes_answer_are_declared(settings):
    """schemathesis found answers the document did not declare: a dataset name several datasets
    have is a 409 on GET /datasets/{id} and POST /compare, a full queue a 429, a report's dataset
    without the model's features a 422."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.helpers import upload_csv

    with TestClient(create_app(settings.model_copy(update={"max_queued_jobs_per_key": 1}))) as client:
        paths = client.get("/openapi.json").json()["paths"]
        X, Y = make_multilabel(n=30)
        upload_csv(client, X, Y, "twin")
        other = upload_csv(client, X[:20], Y[:20], "twin")
        train(client, "br", other["id"], "m")
        narrow = upload_csv(client, X[:, :2], Y, "narrow")
        seen = [
            ("/datasets/{dataset_id}", "get", client.get("/datasets/twin")),
            ("/compare", "post", client.post("/compare", json={"dataset_id": "twin"})),
            (
                "/models/{name}/versions/{version}/report",
                "get",
                client.get(f"/models/m/versions/1/report?dataset_id={narrow['id']}"),
            ),
        ]
        with Database(
            settings.resolved_database_url
        ).session() as session:  # a job queued by this client (no keys: the share is per address): the most allowed
            session.add(
                Job(
                    id="j-queued",
                    kind="train",
                    status="queued",
                    request={},
                    dataset_id=other["id"],
                    submitted_from="testclient",
                )
            )
        seen.append(("/compare", "post", client.post("/compare", json={"dataset_id": other["id"]})))
    assert [r.status_code for _, _, r in seen] == [409, 409, 422, 429], [r.text for _, _, r in seen]
    for path, method, answer in seen:
        assert str(answer.status_code) in paths[path][method]["responses"], (path, method, answer.status_code)


# errors that name the valid choices ---------------------------------------------------------
def test_unknown_param_lists_the_methods_params(client, multilabel_dataset):
    body = {"method": "mlknn", "dataset_id": multilabel_dataset["id"], "model_name": "m", "params": {"kk": 3}}
    [item] = items(client.post("/train", json=body))
    assert item["loc"] == ["body", "params", "kk"] and item["type"] == "extra_forbidden"
    assert "unknown parameter 'kk' for method 'mlknn' (did you mean 'k'?)" in item["msg"]
    assert "its parameters: k, s" in item["msg"], item["msg"]
    auto = {"method": "auto", "dataset_id": multilabel_dataset["id"], "model_name": "m", "params": {"zzz": 1}}
    [item] = items(client.post("/train", json=auto))
    assert "for method 'auto'; its parameters: candidates, metric, cv, tune" in item["msg"], item["msg"]


def test_predicting_a_model_whose_first_training_is_queued_says_so(client, settings, multilabel_dataset):
    with Database(settings.resolved_database_url).session() as session:
        session.add(
            Job(id="j-first", kind="train", status="queued", request={}, model_name="soon", dataset_id="x" * 16)
        )
    for path, body in [
        ("/predict", {"model": "soon", "instances": [[0.5] * 6]}),
        ("/predict", {"model": "soon@1", "instances": [[0.5] * 6]}),
        ("/evaluate", {"model": "soon", "dataset_id": multilabel_dataset["id"]}),
    ]:
        r = client.post(path, json=body)
        assert r.status_code == 409, r.text
        assert r.json()["detail"] == (
            "model: model 'soon' is still training (job j-first, status queued); "
            "it can be used once the job has succeeded (GET /jobs/j-first)"
        )
    # another name, or a job of another kind for it, is the plain 404
    assert client.post("/predict", json={"model": "never", "instances": [[0.5] * 6]}).status_code == 404
    with Database(settings.resolved_database_url).session() as session:
        session.get_one(Job, "j-first").status = "failed"
    r = client.post("/predict", json={"model": "soon", "instances": [[0.5] * 6]})
    assert r.status_code == 404 and r.json()["detail"] == "model: model 'soon' not found"


def test_contradictory_upload_options_name_both_fields(client):
    X, Y = make_multilabel(n=20, d=4, q=2)
    data = csv_bytes(X, Y)

    def upload(fields: dict, name: str = "d.csv", content: bytes = data, **files) -> list[dict]:
        return items(client.post("/datasets", files={"file": (name, content), **files}, data=fields))

    both = upload({"label_count": "2", "label_columns": "label0,label1"})
    assert [i["loc"] for i in both] == [["body", "label_count"], ["body", "label_columns"]]
    assert all("label_count and label_columns" in i["msg"] for i in both)
    arff = b"@relation r\n@attribute a numeric\n@attribute y {0,1}\n@data\n0.1,1\n0.2,0\n"
    xml = b'<labels xmlns="http://mulan.sourceforge.net/labels"><label name="y"></label></labels>'
    clash = upload({"label_count": "1"}, "d.arff", arff, labels_file=("l.xml", xml))
    assert [i["loc"] for i in clash] == [["body", "labels_file"], ["body", "label_count"]]
    [ignored] = upload({"label_count": "2", "n_features": "4"})
    assert ignored["loc"] == ["body", "n_features"] and "LIBSVM" in ignored["msg"] and "CSV" in ignored["msg"]
    assert [i["loc"] for i in upload({"label_count": "2", "part": "test", "format": "csv"})] == [
        ["body", "part"],
        ["body", "format"],
    ]
    located = upload({"label_columns": "label0", "label_location": "start"})
    assert [i["loc"] for i in located] == [["body", "label_location"], ["body", "label_count"]]
    # the defaults a form sends unasked are no contradiction
    r = client.post(
        "/datasets",
        files={"file": ("d.csv", data)},
        data={"label_columns": "label0,label1", "label_location": "end", "part": "train", "format": "auto"},
    )
    assert r.status_code == 201, r.text


def test_a_file_of_no_dataset_format_is_told_the_accepted_formats(client):
    X, Y = make_multilabel(n=20, d=4, q=2)
    for name, content, looks in [
        ("rows.json", b'{"X": [[1, 2]], "Y": [[0, 1]]}', "looks like JSON"),
        ("notes.txt", b"Some prose, with a comma.\nAnd a second line of it.\n", "'.txt' is not a dataset extension"),
        ("README", b"plain words\nno numbers here\n", "no extension"),
    ]:
        [item] = items(client.post("/datasets", files={"file": (name, content)}, data={"label_count": "1"}))
        assert item["loc"] == ["body", "file"] and "not recognised" in item["msg"] and looks in item["msg"]
        assert "Accepted formats: ARFF (.arff), CSV" in item["msg"] and "(read as CSV, it fails:" in item["msg"]
    # a CSV named as one keeps the CSV parser's own message; an unnamed CSV still parses
    [item] = items(client.post("/datasets", files={"file": ("x.csv", b"a,b\n1,x\n")}, data={"label_count": "1"}))
    assert "Accepted formats" not in item["msg"] and "is not a number" in item["msg"]
    r = client.post("/datasets", files={"file": ("export", csv_bytes(X, Y))}, data={"label_count": "2"})
    assert r.status_code == 201, r.text
