"""The dashboard's pages through the ASGI app: every page renders, forms change things only with
their CSRF token, errors are pages with the service's 4xx, and the session cookie counts on /ui alone.

The clients post as a browser does, naming the page's origin (``Origin: http://testserver``);
``tests/api/test_web_security.py`` sends what a browser would from another site."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.helpers import ThreadUse, csv_bytes, make_multilabel, train, upload_csv, wait_status


@pytest.fixture(autouse=True)
def same_origin(request: pytest.FixtureRequest) -> None:
    for name in ("client", "keyed"):
        if name in request.fixturenames:
            request.getfixturevalue(name).headers["Origin"] = "http://testserver"


def _csrf(client: TestClient, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_root_redirects_and_ui_is_not_in_the_schema(client: TestClient) -> None:
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui"
    assert not [p for p in client.get("/openapi.json").json()["paths"] if p.startswith("/ui") or p == "/"]
    assert client.get("/ui/static/ui.css").status_code == 200


def test_every_page_renders_and_links_what_it_shows(client: TestClient) -> None:
    X, Y = make_multilabel(n=60, d=5, q=3)
    ds = upload_csv(client, X, Y, "generated <ml>")
    job = train(client, "br", ds["id"], "ui-br")
    assert job["status"] == "succeeded"
    assert client.put("/models/ui-br/aliases/prod", json={"version": 1}).status_code == 200
    for path in ("/ui", "/ui/datasets", "/ui/models", "/ui/jobs", "/ui/train", "/ui/compare", "/ui/predict"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), path
        assert "generated <ml>" not in page.text  # escaped wherever the name shows
    dataset = client.get(f"/ui/datasets/{ds['id']}").text
    assert "label cardinality" in dataset and "/ui/models/ui-br/versions/1" in dataset
    assert "generated &lt;ml&gt;" in dataset
    version = client.get("/ui/models/ui-br/versions/1").text
    assert "prod" in version and ds["sha256"] in version and "scikit-learn" in version
    assert f"/ui/models/ui-br/versions/1/report?dataset_id={ds['id']}" in version
    report = client.get(f"/ui/models/ui-br/versions/1/report?dataset_id={ds['id']}")
    assert report.status_code == 200 and "Per label: confusion counts" in report.text
    jobs = client.get("/ui/jobs").text
    assert job["id"] in jobs and "succeeded" in jobs
    assert client.get("/ui/train?method=br").text.count('name="p.') == len(
        client.get("/methods/br").json()["params"]["properties"]
    )
    progress = client.get(f"/ui/jobs/progress?ids={job['id']},nope").json()
    for times in progress.values():
        assert times.pop("started_at") <= times.pop("finished_at") != "-"
    assert progress == {job["id"]: {"status": "succeeded", "progress": 1.0, "stage": "done", "position": None,
                                    "ended": True}}  # fmt: skip


def test_forms_upload_train_alias_predict_and_delete(client: TestClient) -> None:
    X, Y = make_multilabel(n=60, d=5, q=3)
    token = _csrf(client, "/ui/datasets")
    r = client.post(
        "/ui/datasets",
        data={"csrf": token, "label_count": "3", "name": "form data"},
        files={"file": ("form.csv", csv_bytes(X, Y), "text/csv")},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    dataset_id = r.headers["location"].rsplit("/", 1)[1]
    r = client.post(
        "/ui/train",
        data={"csrf": token, "method": "mlknn", "dataset_id": dataset_id, "model_name": "formed", "p.k": "4"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    job_id = r.headers["location"].rsplit("/", 1)[1]
    assert wait_status(client, job_id, ("succeeded", "failed"))["status"] == "succeeded"
    assert client.get("/models/formed/versions/1").json()["params"]["k"] == 4
    r = client.post("/ui/models/formed/aliases", data={"csrf": token, "alias": "live", "version": "1"})
    assert r.status_code == 200 and client.get("/models/formed").json()["aliases"] == {"live": 1}
    rows = "\n".join(",".join(str(v) for v in row) for row in X[:3])
    page = client.post("/ui/predict", data={"csrf": token, "model": "formed@live", "rows": rows, "output": "ranking"})
    assert page.status_code == 200 and "Predictions of formed v1" in page.text and page.text.count("<tr><td>") >= 3
    r = client.post("/ui/models/formed/versions/1/delete", data={"csrf": token, "confirm": "wrong"})
    assert r.status_code == 422 and client.get("/models/formed/versions/1").status_code == 200
    r = client.post("/ui/models/formed/delete", data={"csrf": token, "confirm": "formed"}, follow_redirects=False)
    assert r.status_code == 303 and client.get("/models/formed").status_code == 404


def test_errors_are_pages_naming_the_field(client: TestClient) -> None:
    token = _csrf(client, "/ui/train")
    r = client.post(
        "/ui/train", data={"csrf": token, "method": "mlknn", "dataset_id": "0" * 16, "model_name": "x", "p.k": "0"}
    )
    assert r.status_code == 422 and "params.k" in r.text
    r = client.post(
        "/ui/train", data={"csrf": token, "method": "mlknn", "dataset_id": "0" * 16, "model_name": "x", "p.k": "two"}
    )
    assert r.status_code == 422 and "params.k" in r.text
    r = client.post("/ui/predict", data={"csrf": token, "model": "none", "rows": "1,x"})
    assert r.status_code == 422 and "rows:" in r.text
    assert client.get("/ui/models/nope").status_code == 404
    assert client.get("/ui/models/nope/versions/1").status_code == 404
    assert client.get("/ui/datasets/" + "0" * 16).status_code == 404
    assert client.get("/ui/jobs/" + "0" * 16).status_code == 404
    assert client.get("/ui/jobs/bad id!").status_code == 422


def test_forms_without_their_token_change_nothing(client: TestClient, multilabel_dataset: dict) -> None:
    train(client, "br", multilabel_dataset["id"], "guarded")
    token = _csrf(client, "/ui/datasets")  # the browser has a session, the forged form does not carry its token
    assert client.post("/ui/models/guarded/delete", data={"confirm": "guarded"}).status_code == 403
    forged = client.post(
        "/ui/models/guarded/delete",
        data={"csrf": token, "confirm": "guarded"},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status_code == 403 and client.get("/models/guarded").status_code == 200


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store", api_key="k-123")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_key_is_asked_once_and_the_session_counts_on_ui_paths_only(keyed: TestClient) -> None:
    r = keyed.get("/ui/models", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    token = _csrf(keyed, "/ui/login")
    assert keyed.post("/ui/login", data={"csrf": token, "api_key": "wrong"}).status_code == 403
    r = keyed.post("/ui/login", data={"csrf": token, "api_key": "k-123"}, follow_redirects=False)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("labelserve_session=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "k-123" not in cookie and "Path=/ui" in cookie and "Max-Age=43200" in cookie
    assert keyed.get("/ui/models").status_code == 200
    assert keyed.get("/models").status_code == 401  # the cookie is no credential of the JSON API
    assert keyed.get("/models", headers={"X-API-Key": "k-123"}).status_code == 200


def test_reports_load_the_cached_bundle_and_download_as_one_offline_file(client: TestClient) -> None:
    from plotly.offline import get_plotlyjs

    from app.storage.orm import Evaluation

    bundle = get_plotlyjs()
    X, Y = make_multilabel(n=60, d=5, q=3)
    ds = upload_csv(client, X, Y, "reported")
    train(client, "br", ds["id"], "ui-report")
    path = f"/ui/models/ui-report/versions/1/report?dataset_id={ds['id']}"
    served = client.get(path)
    assert served.status_code == 200 and "Per label: confusion counts" in served.text
    assert bundle[:2000] not in served.text and len(served.content) < 500_000  # the bundle is not sent again
    src = re.search(r'<script type="text/javascript" src="(/ui/assets/plotly-[^"]+\.min\.js)"></script>', served.text)
    assert src is not None and served.text.count("<script") == served.text.count("Plotly.newPlot") + 1
    assert client.get(path).text == served.text  # built once: the second view is the cached page, date and all

    asset = client.get(src.group(1), headers={"Accept-Encoding": "gzip"})
    assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript")
    assert asset.headers["content-encoding"] == "gzip" and asset.text == bundle  # httpx inflates it
    assert "immutable" in asset.headers["cache-control"]
    assert client.get(src.group(1), headers={"Accept-Encoding": "identity"}).content == bundle.encode()
    assert client.get("/ui/assets/plotly-0.0.0.min.js").status_code == 404

    download = re.search(r'href="([^"]+download=1)" download', served.text)
    assert download is not None
    saved = client.get(download.group(1).replace("&amp;", "&"))
    assert saved.headers["content-disposition"] == f'attachment; filename="ui-report-v1-{ds["id"]}-report.html"'
    assert bundle in saved.text and '<script type="text/javascript" src=' not in saved.text
    assert "download=1" not in saved.text and "Per label: confusion counts" in saved.text
    assert bundle in client.get(f"/models/ui-report/versions/1/report?dataset_id={ds['id']}").text  # the API's too

    # a recorded evaluation on these rows at the default threshold gives the report its metrics
    assert client.post("/evaluate", json={"model": "ui-report@1", "dataset_id": ds["id"]}).status_code == 200
    core = client.app.state.core  # type: ignore[attr-defined]
    with core.database.session() as session:
        evaluation = session.query(Evaluation).one()
        evaluation.metrics = {**evaluation.metrics, "hamming_loss": 0.123456}
        session.commit()
    core.pages.clear()
    assert "<td>hamming_loss ↓</td><td>0.1235</td>" in client.get(path).text


def test_progress_poll_is_one_query_in_its_own_threads(client: TestClient, settings: Settings, monkeypatch) -> None:
    """47 jobs cost the poll one query per job (three per queued one), in the shared thread pool:
    200 open pages starved the API. Now one query, shared by the polls of the same jobs within
    FRESH_SECONDS, in at most THREADS threads of its own."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import event

    from app.jobs import transitions
    from app.jobs.payloads import TrainPayload
    from app.storage.db import Database
    from app.ui import data
    from app.ui.progress import THREADS

    database = Database(settings.database_url)
    ids = []
    for _ in range(47):  # one transaction each: each its own created_at, so its own place in the queue
        with database.session() as session:
            ids.append(transitions.create(session, TrainPayload(method="br", dataset_id="d", model_name="m")).id)
    with database.session() as session:
        assert transitions.claim(session, ids[0], "host:1") is not None
    statements: list[str] = []

    def record(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    engine = client.app.state.core.database.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        progress = client.get(f"/ui/jobs/progress?ids={','.join(ids)},nope").json()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert set(progress) == set(ids)
    assert progress[ids[0]]["status"] == "running" and progress[ids[0]]["position"] is None
    assert [progress[i]["position"] for i in ids[1:]] == list(range(1, 47))
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1, statements

    slow = ThreadUse(data.jobs_progress)
    monkeypatch.setattr(data, "jobs_progress", slow)
    with ThreadPoolExecutor(10) as pool:  # ten pages of other jobs each, and ten of the same jobs
        answers = list(pool.map(lambda i: client.get(f"/ui/jobs/progress?ids={ids[i]}").status_code, range(10)))
        answers += list(pool.map(lambda i: client.get(f"/ui/jobs/progress?ids={ids[-1]}").status_code, range(10)))
    assert answers == [200] * 20
    assert slow.most == THREADS, slow.most
    assert max(slow.shared) == 0  # none of the polls held a thread of the shared pool
    assert len(slow.shared) == 11  # the polls of the same jobs shared one read
