"""What the interactive docs offer works: every request example succeeds (the uploads with their
sample files), the answers have the declared shapes, the upload form has no made-up values, and
every request field is described."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app import schemas
from app.api import examples

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def operation_examples(spec: dict, path: str, media_type: str = "application/json") -> dict[str, dict]:
    return spec["paths"][path]["post"]["requestBody"]["content"][media_type]["examples"]


def upload(client: TestClient, name: str, **form: str) -> str:
    files = {"file": (name, (SAMPLES / name).read_bytes())}
    if "labels_file" in form:
        files["labels_file"] = ("shapes.xml", (SAMPLES / form.pop("labels_file")).read_bytes())
    response = client.post("/datasets", files=files, data=form)
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def test_every_example_succeeds_in_order(client: TestClient) -> None:
    assert upload(client, "toy.csv", label_count="2") == examples.TOY
    assert upload(client, "toy-ldl.csv", label_count="3") == examples.TOY_LDL
    assert upload(client, "shapes-train.arff", labels_file="shapes.xml") == examples.SHAPES_TRAIN
    assert upload(client, "shapes-test.arff", labels_file="shapes.xml") == examples.SHAPES_TEST
    spec = client.get("/openapi.json").json()
    for name, example in operation_examples(spec, "/train").items():
        job = client.post("/train?wait=true", json=example["value"]).json()
        assert job.get("status") == "succeeded", (name, job)
    answers: dict[str, list[dict]] = {}
    for path in ("/predict", "/evaluate"):
        for name, example in operation_examples(spec, path).items():
            response = client.post(path, json=example["value"])
            assert response.status_code == 200, (path, name, response.text)
            answers.setdefault(path, []).append(response.json())
    assert {answer["output"] for answer in answers["/predict"]} == {"labels", "ranking", "distribution", "features"}
    item_schemas = {
        "labels": schemas.LabelSetPrediction,
        "ranking": schemas.RankingPrediction,
        "distribution": schemas.DistributionPrediction,
    }
    for answer in answers["/predict"]:  # the answer is built as plain JSON: its declared schema holds
        typed = schemas.PredictResponse.model_validate(answer)
        items = typed.features if answer["output"] == "features" else typed.predictions
        assert items and all(
            isinstance(item, item_schemas.get(answer["output"], schemas.SelectedFeature)) for item in items
        )
        assert typed.model_dump(exclude_unset=True) == answer  # nothing the schema does not name
    evaluated = {answer["model"]["method"] for answer in answers["/evaluate"]}
    assert evaluated == {"mlknn", "ldlkm", "ghc-dr"}  # a classifier, an LDL model and a selector
    for name, example in operation_examples(spec, "/compare").items():
        response = client.post("/compare", json=example["value"])
        assert response.status_code == 202, (name, response.text)
        assert client.get(f"/jobs/{response.json()['job_id']}?wait=60").json()["status"] == "succeeded", name


def test_every_upload_example_succeeds_with_its_sample_files(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/datasets"]["post"]
    uploads = operation_examples(spec, "/datasets", "multipart/form-data")
    assert set(uploads) == set(examples.UPLOAD_SAMPLES) == {"csv", "arff", "libsvm", "mat"}
    for name, example in uploads.items():
        assert f"- {example['summary']}: {example['description']}" in operation["description"], name  # Swagger's form
        files = {
            field: (sample, (SAMPLES / sample).read_bytes()) for field, sample in examples.UPLOAD_SAMPLES[name].items()
        }
        response = client.post("/datasets", files=files, data={k: str(v) for k, v in example["value"].items()})
        assert response.status_code in (200, 201), (name, response.text)
        dataset = response.json()
        assert dataset["n_labels"] > 0 and not dataset["warnings"], (name, dataset)
        assert dataset["id"] in example["description"] or dataset["id"] not in (examples.TOY, examples.SHAPES_TRAIN)
    assert examples.TOY in uploads["csv"]["description"] and examples.SHAPES_TRAIN in uploads["arff"]["description"]


def test_every_route_that_queues_a_job_declares_one_202_answer(client: TestClient) -> None:
    # /train answered {job_id, status, status_url, random_state}, /compare the job record, /predict's
    # batch the job record too: a client needed a different key for the same job id on each
    spec = client.get("/openapi.json").json()
    queued = {path: spec["paths"][path]["post"]["responses"]["202"] for path in ("/train", "/compare", "/predict")}
    for path, answer in queued.items():
        content = answer["content"]["application/json"]
        assert content["schema"] == {"$ref": "#/components/schemas/JobAccepted"}, path
        assert content["example"] == {k: v for k, v in examples.ACCEPTED.items() if v is not None}, (
            path
        )  # nulls left out
    declared = schema_of(spec, {"$ref": "#/components/schemas/JobAccepted"})["properties"]
    assert {"job_id", "status", "status_url", "random_state", "id", "kind", "queue_position"} <= set(declared)
    assert set(examples.ACCEPTED) == set(declared)  # the example shows every field


def schema_of(spec: dict, ref: dict) -> dict:
    return spec["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def test_upload_form_has_no_made_up_values_and_describes_every_field(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    form = schema_of(spec, body)
    for name, field in form["properties"].items():
        assert field.get("description"), name
        if name not in form.get("required", []) and "default" not in field:
            # Swagger UI would otherwise pre-fill a sample ("string", 1) that the server then parses
            assert field.get("examples") == [""], name


def test_every_request_field_is_described(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for model in ("TrainRequest", "InlineData", "FeatureSelection", "PredictRequest", "EvaluateRequest", "AliasIn"):
        for name, field in schemas[model]["properties"].items():
            assert field.get("description"), f"{model}.{name}"
    for path in ("/train", "/predict", "/evaluate"):
        assert "threadpool" not in spec["paths"][path]["post"].get("description", "")
