"""``/datasets`` over HTTP: uploads in every format, de-duplication, listing, deletion, and
every rejection path (4xx naming the problem, nothing stored)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.io

from app.services import datasets as dataset_service
from app.storage.db import Database
from app.storage.orm import Job
from tests.helpers import csv_bytes, make_distribution, make_multilabel, train, upload_csv


def stored_files(settings) -> list[str]:
    return sorted(p.name for p in (settings.model_dir / "datasets").glob("*"))


def test_csv_upload_describes_the_dataset(client):
    X, Y = make_multilabel(n=30, d=4, q=2)
    body = upload_csv(client, X, Y, "small")
    assert body["kind"] == "multilabel"
    assert (body["n_samples"], body["n_features"], body["n_labels"]) == (30, 4, 2)
    assert body["feature_names"] == ["f0", "f1", "f2", "f3"]
    assert body["label_names"] == ["label0", "label1"]
    assert len(body["sha256"]) == 64 and body["id"]


def test_same_upload_twice_returns_the_existing_dataset(client, settings):
    X, Y = make_multilabel(n=20)
    files = {"file": ("a.csv", csv_bytes(X, Y), "text/csv")}
    first = client.post("/datasets", files=files, data={"label_count": "3"})
    second = client.post("/datasets", files=files, data={"label_count": "3"})
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert len(stored_files(settings)) == 1
    # other options make another dataset (the id covers files and options)
    third = client.post("/datasets", files=files, data={"label_count": "2"})
    assert third.status_code == 201 and third.json()["id"] != first.json()["id"]


def test_distribution_kind_is_detected(client):
    X, D = make_distribution(n=25)
    assert upload_csv(client, X, D)["kind"] == "distribution"


def test_arff_with_mulan_xml_and_minus_one_plus_one_mat(client):
    arff = b"""@relation toy
@attribute a numeric
@attribute b numeric
@attribute sad {0,1}
@attribute happy {0,1}
@data
0.1,0.2,1,0
0.3,0.1,0,1
0.5,0.9,1,1
"""
    xml = b"""<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="happy"></label><label name="sad"></label></labels>"""
    r = client.post("/datasets", files={"file": ("toy.arff", arff), "labels_file": ("toy.xml", xml)})
    assert r.status_code == 201, r.text
    assert r.json()["feature_names"] == ["a", "b"]
    assert sorted(r.json()["label_names"]) == ["happy", "sad"]

    buffer = io.BytesIO()
    rng = np.random.default_rng(0)
    scipy.io.savemat(
        buffer,
        {
            "train_data": rng.random((6, 3)),
            "train_target": np.where(rng.random((2, 6)) > 0.5, 1, -1),
            "test_data": rng.random((4, 3)),
            "test_target": np.where(rng.random((2, 4)) > 0.5, 1, -1),
        },
    )
    r = client.post("/datasets", files={"file": ("y.mat", buffer.getvalue())}, data={"part": "test"})
    assert r.status_code == 201, r.text
    assert (r.json()["n_samples"], r.json()["n_features"], r.json()["n_labels"]) == (4, 3, 2)


def test_libsvm_upload(client):
    content = b"0,2 1:0.5 3:1.0\n1 2:0.25\n 1:1 2:1 3:1\n"
    r = client.post("/datasets", files={"file": ("d.svm", content)}, data={"format": "libsvm"})
    assert r.status_code == 201, r.text
    assert r.json()["n_samples"] == 3 and r.json()["n_labels"] == 3


def test_sparse_upload_reports_its_storage_and_trains_densified(client, settings):
    """A sparse file is stored sparse (GET and the 201 say so), and a method that needs dense
    input still trains on it: the dataset loader densifies it."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(60):
        cols = sorted(rng.choice(200, size=4, replace=False) + 1)
        labels = ",".join(str(k) for k in range(3) if (i + k) % 3 == 0 or cols[0] % (k + 2) == 0)
        lines.append(f"{labels} " + " ".join(f"{j}:{1 + (i + j) % 3}" for j in cols))
    r = client.post("/datasets", files={"file": ("s.svm", "\n".join(lines).encode())})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["storage"] == "sparse" and created["density"] == pytest.approx(240 / (60 * 200), rel=0.05)
    path = settings.model_dir / "datasets" / f"{created['sha256']}.npz"
    assert created["stored_bytes"] == path.stat().st_size < 60 * 203 * 8
    shown = client.get(f"/datasets/{created['id']}").json()
    assert {k: shown[k] for k in ("storage", "density", "stored_bytes")} == {
        k: created[k] for k in ("storage", "density", "stored_bytes")
    }
    job = train(client, "br", created["id"], "sparse-br")
    assert job["status"] == "succeeded", job


