"""Keys with roles (``LABELSERVE_API_KEYS_FILE``, ``app.api.access``): what each role may call, on
the routes and the prediction fast path, revocation without a restart, and the key names recorded
on jobs, versions and the audit of alias moves and deletes; over HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from starlette.routing import BaseRoute, Route

from app.api.access import ROUTE_ROLES
from app.api.routes import predict as predict_route
from app.api.v2 import routes as v2_route
from app.config import Settings
from app.main import create_app
from app.services.keys import Role, add_key, remove_key
from app.storage.db import Database
from app.storage.orm import AuditEvent
from tests.helpers import long_job, make_multilabel, train, upload_csv, wait_status

#: one key of each role, named after it
NAMES = {role: f"{role.value}-key" for role in Role}


@pytest.fixture
def keys_file(tmp_path: Path) -> tuple[Path, dict[Role, str]]:
    path = tmp_path / "keys.jsonl"
    return path, {role: add_key(path, NAMES[role], role) for role in Role}


@pytest.fixture
def keyed(settings: Settings, keys_file: tuple[Path, dict[Role, str]]) -> Iterator[TestClient]:
    # the dashboard's forms are posted from its own pages (their Origin)
    app = create_app(settings.model_copy(update={"api_keys_file": keys_file[0]}))
    with TestClient(app, headers={"Origin": "http://testserver"}) as client:
        yield client


def _as(key: str) -> dict[str, str]:
    return {"X-API-Key": key}


def _route_is_off(*args: object) -> None:
    raise AssertionError("the route was called")


def _audit(settings: Settings) -> list[tuple[str, str, str | None]]:
    with Database(settings.resolved_database_url).reading() as session:
        rows = session.scalars(select(AuditEvent).order_by(AuditEvent.id)).all()
        return [(row.action, row.target, row.key_name) for row in rows]


def _flat(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The app's routes, its included routers' too (FastAPI 0.16x keeps an included router whole)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from _flat(included.routes) if included is not None else (route,)


def test_every_guarded_route_has_its_role_in_the_one_table(tmp_path: Path):
    """A route the table leaves out needs admin; this names it, so that the table says it."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store", api_key="k")
    api = create_app(settings)
    gate = api.state.gate
    routes = {
        (method, route.path)
        for route in _flat(api.routes)
        if isinstance(route, Route) and not gate.is_open(route.path)
        for method in route.methods or ()
    }
    assert routes == set(ROUTE_ROLES)
    for (method, template), role in ROUTE_ROLES.items():  # the gate finds each route as the router does
        assert gate.roles.needed(method, re.sub(r"{\w+}", "x", template)) is role, (method, template)


