"""``GET /models/{name}/versions/{v}/artifact`` over HTTP on both databases: the zip of the
stored artifact and its manifest, refused when the artifact is missing or corrupt."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import zipfile

import numpy as np

from app.storage.store import Store
from tests.helpers import make_multilabel, train, upload_csv


def test_the_artifact_downloads_with_its_manifest(client):
    X, Y = make_multilabel(n=40)
    dataset = upload_csv(client, X, Y, "toy")
    train(client, "br", dataset["id"], "toy-br")
    record = client.get("/models/toy-br/versions/1").json()
    r = client.get("/models/toy-br/versions/1/artifact")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/zip"
    assert 'filename="toy-br-1.zip"' in r.headers["content-disposition"]
    assert r.headers["x-artifact-sha256"] == record["artifact_sha256"]
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        assert sorted(archive.namelist()) == ["manifest.json", "model.pkl"]
        pickled = archive.read("model.pkl")
        manifest = json.loads(archive.read("manifest.json"))
    assert hashlib.sha256(pickled).hexdigest() == record["artifact_sha256"] == manifest["artifact_sha256"]
    assert manifest["library_versions"] == record["library_versions"]
    for key in ("name", "version", "method", "params", "feature_names", "label_names", "dataset_sha256"):
        assert manifest[key] == record[key]
    # the file is the model: it predicts as the service does
    model = pickle.loads(pickled)
    served = client.post("/predict", json={"model": "toy-br@1", "instances": X[:3].tolist()}).json()
    labels = [sorted(p["labels"]) for p in served["predictions"]]
    mine = [sorted(np.asarray(record["label_names"])[row.astype(bool)].tolist()) for row in model.predict(X[:3])]
    assert labels == mine


def test_missing_versions_and_broken_artifacts_are_refused(client, settings):
    X, Y = make_multilabel(n=40)
    dataset = upload_csv(client, X, Y, "toy")
    train(client, "br", dataset["id"], "toy-br")
    assert client.get("/models/toy-br/versions/2/artifact").status_code == 404
    assert client.get("/models/nope/versions/1/artifact").status_code == 404
    sha256 = client.get("/models/toy-br/versions/1").json()["artifact_sha256"]
    path = Store(settings.model_dir).stored_artifact(sha256)
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    r = client.get("/models/toy-br/versions/1/artifact")
    assert r.status_code == 409 and "corrupt" in r.json()["detail"]
    path.unlink()
    r = client.get("/models/toy-br/versions/1/artifact")
    assert r.status_code == 409 and "missing" in r.json()["detail"]
