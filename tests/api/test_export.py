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
from tests.helpers import ThreadUse, make_multilabel, train, upload_csv


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


def test_an_export_streams_without_a_copy_in_threads_of_its_own(client, settings, monkeypatch):
    """Every export had copied its artifact to TMPDIR (40 slow downloads held 195 MB) in the shared
    thread pool (GET /models took 6 s). Now the zip is streamed from the stored file, read in at
    most EXPORT_THREADS threads of the exports' own."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from app.api.routes.models import EXPORT_THREADS
    from app.services import export

    X, Y = make_multilabel(n=40)
    dataset = upload_csv(client, X, Y, "toy")
    train(client, "br", dataset["id"], "toy-br")
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/labelserve-tmp")  # no room in TMPDIR at all
    r = client.get("/models/toy-br/versions/1/artifact")
    assert r.status_code == 200, r.text
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        assert archive.testzip() is None and sorted(archive.namelist()) == ["manifest.json", "model.pkl"]
        assert hashlib.sha256(archive.read("model.pkl")).hexdigest() == r.headers["x-artifact-sha256"]

    slow = ThreadUse(export.export_version)
    monkeypatch.setattr(export, "export_version", slow)
    with ThreadPoolExecutor(10) as pool:
        statuses = list(pool.map(lambda _: client.get("/models/toy-br/versions/1/artifact").status_code, range(10)))
    assert statuses == [200] * 10
    assert slow.most == EXPORT_THREADS and max(slow.shared) == 0, (slow.most, slow.shared)


def test_an_artifact_that_changes_while_it_is_sent_aborts_the_download(client, settings, monkeypatch):
    import pytest

    from app.services import export

    X, Y = make_multilabel(n=40)
    dataset = upload_csv(client, X, Y, "toy")
    train(client, "br", dataset["id"], "toy-br")
    sha256 = client.get("/models/toy-br/versions/1").json()["artifact_sha256"]
    path = Store(settings.model_dir).stored_artifact(sha256)
    original = path.read_bytes()

    def checked_then_corrupted(source):  # the check passes, then the file changes under the download
        digest = hashlib.sha256(original).hexdigest()
        path.write_bytes(original[:-1] + b"\x00")
        return digest

    monkeypatch.setattr(export, "_hashed", checked_then_corrupted)
    with pytest.raises(RuntimeError, match="changed while it was being sent"):
        client.get("/models/toy-br/versions/1/artifact")