def test_rejections_name_the_problem_and_store_nothing(client, settings):
    cases = [
        (b"f0,f1,l0\n0.1,0.2,1\n0.3,nan,0\n", {"label_count": "1"}, "row"),
        (b"f0,f1,l0\n0.1,0.2,1\n0.3,0.4\n", {"label_count": "1"}, "line"),
        (b"f0,f1,l0\n0.1,0.2,1\n0.3,0.4,2\n", {"label_count": "1"}, "label"),
        (b"f0,f1,l0\n0.1,0.2,1\n", {"label_count": "1"}, "sample"),
        (b"l0,l1\n1,0\n0,1\n", {"label_count": "2"}, "feature"),
        (b"f0,f1,l0\n0.1,0.2,1\n0.3,0.4,0\n", {"label_columns": "nope"}, "nope"),
    ]
    for content, form, word in cases:
        r = client.post("/datasets", files={"file": ("bad.csv", content)}, data=form)
        assert r.status_code == 422, (content, r.text)
        assert word in r.text.lower(), (word, r.text)
    r = client.post("/datasets", files={"file": ("x.csv", b"f0,l0\n1,0\n0,1\n")}, data={"format": "xml"})
    assert r.status_code == 422
    assert stored_files(settings) == []
    assert client.get("/datasets").json()["items"] == []


def test_upload_larger_than_the_limit_is_413(client, settings):
    big = b"f0,l0\n" + b"0.123456789,1\n" * 120_000  # ~1.7 MB > 1 MB limit of the test settings
    r = client.post("/datasets", files={"file": ("big.csv", big)}, data={"label_count": "1"})
    assert r.status_code == 413
    assert "LABELSERVE_MAX_UPLOAD_MB" in r.json()["detail"]
    assert stored_files(settings) == []


def test_list_get_page_and_delete(client, settings):
    ids = [upload_csv(client, *make_multilabel(n=20, seed=s), f"d{s}")["id"] for s in range(3)]
    first = client.get("/datasets?limit=2").json()
    assert [d["id"] for d in first["items"]] == ids[:2] and first["next_offset"] == 2
    rest = client.get("/datasets?limit=2&offset=2").json()
    assert [d["id"] for d in rest["items"]] == ids[2:] and rest["next_offset"] is None
    assert client.get(f"/datasets/{ids[0]}").json()["name"] == "d0"
    assert client.get("/datasets?limit=0").status_code == 422
    assert client.delete(f"/datasets/{ids[0]}").status_code == 204
    assert client.get(f"/datasets/{ids[0]}").status_code == 404
    assert client.delete(f"/datasets/{ids[0]}").status_code == 404
    assert len(stored_files(settings)) == 2


def test_dataset_in_use_by_a_queued_job_cannot_be_deleted(client, settings, multilabel_dataset):
    with Database(settings.resolved_database_url).session() as session:
        session.add(Job(id="j-queued", kind="train", status="queued", request={}, dataset_id=multilabel_dataset["id"]))
    r = client.delete(f"/datasets/{multilabel_dataset['id']}")
    assert r.status_code == 409 and "j-queued" in r.json()["detail"]
    assert client.get(f"/datasets/{multilabel_dataset['id']}").status_code == 200


def test_dataset_with_registered_versions_needs_force(client, settings, multilabel_dataset, monkeypatch):
    """Deleting the training data of registered versions is refused (409 naming them) unless forced;
    forced, the versions stay readable and servable with the dataset's id and sha256 as lineage."""
    ds = multilabel_dataset["id"]
    for name in ("a", "a", "b"):
        train(client, "mlknn", ds, name, k=3)
    monkeypatch.setattr(dataset_service, "_NAMED_DEPENDENTS", 2)
    r = client.delete(f"/datasets/{ds}")
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert "3 registered model version(s) (a@1, a@2 and 1 more)" in detail and "force=true" in detail
    assert client.get(f"/datasets/{ds}").status_code == 200 and len(stored_files(settings)) == 1
    assert client.delete(f"/datasets/{ds}?force=false").status_code == 409
    assert client.delete(f"/datasets/{ds}?force=true").status_code == 204
    assert client.get(f"/datasets/{ds}").status_code == 404 and stored_files(settings) == []
    version = client.get("/models/b/versions/1")
    assert version.status_code == 200
    assert version.json()["dataset_id"] == ds and version.json()["dataset_sha256"] == multilabel_dataset["sha256"]
    assert client.get("/models/a").json()["latest_version"] == 2
    predicted = client.post("/predict", json={"model": "a@1", "instances": [[0.5] * 6]})
    assert predicted.status_code == 200, predicted.text