def test_each_role_may_call_what_the_table_says_and_the_records_name_the_key(
    keyed: TestClient, settings: Settings, keys_file: tuple[Path, dict[Role, str]], monkeypatch: pytest.MonkeyPatch
):
    _, keys = keys_file
    read, predict, trainer, admin = (_as(keys[role]) for role in Role)
    keyed.headers.update(trainer)
    X, Y = make_multilabel()
    dataset = upload_csv(keyed, X, Y, "ml")
    job = train(keyed, "mlknn", dataset["id"], "m", k=3)
    assert job["submitted_by"] == "train-key"
    assert keyed.get(f"/jobs/{job['id']}", headers=read).json()["submitted_by"] == "train-key"
    version = keyed.get("/models/m/versions/1", headers=read).json()
    assert version["created_by"] == "train-key"

    del keyed.headers["X-API-Key"]
    instances = {"model": "m", "instances": X[:2].tolist()}
    v2_body = {
        "inputs": [{"name": "input-0", "shape": [2, X.shape[1]], "datatype": "FP64", "data": X[:2].ravel().tolist()}]
    }
    r = keyed.post("/train", headers=predict, json={"method": "mlknn", "dataset_id": dataset["id"], "model_name": "x"})
    assert r.status_code == 403 and r.json() == {
        "detail": "this key (name 'predict-key', role 'predict') may not POST /train: it needs the 'train' role"
    }
    assert keyed.delete("/models/m", headers=predict).status_code == 403
    exported = keyed.get("/models/m/versions/1/artifact", headers=predict)
    assert exported.status_code == 403 and "it needs the 'admin' role" in exported.json()["detail"]
    assert keyed.put("/models/m/aliases/prod", headers=predict, json={"version": 1}).status_code == 403
    assert keyed.post("/evaluate", headers=predict, json={"model": "m", "dataset_id": dataset["id"]}).status_code == 403
    routed = keyed.post("/predict", headers=predict, json=instances)  # resolves the reference (the route)
    assert routed.status_code == 200, routed.text
    assert keyed.post("/v2/models/m/infer", headers=predict, json=v2_body).status_code == 200
    # resolved: the fast path answers the predict key, and refuses the read key as the gate does
    monkeypatch.setattr(predict_route, "_predict", _route_is_off)
    monkeypatch.setattr(v2_route, "_infer", _route_is_off)
    assert keyed.post("/predict", headers=predict, json=instances).json() == routed.json()
    assert keyed.post("/v2/models/m/infer", headers=predict, json=v2_body).status_code == 200
    refused = keyed.post("/predict", headers=read, json=instances)
    assert refused.status_code == 403 and refused.json() == {
        "detail": "this key (name 'read-key', role 'read') may not POST /predict: it needs the 'predict' role"
    }
    assert keyed.post("/v2/models/m/infer", headers=read, json=v2_body).status_code == 403
    monkeypatch.undo()
    assert keyed.get("/models/m", headers=read).status_code == 200
    assert keyed.get("/v2/models/m", headers=read).status_code == 200

    assert keyed.put("/models/m/aliases/prod", headers=trainer, json={"version": 1}).status_code == 200
    assert keyed.delete("/models/m/aliases/prod", headers=trainer).status_code == 403
    assert keyed.delete("/models/m/aliases/prod", headers=admin).status_code == 204
    assert keyed.get("/models/m/versions/1/artifact", headers=admin).status_code == 200
    assert keyed.delete(f"/datasets/{dataset['id']}", headers=trainer).status_code == 403
    assert keyed.delete(f"/datasets/{dataset['id']}?force=true", headers=admin).status_code == 204
    assert keyed.delete("/models/m", headers=admin).status_code == 204
    assert _audit(settings) == [
        ("alias.set", "m@prod", "train-key"),
        ("alias.delete", "m@prod", "admin-key"),
        ("dataset.delete", dataset["id"], "admin-key"),
        ("model.delete", "m", "admin-key"),
    ]
    # the same events through GET /audit, newest first, for admin keys only
    listed = keyed.get("/audit", headers=admin).json()
    assert [(e["action"], e["target"], e["key_name"]) for e in listed["items"]] == _audit(settings)[::-1]
    assert listed["items"][-1]["detail"] == {"version": 1, "previous": None} and listed["next_offset"] is None
    mine = keyed.get("/audit", headers=admin, params={"key_name": "train-key", "limit": 1}).json()
    assert [e["action"] for e in mine["items"]] == ["alias.set"] and mine["next_offset"] is None
    deletes = keyed.get("/audit", headers=admin, params={"action": "model.delete"}).json()["items"]
    assert [(e["target"], e["detail"]) for e in deletes] == [("m", {"versions": [1]})]
    assert keyed.get("/audit", headers=admin, params={"action": "drop"}).status_code == 422
    refused = keyed.get("/audit", headers=trainer)
    assert refused.status_code == 403 and "it needs the 'admin' role" in refused.json()["detail"]


def test_a_revoked_key_is_refused_401_without_a_restart(keyed: TestClient, keys_file: tuple[Path, dict[Role, str]]):
    path, keys = keys_file
    assert keyed.get("/models", headers=_as(keys[Role.PREDICT])).status_code == 200
    assert remove_key(path, NAMES[Role.PREDICT])
    deadline = time.monotonic() + 5  # the file is looked at once a second at most
    while (r := keyed.get("/models", headers=_as(keys[Role.PREDICT]))).status_code == 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert r.status_code == 401 and r.json() == {"detail": "invalid API key (unknown or revoked)"}
    assert r.headers["www-authenticate"] == "Bearer"
    assert keyed.post("/predict", headers=_as(keys[Role.PREDICT]), json={"model": "m"}).status_code == 401
    assert keyed.get("/models", headers=_as(keys[Role.READ])).status_code == 200  # the others stay
    added = add_key(path, "late", Role.READ)
    deadline = time.monotonic() + 5
    while keyed.get("/models", headers=_as(added)).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_only_admin_cancels_another_keys_job(keyed: TestClient, keys_file: tuple[Path, dict[Role, str]]):
    _, keys = keys_file
    keyed.headers.update(_as(keys[Role.TRAIN]))
    X, Y = make_multilabel(n=30)
    job_id = long_job(keyed, upload_csv(keyed, X, Y)["id"], "endless")
    r = keyed.delete(f"/jobs/{job_id}", headers=_as(keys[Role.PREDICT]))
    assert r.status_code == 403, r.text
    assert r.json()["detail"] == (
        f"job '{job_id}' was queued by key 'train-key': this key (name 'predict-key', role 'predict') may cancel "
        "only its own jobs; another key's needs the 'admin' role"
    )
    assert keyed.delete(f"/jobs/{job_id}", headers=_as(keys[Role.ADMIN])).json()["status"] == "cancelled"
    wait_status(keyed, job_id, ("cancelled",))


