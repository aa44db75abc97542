"""Names where ids are asked, over HTTP on both databases: a dataset's unique name wherever a
dataset id goes, "did you mean" for methods, models and aliases, and 422s in the API's words
(no pydantic prefixes, no union members in ``loc``)."""

from __future__ import annotations

from tests.helpers import csv_bytes, make_multilabel, train, upload_csv


def test_a_unique_dataset_name_is_accepted_where_an_id_is(client):
    X, Y = make_multilabel(n=30)
    stored = upload_csv(client, X, Y, "emotions-train")
    assert client.get("/datasets/emotions-train").json()["id"] == stored["id"]
    job = train(client, "br", "emotions-train", "by-name")
    assert job["dataset_id"] == stored["id"]  # the job and the version keep the id
    version = client.get("/models/by-name/versions/1").json()
    assert version["dataset_id"] == stored["id"]
    r = client.post("/evaluate", json={"model": "by-name", "dataset_id": "emotions-train"})
    assert r.status_code == 200, r.text
    r = client.post("/predict", json={"model": "by-name@1", "dataset_id": "emotions-train"})
    assert r.status_code in (200, 202), r.text


def test_an_ambiguous_dataset_name_is_a_409_listing_the_ids(client):
    X, Y = make_multilabel(n=30)
    first = upload_csv(client, X, Y, "toy")
    second = upload_csv(client, X[:20], Y[:20], "toy")
    r = client.post("/train", json={"method": "br", "dataset_id": "toy", "model_name": "m"})
    assert r.status_code == 409
    assert r.json()["detail"].startswith("dataset_id: 2 datasets are named 'toy'")
    assert first["id"] in r.json()["detail"] and second["id"] in r.json()["detail"]
    assert client.get(f"/datasets/{first['id']}").status_code == 200  # the ids still work


def test_an_unknown_dataset_suggests_the_closest_name(client):
    X, Y = make_multilabel(n=30)
    upload_csv(client, X, Y, "emotions-train")
    r = client.post("/train", json={"method": "br", "dataset_id": "emotion-train", "model_name": "m"})
    assert r.status_code == 404
    assert r.json()["detail"] == (
        "dataset_id: dataset 'emotion-train' not found (no such id or name) (did you mean 'emotions-train'?)"
    )
    assert client.delete("/datasets/no such name").status_code == 404


def test_method_typos_get_a_suggestion_without_pydantic_wording(client):
    X, Y = make_multilabel(n=30)
    stored = upload_csv(client, X, Y)
    for typo in ("mlknnn", "MLkNN"):
        r = client.post("/train", json={"method": typo, "dataset_id": stored["id"], "model_name": "m"})
        assert r.status_code == 422
        (item,) = r.json()["detail"]
        assert item["loc"] == ["body", "method"]
        assert item["msg"].startswith(f"unknown method '{typo}' (did you mean 'mlknn'?); available: ")
    assert "did you mean 'mlknn'?" in client.get("/methods/mlknnn").json()["detail"]
    r = client.post(
        "/train",
        json={"method": "auto", "dataset_id": stored["id"], "model_name": "m", "params": {"candidates": ["brr"]}},
    )
    assert r.status_code == 422 and "unknown method 'brr' (did you mean 'br'?)" in r.text


def test_no_pydantic_prefix_or_union_members_in_422s(client):
    r = client.post("/train", json={"method": "br", "model_name": "m"})
    assert r.status_code == 422
    assert [item["msg"] for item in r.json()["detail"]] == ["give exactly one of dataset_id and data"]
    r = client.post("/predict", json={"model": "m", "instances": "0.1,0.2"})
    assert r.status_code == 422
    assert r.json()["detail"] == [
        {"loc": ["body", "instances"], "msg": "Input should be a valid list", "type": "list_type"}
    ]
    r = client.post("/predict", json={"model": "m", "instances": [[0.1, "x"]]})
    assert [item["loc"] for item in r.json()["detail"]] == [["body", "instances", 0, 1]]
    r = client.post("/predict", json={"model": "m", "instances": [{"f0": "x"}]})
    assert [item["loc"] for item in r.json()["detail"]] == [["body", "instances", 0, "f0"]]
    assert "Value error" not in r.text


def test_unknown_models_aliases_and_versions_say_what_exists(client):
    X, Y = make_multilabel(n=30)
    stored = upload_csv(client, X, Y)
    train(client, "br", stored["id"], "toy-br")
    assert client.put("/models/toy-br/aliases/production", json={"version": 1}).status_code == 200
    instances = X[:1].tolist()
    r = client.post("/predict", json={"model": "toy-bt", "instances": instances})
    assert r.status_code == 404 and "(did you mean 'toy-br'?)" in r.json()["detail"]
    r = client.post("/predict", json={"model": "toy-br@producton", "instances": instances})
    assert r.status_code == 404
    assert "no alias 'producton' (did you mean 'production'?) (its aliases: production)" in r.json()["detail"]
    r = client.post("/predict", json={"model": "toy-br@7", "instances": instances})
    assert r.status_code == 404 and "(its versions: 1)" in r.json()["detail"]
    assert "(did you mean 'toy-br'?)" in client.get("/models/toy-bt").json()["detail"]
    # the alias form answers like the version it names
    by_alias = client.post("/predict", json={"model": "toy-br@production", "instances": instances})
    assert by_alias.status_code == 200 and by_alias.json()["model"]["version"] == 1


def test_upload_name_with_csv_options_round_trip(client):
    """A name with spaces (taken from the file name) is a valid reference in the path too."""
    X, Y = make_multilabel(n=30)
    r = client.post(
        "/datasets", files={"file": ("my data.csv", csv_bytes(X, Y), "text/csv")}, data={"label_count": "3"}
    )
    assert r.status_code == 201
    assert client.get("/datasets/my data.csv").json()["id"] == r.json()["id"]