def test_dataset_without_versions_is_deleted_without_force(client, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "gone", k=3)
    assert client.delete("/models/gone").status_code == 204  # no version depends on it any more
    assert client.delete(f"/datasets/{multilabel_dataset['id']}").status_code == 204


def test_listings_leave_out_the_names_that_grow_with_the_dataset(client):
    """A listing stays small however wide the datasets are; the names are on the dataset itself."""
    X, Y = make_multilabel(n=20, d=300, q=3)
    dataset = upload_csv(client, X, Y, "wide")
    (item,) = client.get("/datasets").json()["items"]
    assert "feature_names" not in item and "label_names" not in item
    assert item["n_features"] == 300 and item["id"] == dataset["id"]
    full = client.get(f"/datasets/{dataset['id']}").json()
    assert len(full["feature_names"]) == 300 and len(full["label_names"]) == 3


def test_upload_warns_of_a_label_left_among_the_features(client):
    """label_count=1 on a CSV with two 0/1 label columns: the second is stored as a feature, with
    a warning that names it and the count that would have made it a label."""
    X, Y = make_multilabel(n=30, d=3, q=2)
    files = {"file": ("two.csv", csv_bytes(X, Y), "text/csv")}
    r = client.post("/datasets", files=files, data={"label_count": "1"})
    assert r.status_code == 201, r.text
    assert r.json()["feature_names"][-1] == "label0"
    assert any("'label0'" in w and "did you mean label_count=2?" in w for w in r.json()["warnings"])
    right = client.post("/datasets", files=files, data={"label_count": "2"})
    assert not any("label_count" in w for w in right.json()["warnings"])


def test_upload_warns_of_arff_attributes_declared_binary_next_to_the_labels(client):
    arff = b"""@relation toy
@attribute a numeric
@attribute sad {0,1}
@attribute happy {0,1}
@data
0.1,1,0
0.3,0,1
0.5,1,1
0.7,0,0
"""
    r = client.post("/datasets", files={"file": ("toy.arff", arff)}, data={"label_count": "1"})
    assert r.status_code == 201, r.text
    (warning,) = [w for w in r.json()["warnings"] if "label_count" in w]
    assert "'sad'" in warning and "declared {0,1}" in warning and "label_count=2?" in warning


def test_upload_warns_of_a_csv_without_header_row(client):
    X, Y = make_multilabel(n=10, d=3, q=2)
    headerless = b"\n".join(csv_bytes(X, Y).splitlines()[1:]) + b"\n"
    # the first row's two label values are both 0.0 or 1.0 here: duplicate names, told why
    r = client.post("/datasets", files={"file": ("raw.csv", headerless)}, data={"label_count": "2"})
    assert r.status_code == 422 and "no header row?" in r.json()["detail"][0]["msg"]
    Y[0] = [1.0, 0.0]
    headerless = b"\n".join(csv_bytes(X, Y).splitlines()[1:]) + b"\n"
    r = client.post("/datasets", files={"file": ("raw.csv", headerless)}, data={"label_count": "2"})
    assert r.status_code == 201, r.text
    assert r.json()["n_samples"] == 9
    assert any("no header row?" in w for w in r.json()["warnings"])


def test_reupload_under_another_name_says_where_it_is_stored(client):
    X, Y = make_multilabel(n=20)
    first = upload_csv(client, X, Y, "toy")
    again = client.post(
        "/datasets",
        files={"file": ("toy.csv", csv_bytes(X, Y), "text/csv")},
        data={"label_count": str(Y.shape[1]), "name": "toy-2"},
    )
    assert again.status_code == 200 and again.json()["name"] == "toy"
    assert f"already stored as 'toy' (id {first['id']})" in " ".join(again.json()["warnings"])
    # the warning belongs to that answer, not to the dataset
    assert client.get(f"/datasets/{first['id']}").json()["warnings"] == first["warnings"]
    same_name = upload_csv(client, X, Y, "toy")
    assert not any("already stored" in w for w in same_name["warnings"])


