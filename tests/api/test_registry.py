"""``/models`` over HTTP: versions, aliases, references and deletion."""

from __future__ import annotations

from tests.helpers import make_multilabel, train


def test_versions_aliases_and_references(client, multilabel_dataset):
    for k in (3, 5):
        train(client, "mlknn", multilabel_dataset["id"], "m", k=k)
    model = client.get("/models/m").json()
    assert model["latest_version"] == 2 and [v["version"] for v in model["versions"]] == [1, 2]
    assert client.put("/models/m/aliases/prod", json={"version": 1}).json()["aliases"] == {"prod": 1}
    X, _ = make_multilabel()
    for ref, version in (("m", 2), ("m@1", 1), ("m@prod", 1)):
        r = client.post("/predict", json={"model": ref, "instances": X[:1].tolist()})
        assert r.json()["model"]["version"] == version
    assert client.put("/models/m/aliases/prod", json={"version": 9}).status_code == 404
    assert client.put("/models/m/aliases/7", json={"version": 1}).status_code == 422
    assert client.put("/models/m/aliases/prod", json={"version": 0}).status_code == 422
    assert client.delete("/models/m/aliases/prod").status_code == 204
    assert client.delete("/models/m/aliases/prod").status_code == 404
    listing = client.get("/models").json()
    assert [m["name"] for m in listing["items"]] == ["m"] and listing["next_offset"] is None


def test_deleting_versions_and_models(client, settings, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "m", k=3)
    train(client, "mlknn", multilabel_dataset["id"], "m", k=4)
    client.put("/models/m/aliases/prod", json={"version": 2})
    assert client.delete("/models/m/versions/2").status_code == 204
    model = client.get("/models/m").json()
    assert model["latest_version"] == 1 and model["aliases"] == {}
    assert client.get("/models/m/versions/2").status_code == 404
    assert len(list((settings.model_dir / "artifacts").glob("*.pkl"))) == 1
    assert client.delete("/models/m").status_code == 204
    assert client.get("/models/m").status_code == 404
    assert list((settings.model_dir / "artifacts").glob("*.pkl")) == []
    assert client.delete("/models/m").status_code == 404
    # a dataset's (forced) deletion keeps the lineage of models trained on it
    train(client, "mlknn", multilabel_dataset["id"], "n", k=3)
    assert client.delete(f"/datasets/{multilabel_dataset['id']}?force=true").status_code == 204
    assert client.get("/models/n/versions/1").json()["dataset_sha256"] == multilabel_dataset["sha256"]


def test_out_of_range_integers_are_422_not_500(client, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "m", k=3)
    huge = 12603205630790563840  # found by schemathesis: overflowed SQLite's INTEGER
    assert client.get(f"/models/m/versions/{huge}").status_code == 422
    assert client.delete(f"/models/m/versions/{huge}").status_code == 422
    assert client.put("/models/m/aliases/prod", json={"version": huge}).status_code == 422
    assert client.get(f"/models?offset={huge}").status_code == 422
    X, _ = make_multilabel()
    r = client.post("/predict", json={"model": f"m@{huge}", "instances": X[:1].tolist()})
    assert r.status_code == 422 and "version must be between" in r.text


def test_evaluations_are_stored_beside_the_immutable_version(client, multilabel_dataset):
    train(client, "mlknn", multilabel_dataset["id"], "m", k=3)
    before = client.get("/models/m/versions/1").json()
    assert before["metrics"] is None and before["evaluations"] == []
    body = {"model": "m", "dataset_id": multilabel_dataset["id"]}
    first = client.post("/evaluate", json=body).json()
    second = client.post("/evaluate", json=body | {"threshold": 0.9}).json()
    after = client.get("/models/m/versions/1").json()
    # the record is the same version: only the evaluations beside it grew
    unchanged = {k: v for k, v in after.items() if k not in ("metrics", "evaluations")}
    assert unchanged == {k: v for k, v in before.items() if k not in ("metrics", "evaluations")}
    assert [e["options"]["threshold"] for e in after["evaluations"]] == [None, 0.9]
    assert after["evaluations"][0]["metrics"] == first["metrics"]
    assert after["metrics"] == {multilabel_dataset["id"]: second["metrics"]}  # the latest per dataset
    assert after["evaluations"][0]["n_samples"] == multilabel_dataset["n_samples"]
    assert client.delete("/models/m/versions/1").status_code == 204  # its evaluations go with it
    train(client, "mlknn", multilabel_dataset["id"], "m", k=3)
    assert client.get("/models/m").json()["versions"][0]["evaluations"] == []


def test_a_model_page_is_read_once_per_registry_change(client, multilabel_dataset, monkeypatch):
    """Under a flood of other requests each hop to the thread pool waits a turn of the busy event
    loop (issue 24: ``GET /models/{name}`` behind 100 connections predicting an unknown model):
    a page, found or not, is read in one hop (not four: session in, handler, response, session
    out), then answered from memory on the loop until the registry changes; every change the
    page shows (an alias, an evaluation, a version, another process's change) reads it again."""
    import anyio.to_thread

    train(client, "mlknn", multilabel_dataset["id"], "m", k=3)
    hops: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func, *args, **kwargs):
        hops.append(func)
        return await run_sync(func, *args, **kwargs)

    def page(name: str, status: int, expected_hops: int) -> dict:
        hops.clear()
        response = client.get(f"/models/{name}")
        assert response.status_code == status and len(hops) == expected_hops, (name, hops)
        assert response.headers["content-type"] == "application/json"
        return response.json()

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    first = page("m", 200, 1)
    assert page("m", 200, 0) == first and first["latest_version"] == 1
    monkeypatch.undo()
    assert first["versions"] == [client.get("/models/m/versions/1").json()]  # as FastAPI encodes a version
    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    assert page("mm", 404, 1) == {"detail": "model 'mm' not found (did you mean 'm'?)"}
    assert page("mm", 404, 0) == {"detail": "model 'mm' not found (did you mean 'm'?)"}
    monkeypatch.undo()
    client.put("/models/m/aliases/prod", json={"version": 1})
    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    assert page("m", 200, 1)["aliases"] == {"prod": 1}
    monkeypatch.undo()
    client.post("/evaluate", json={"model": "m", "dataset_id": multilabel_dataset["id"]})
    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    evaluated = page("m", 200, 1)
    assert [len(v["evaluations"]) for v in evaluated["versions"]] == [1]
    assert evaluated["versions"][0]["metrics"] is not None
    client.app.state.core.store.registry_changed()  # what another process's change does
    assert page("m", 200, 1) == evaluated
    monkeypatch.undo()
    train(client, "mlknn", multilabel_dataset["id"], "mm", k=3)
    assert client.get("/models/mm").json()["latest_version"] == 1