def test_the_single_api_key_is_an_admin_named_default(settings: Settings, caplog: pytest.LogCaptureFixture):
    with TestClient(create_app(settings.model_copy(update={"api_key": "s3cret"})), headers=_as("s3cret")) as client:
        X, Y = make_multilabel()
        job = train(client, "mlknn", upload_csv(client, X, Y)["id"], "m", k=3)
        assert job["submitted_by"] == "default"
        assert client.get("/models/m/versions/1").json()["created_by"] == "default"
        assert client.get("/models/m/versions/1/artifact").status_code == 200
        with caplog.at_level(logging.INFO, "labelserve.audit"):
            assert client.delete("/models/m/versions/1").status_code == 204
            assert client.delete("/models/m/versions/1").status_code == 404  # nothing done: nothing logged
    assert _audit(settings) == [("version.delete", "m@1", "default")]
    [line] = [r for r in caplog.records if r.name == "labelserve.audit"]
    assert (line.getMessage(), line.action, line.target, line.key_name) == ("audit", "version.delete", "m@1", "default")


def test_without_keys_nothing_is_refused_and_no_key_is_named(client: TestClient, settings: Settings):
    X, Y = make_multilabel()
    job = train(client, "mlknn", upload_csv(client, X, Y)["id"], "m", k=3)
    assert job["submitted_by"] is None
    assert client.get("/models/m/versions/1").json()["created_by"] is None
    assert client.delete("/models/m").status_code == 204
    with Database(settings.resolved_database_url).reading() as session:
        [row] = session.scalars(select(AuditEvent)).all()
    assert (row.action, row.key_name, row.address, row.detail) == (
        "model.delete",
        None,
        "testclient",
        {"versions": [1]},
    )


def test_the_dashboard_hides_the_forms_a_role_may_not_send(keyed: TestClient, keys_file: tuple[Path, dict[Role, str]]):
    _, keys = keys_file
    keyed.headers.update(_as(keys[Role.TRAIN]))
    X, Y = make_multilabel()
    train(keyed, "mlknn", upload_csv(keyed, X, Y)["id"], "m", k=3)
    del keyed.headers["X-API-Key"]
    pages = {
        "/ui/models/m": ("Delete model", "Set or move alias"),
        "/ui/models/m/versions/1": ("Delete version", "by the key <code>train-key</code>"),
        "/ui/datasets": ("Upload a dataset",),
        "/ui/train": ('action="/ui/train" class="form card"',),
        "/ui/predict": ('action="/ui/predict"',),
    }
    shown = {
        Role.READ: set(),
        Role.PREDICT: {'action="/ui/predict"'},
        Role.TRAIN: {
            'action="/ui/predict"',
            "Set or move alias",
            "Upload a dataset",
            'action="/ui/train" class="form card"',
        },
    }
    for role, expected in shown.items():
        keyed.cookies.clear()
        login = keyed.get("/ui/login").text
        token = re.search(r'name="csrf" value="([^"]+)"', login)
        assert token is not None
        keyed.post("/ui/login", data={"csrf": token.group(1), "api_key": keys[role]})
        for page, texts in pages.items():
            body = keyed.get(page).text
            for text in texts:
                if text.startswith("by the key"):
                    assert text in body, page  # every role sees who registered a version
                else:
                    assert (text in body) == (text in expected), (role, page, text)
    refused = keyed.post("/ui/models/m/delete", data={"csrf": token.group(1), "confirm": "m"})
    assert refused.status_code == 403 and "it needs the 'admin' role" in refused.text
    assert keyed.get("/models/m", headers=_as(keys[Role.READ])).status_code == 200


def test_a_dashboard_session_names_its_key_and_ends_with_it(
    keyed: TestClient, keys_file: tuple[Path, dict[Role, str]], monkeypatch: pytest.MonkeyPatch
):
    """The session cookie is signed and names the key (never holds it); revoking the key ends it."""
    path, keys = keys_file
    monkeypatch.setattr("app.services.keys.RELOAD_SECONDS", 0.0)
    token = re.search(r'name="csrf" value="([^"]+)"', keyed.get("/ui/login").text)
    assert token is not None
    signed_in = keyed.post("/ui/login", data={"csrf": token.group(1), "api_key": keys[Role.PREDICT]})
    assert signed_in.status_code == 200 and signed_in.url.path == "/ui"
    cookie = keyed.cookies.get("labelserve_session")
    assert cookie and keys[Role.PREDICT] not in cookie and "labelserve_ui_key" not in keyed.cookies
    assert keyed.get("/ui/predict").status_code == 200
    assert keyed.get("/models").status_code == 401  # never on the JSON API
    time.sleep(0.01)  # a new mtime for the file's rewrite
    assert remove_key(path, NAMES[Role.PREDICT])
    keyed.app.state.gate.keys._next_check = 0  # type: ignore[attr-defined]
    gone = keyed.get("/ui/predict", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"