def test_split_makes_two_datasets_with_lineage(client):
    X, Y = make_multilabel(n=50, q=3)
    parent = upload_csv(client, X, Y, "toy")
    r = client.post("/datasets/toy/split", json={"test_fraction": 0.2, "random_state": 3})
    assert r.status_code == 201, r.text
    train_part, test_part = r.json()["train"], r.json()["test"]
    assert (train_part["n_samples"], test_part["n_samples"]) == (40, 10)
    assert (train_part["name"], test_part["name"]) == ("toy-train", "toy-test")
    for part, name in ((train_part, "train"), (test_part, "test")):
        assert part["parent_id"] == parent["id"]
        assert part["split"] == {
            "part": name,
            "test_fraction": 0.2,
            "random_state": 3,
            "method": "iterative stratification",
        }
        assert part["feature_names"] == parent["feature_names"] and part["label_names"] == parent["label_names"]
    assert client.get(f"/datasets/{test_part['id']}").json()["parent_id"] == parent["id"]
    # the same split again: the same parts, nothing stored twice; another seed: other parts
    again = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.2, "random_state": 3})
    assert again.status_code == 200 and again.json()["test"]["id"] == test_part["id"]
    other = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.2, "random_state": 4})
    assert other.status_code == 201 and other.json()["test"]["id"] != test_part["id"]
    # the parts are real datasets: train on one, evaluate on the other
    train(client, "br", train_part["id"], "split-br")
    scored = client.post("/evaluate", json={"model": "split-br", "dataset_id": test_part["id"]})
    assert scored.status_code == 200, scored.text


def test_split_rows_partition_the_parent_and_keep_label_frequencies(client, settings):
    from app.storage.store import Store

    X, Y = make_multilabel(n=120, q=3, seed=1)
    parent = upload_csv(client, X, Y, "freq")
    body = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.25, "random_state": 0}).json()
    store = Store(settings.model_dir)
    Xtr, Ytr = store.load_dataset(body["train"]["sha256"])
    Xte, Yte = store.load_dataset(body["test"]["sha256"])
    rows = {tuple(r) for r in X.tolist()}
    assert {tuple(r) for r in Xtr.tolist()} | {tuple(r) for r in Xte.tolist()} == rows
    assert not {tuple(r) for r in Xtr.tolist()} & {tuple(r) for r in Xte.tolist()}
    assert np.abs(Ytr.mean(axis=0) - Yte.mean(axis=0)).max() < 0.05  # stratified: frequencies agree


def test_split_of_distributions_is_shuffled(client):
    X, D = make_distribution(n=30)
    parent = upload_csv(client, X, D, "ldl")
    r = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.3, "test_name": "held-out"})
    assert r.status_code == 201, r.text
    assert r.json()["test"]["name"] == "held-out" and r.json()["test"]["n_samples"] == 9
    assert r.json()["test"]["split"]["method"] == "shuffled" and r.json()["test"]["kind"] == "distribution"


def test_split_refusals(client):
    X, Y = make_multilabel(n=5)
    parent = upload_csv(client, X, Y, "tiny")
    r = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.1})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "test_fraction"]
    assert "each part needs at least 2" in r.json()["detail"][0]["msg"]
    r = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 1.5})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "test_fraction"]
    assert client.post("/datasets/nope/split", json={}).status_code == 404


@pytest.mark.parametrize("bad", ["x\u0000y", "tab\there", "evil\u202egnp.exe", "lrm\u200f", "iso\u2066x"])
def test_split_names_follow_the_upload_name_rules(client, bad):
    """A NUL in a split name had answered 500 on PostgreSQL (stored on SQLite); control and
    direction control characters had been stored, while an upload's name refused them."""
    X, Y = make_multilabel(n=30)
    parent = upload_csv(client, X, Y, "toy")
    for field in ("train_name", "test_name"):
        r = client.post(f"/datasets/{parent['id']}/split", json={field: bad})
        assert r.status_code == 422, r.text
        (item,) = r.json()["detail"]
        assert item["loc"] == ["body", field] and "control character" in item["msg"], item
    r = client.post("/datasets", files={"file": ("t.csv", csv_bytes(X, Y))}, data={"name": bad, "label_count": "3"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "name"]
    assert [d["name"] for d in client.get("/datasets").json()["items"]] == ["toy"]  # nothing stored


def test_a_dataset_name_shaped_like_an_id_is_refused(client):
    """Ids win over names: a dataset named like another's id could never be reached by its name."""
    X, Y = make_multilabel(n=30)
    first = upload_csv(client, X, Y, "first")
    r = client.post(
        "/datasets",
        files={"file": ("t.csv", csv_bytes(X[:20], Y[:20]))},
        data={"name": first["id"], "label_count": "3"},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "name"]
    assert "shape of a dataset id" in r.json()["detail"][0]["msg"]
    r = client.post(f"/datasets/{first['id']}/split", json={"test_name": first["id"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "test_name"]
    assert client.get("/datasets").json()["items"][0]["id"] == first["id"]
    assert len(client.get("/datasets").json()["items"]) == 1
    # a file named like an id gives no name of that shape either
    upload = {"file": (first["id"], csv_bytes(X[:25], Y[:25]))}
    r = client.post("/datasets", files=upload, data={"format": "csv", "label_count": "3"})
    assert r.status_code == 201 and r.json()["name"] == "dataset", r.text


def test_a_repeated_split_with_new_names_says_they_were_not_used(client):
    X, Y = make_multilabel(n=30)
    parent = upload_csv(client, X, Y, "toy")
    first = client.post(f"/datasets/{parent['id']}/split", json={"test_name": "held-out"}).json()
    again = client.post(f"/datasets/{parent['id']}/split", json={"train_name": "fit", "test_name": "other"})
    assert again.status_code == 200
    assert again.json()["test"]["id"] == first["test"]["id"] and again.json()["test"]["name"] == "held-out"
    assert again.json()["train"]["name"] == "toy-train"
    warnings = " ".join(again.json()["test"]["warnings"] + again.json()["train"]["warnings"])
    assert "the name 'other' was not used" in warnings and "the name 'fit' was not used" in warnings
    same = client.post(f"/datasets/{parent['id']}/split", json={"test_name": "held-out"}).json()
    assert not any("not used" in w for w in same["test"]["warnings"] + same["train"]["warnings"])


def test_a_dataset_reference_with_a_nul_is_not_found_on_either_database(client, multilabel_dataset):
    """PostgreSQL cannot compare a string holding NUL (schemathesis: POST /compare answered 500);
    no id or name holds a control character, so such a reference is refused before any query."""
    for method, path, body in (
        ("post", "/compare", {"dataset_id": "x\u00c7\u0000", "cv": 2}),
        ("post", "/train", {"method": "br", "dataset_id": "a\u0000", "model_name": "m"}),
        ("get", "/datasets/a%00b", None),
    ):
        r = client.request(method, path, json=body)
        assert r.status_code == 404, (path, r.text)
        assert "control characters" in r.json()["detail"]


def test_two_default_splits_of_one_dataset_leave_no_two_datasets_with_the_same_name(client):
    """Issue 38: splits of ``flags`` at 0.25 then 0.2 had both made ``flags-train`` and ``flags-test``,
    and ``train mlknn flags-train`` then answered 409 "2 datasets are named"."""
    X, Y = make_multilabel(n=40)
    parent = upload_csv(client, X, Y, "flags")
    first = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.25}).json()
    second = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.2}).json()
    third = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.2, "random_state": 7}).json()
    assert (first["train"]["name"], first["test"]["name"]) == ("flags-train", "flags-test")
    assert (second["train"]["name"], second["test"]["name"]) == ("flags-train-2", "flags-test-2")
    assert (third["train"]["name"], third["test"]["name"]) == ("flags-train-3", "flags-test-3")
    again = client.post(f"/datasets/{parent['id']}/split", json={"test_fraction": 0.2})
    assert again.status_code == 200 and again.json()["train"]["name"] == "flags-train-2"  # the stored part, as before
    assert not any("not used" in w for w in again.json()["train"]["warnings"])
    names = [d["name"] for d in client.get("/datasets?limit=100").json()["items"]]
    assert len(names) == len(set(names)) == 7
    for part in ("flags-train", "flags-train-2", "flags-test-3"):  # each name refers to one dataset
        assert client.get(f"/datasets/{part}").status_code == 200
    # a name taken by an upload is skipped too (the counter goes on past it)
    upload_csv(client, X[:20], Y[:20], "other-train")
    other = upload_csv(client, X[:30], Y[:30], "other")
    split = client.post(f"/datasets/{other['id']}/split", json={}).json()
    assert (split["train"]["name"], split["test"]["name"]) == ("other-train-2", "other-test-2")
