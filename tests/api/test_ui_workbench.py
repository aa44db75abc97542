"""The dashboard as a workbench (issue 38), through the ASGI app on SQLite and PostgreSQL: evaluate
a version on a chosen dataset, split and delete datasets, export an artifact, find models and
datasets, compare versions side by side, and the facts and form guidance the pages show. Every
new action is refused without its CSRF token and to a role that may not send it.

The clients post as a browser does, naming the page's origin (``Origin: http://testserver``)."""

from __future__ import annotations

import html
import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.services.keys import Role, add_key
from tests.helpers import csv_bytes, make_distribution, make_multilabel, train, upload_csv


@pytest.fixture(autouse=True)
def same_origin(request: pytest.FixtureRequest) -> None:
    if "client" in request.fixturenames:
        request.getfixturevalue("client").headers["Origin"] = "http://testserver"


def _csrf(client: TestClient, path: str = "/ui/datasets") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def _split(client: TestClient, dataset_id: str, **body: object) -> dict:
    r = client.post(f"/datasets/{dataset_id}/split", json=body)
    assert r.status_code in (200, 201), r.text
    return r.json()


def _cells(page: str, header: str) -> list[str]:
    """The cells of the row whose header cell is ``header`` (tags stripped, unescaped)."""
    found = re.search(rf"<tr><th scope=\"row\">{re.escape(header)}</th>(.*?)</tr>", page, re.S)
    assert found is not None, header
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", found.group(1))]


def test_a_version_is_evaluated_on_the_held_out_part_from_its_page(client: TestClient) -> None:
    X, Y = make_multilabel(n=90, d=5, q=3)
    parent = upload_csv(client, X, Y, "flags")
    parts = _split(client, parent["id"], test_fraction=0.25)
    other = _split(client, parent["id"], test_fraction=0.3, random_state=4)  # another split: a test part, not ours
    train(client, "mlknn", parts["train"]["id"], "held", k=3)
    page = client.get("/ui/models/held/versions/1").text
    offered = re.findall(r'<option value="([0-9a-f]{16})">([^<]*)</option>', page.split('id="evaluate-on"')[1])
    ids = [i for i, _ in offered]
    # the split's own test part first, the training part last; the parent has the same features too
    assert ids[0] == parts["test"]["id"] and "held out from its training data" in offered[0][1]
    assert ids[-1] == parts["train"]["id"] and "its training data" in offered[-1][1]
    assert {other["test"]["id"], parent["id"]} <= set(ids)
    token = _csrf(client)
    r = client.post(
        "/ui/models/held/versions/1/evaluate",
        data={"csrf": token, "dataset_id": parts["test"]["id"]},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == f"/ui/models/held/versions/1/report?dataset_id={parts['test']['id']}"
    report = client.get(r.headers["location"])
    assert report.status_code == 200 and "back to held v1" in report.text and 'rel="icon"' in report.text
    recorded = client.get("/models/held/versions/1").json()["evaluations"]
    assert [e["dataset_id"] for e in recorded] == [parts["test"]["id"]]
    again = client.post("/evaluate", json={"model": "held@1", "dataset_id": parts["test"]["id"]}).json()
    assert recorded[0]["metrics"] == again["metrics"]  # the same service as POST /evaluate
    page = client.get("/ui/models/held/versions/1").text
    assert f"Report on {parts['test']['name']}" in page and "flags-test" in page  # names, not only ids
    models = client.get("/ui/models").text  # the metrics column: the latest evaluation's main metric
    assert f"{again['metrics']['average_precision']:.4f}" in models and "on flags-test" in models
    model = client.get("/ui/models/held").text
    assert f"{again['metrics']['average_precision']:.4f}" in model and "Metric history" in model
    # a dataset of other features is refused with the service's message
    X2, Y2 = make_multilabel(n=40, d=4, q=3)
    narrow = upload_csv(client, X2, Y2, "narrow")
    r = client.post("/ui/models/held/versions/1/evaluate", data={"csrf": token, "dataset_id": narrow["id"]})
    assert r.status_code == 422 and "features" in r.text


def test_the_comparison_page_shows_what_post_evaluate_answers(client: TestClient) -> None:
    X, Y = make_multilabel(n=90, d=5, q=3, seed=2)
    parent = upload_csv(client, X, Y, "emo")
    parts = _split(client, parent["id"])
    train(client, "mlknn", parts["train"]["id"], "cmp", k=3)
    train(client, "br", parts["train"]["id"], "cmp")
    train(client, "mlknn", parts["train"]["id"], "other", k=5)
    test_id = parts["test"]["id"]
    address = f"/ui/versions?v=cmp@1&v=cmp@2&v=other@1&dataset_id={test_id}"
    before = client.get(address)
    assert before.status_code == 200 and "None of these versions is evaluated on it yet" in before.text
    assert _cells(before.text, "method") == ["mlknn", "br", "mlknn"]
    assert _cells(before.text, "parameters")[0].startswith("k=3")
    # the versions not yet evaluated, evaluated from the page (as POST /evaluate records them)
    answer = client.post("/evaluate", json={"model": "cmp@2", "dataset_id": test_id}).json()
    token = _csrf(client)
    form = {"csrf": token, "v": ["cmp@1", "cmp@2", "other@1"], "dataset_id": test_id}
    r = client.post("/ui/versions/evaluate", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/versions?v=cmp%401&v=cmp%402")
    evaluations = {ref: client.get(f"/models/{ref.replace('@', '/versions/')}").json()["evaluations"]
                   for ref in ("cmp@1", "cmp@2", "other@1")}  # fmt: skip
    assert len(evaluations["cmp@2"]) == 1  # evaluated before: not again
    page = client.get(address).text
    for metric in answer["metrics"]:
        expected = [f"{evaluations[ref][-1]['metrics'][metric]:.4f}" for ref in ("cmp@1", "cmp@2", "other@1")]
        arrow = "↓" if metric in ("hamming_loss", "ranking_loss", "one_error", "coverage") else "↑"
        assert _cells(page, f"{metric} {arrow}") == expected, metric
        assert expected[1] == f"{answer['metrics'][metric]:.4f}"
    for ref in ("cmp@1", "other@1"):  # each is what POST /evaluate answers for it
        again = client.post("/evaluate", json={"model": ref, "dataset_id": test_id}).json()
        assert again["metrics"] == evaluations[ref][-1]["metrics"]
    assert page.count('<svg class="bar"') == 3 * len(answer["metrics"])  # the chart: a bar a version and metric
    assert client.get("/ui/versions?v=cmp@1").status_code == 200  # one version: the page asks for more
    assert client.get("/ui/versions?v=cmp@9&v=cmp@1").status_code == 404
    assert client.get("/ui/versions?v=nope&v=cmp@1").status_code == 422
    many = "&".join(f"v=cmp@{i}" for i in range(1, 6))
    assert client.get(f"/ui/versions?{many}").status_code == 422


def test_split_and_delete_datasets_from_their_pages(client: TestClient) -> None:
    X, Y = make_multilabel(n=60)
    parent = upload_csv(client, X, Y, "toy")
    token = _csrf(client)
    for fraction in ("0.25", "0.2"):
        r = client.post(
            f"/ui/datasets/{parent['id']}/split",
            data={"csrf": token, "test_fraction": fraction, "random_state": "0"},
            follow_redirects=False,
        )
        assert r.status_code == 303 and r.headers["location"] == f"/ui/datasets/{parent['id']}#parts"
    names = sorted(d["name"] for d in client.get("/datasets").json()["items"])
    assert names == ["toy", "toy-test", "toy-test-2", "toy-train", "toy-train-2"]
    page = client.get(f"/ui/datasets/{parent['id']}").text
    assert page.count("part, ") == 4 and "toy-train-2" in page
    r = client.post(f"/ui/datasets/{parent['id']}/split", data={"csrf": token, "test_fraction": "1.5"})
    assert r.status_code == 422 and "test_fraction" in r.text
    r = client.post(f"/ui/datasets/{parent['id']}/split", data={"csrf": token, "test_fraction": "half"})
    assert r.status_code == 422 and "test_fraction" in r.text
    # delete: the typed name, then the 409 of a dataset a version was trained on, explained
    train_id = next(d["id"] for d in client.get("/datasets").json()["items"] if d["name"] == "toy-train")
    train(client, "br", train_id, "uses-it")
    r = client.post(f"/ui/datasets/{train_id}/delete", data={"csrf": token, "confirm": "toy"})
    assert r.status_code == 422 and "type toy-train" in r.text
    r = client.post(f"/ui/datasets/{train_id}/delete", data={"csrf": token, "confirm": "toy-train"})
    assert r.status_code == 409 and "uses-it@1" in r.text and "delete those versions first" in r.text
    assert "each version's page can delete it" in r.text and client.get(f"/datasets/{train_id}").status_code == 200
    data = {"csrf": token, "confirm": "toy-train", "force": "true"}
    r = client.post(f"/ui/datasets/{train_id}/delete", data=data, follow_redirects=False)
    assert r.status_code == 303 and client.get(f"/datasets/{train_id}").status_code == 404
    assert "(deleted)" in client.get("/ui/models/uses-it/versions/1").text  # lineage kept, not linked
    r = client.post(
        f"/ui/datasets/{parent['id']}/delete", data={"csrf": token, "confirm": "toy"}, follow_redirects=False
    )
    assert r.status_code == 303 and client.get(f"/datasets/{parent['id']}").status_code == 404


def test_export_downloads_the_versions_zip(client: TestClient, multilabel_dataset: dict) -> None:
    train(client, "br", multilabel_dataset["id"], "exported")
    page = client.get("/ui/models/exported/versions/1").text
    assert 'href="/ui/models/exported/versions/1/artifact" download' in page
    r = client.get("/ui/models/exported/versions/1/artifact")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert r.headers["content-disposition"] == 'attachment; filename="exported-1.zip"'
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        assert set(archive.namelist()) == {"model.pkl", "manifest.json"}
    assert r.content == client.get("/models/exported/versions/1/artifact").content
    assert client.get("/ui/models/exported/versions/2/artifact").status_code == 404


def test_models_and_datasets_are_found_by_the_address(client: TestClient) -> None:
    X, Y = make_multilabel(n=40)
    ml = upload_csv(client, X, Y, "alpha-data")
    Xd, Yd = make_distribution(n=40)
    upload_csv(client, Xd, Yd, "beta-dist")
    for name in ("alpha-one", "alpha-two", "gamma"):
        train(client, "br", ml["id"], name)
    train(client, "mlknn", ml["id"], "alpha-two", k=3)
    assert client.put("/models/gamma/aliases/live", json={"version": 1}).status_code == 200
    page = client.get("/ui/models?q=ALPHA").text
    assert "alpha-one" in page and "alpha-two" in page and ">gamma<" not in page
    assert "2 models · page 1 of 1" in page and 'value="ALPHA"' in page
    page = client.get("/ui/models?method=mlknn").text
    assert "alpha-two" in page and "alpha-one" not in page and "1 models" in page
    page = client.get("/ui/models?alias=live").text
    assert ">gamma<" in page and "alpha-one" not in page
    assert "No model matches" in client.get("/ui/models?q=zzz").text
    page = client.get("/ui/datasets?kind=distribution").text
    assert "beta-dist" in page and "alpha-data" not in page and "1 datasets" in page
    page = client.get("/ui/datasets?q=alp&min_rows=10&max_rows=40").text
    assert "alpha-data" in page and "beta-dist" not in page
    assert "alpha-data" not in client.get("/ui/datasets?min_rows=41").text
    # a page of a long list keeps its filter in the pager's links and says where it is
    for i in range(26):
        upload_csv(client, X[: 10 + i], Y[: 10 + i], f"many-{i}")
    page = client.get("/ui/datasets?q=many").text
    assert "26 datasets · page 1 of 2" in page and 'href="?q=many&amp;offset=25"' in page
    assert "26 datasets · page 2 of 2" in client.get("/ui/datasets?q=many&offset=25").text


def test_the_pages_say_what_is_true(client: TestClient) -> None:
    X, Y = make_multilabel(n=60)
    ds = upload_csv(client, X, Y, "named-set")
    first = train(client, "br", ds["id"], "gone")
    train(client, "br", ds["id"], "gone")
    assert client.delete("/models/gone/versions/1").status_code == 204
    jobs = client.get("/ui/jobs").text
    assert 'gone v1 <span class="note">(deleted)</span>' in jobs and "/ui/models/gone/versions/1" not in jobs
    assert "/ui/models/gone/versions/2" in jobs and "2 jobs · page 1 of 1" in jobs and "on named-set" in jobs
    job = client.get(f"/ui/jobs/{first['id']}").text
    assert "named-set" in job and "Open gone v1" not in job and 'data-time="started_at"' in job
    version = client.get("/ui/models/gone/versions/2").text
    assert "named-set" in version and "the job took" in version and "fit " in version
    assert '<link rel="icon" href="/ui/static/favicon.svg"' in version
    assert client.get("/ui/static/favicon.svg").headers["content-type"].startswith("image/svg")


def test_forms_guide_the_user(client: TestClient) -> None:
    X, Y = make_multilabel(n=60)
    ml = upload_csv(client, X, Y, "emotions")
    Xd, Yd = make_distribution(n=60)
    dist = upload_csv(client, Xd, Yd, "yeast-ldl")
    page = client.get(f"/ui/train?method=mlknn&dataset_id={ml['id']}").text
    assert 'value="emotions-mlknn"' in page and "yeast-ldl" not in page  # its kind only, a suggested name
    page = client.get("/ui/train?method=aa-knn").text
    assert "yeast-ldl" in page and f'value="{ml["id"]}"' not in page
    assert "emotions" in client.get("/ui/train").text and "yeast-ldl" in client.get("/ui/train").text  # auto: both
    token = _csrf(client)
    r = client.post("/ui/train", data={"csrf": token, "method": "aa-knn", "dataset_id": ml["id"], "model_name": "x"})
    assert r.status_code == 422 and f"dataset &#39;emotions&#39; (id {ml['id']})" in r.text  # named by its name
    assert dist["kind"] == "distribution"
    train(client, "mlknn", ml["id"], "ranked", k=3)
    rows = "\n".join(",".join(str(v) for v in row) for row in X[:2])
    page = client.post("/ui/predict", data={"csrf": token, "model": "ranked", "rows": rows, "output": "ranking"}).text
    assert page.count("(the ranking's top 3)") == 2


NEW_FORMS = {
    # path, form fields (a valid token added), the role it needs
    "split": ("/ui/datasets/{ds}/split", {"test_fraction": "0.2"}, Role.TRAIN),
    "delete": ("/ui/datasets/{ds}/delete", {"confirm": "guarded"}, Role.ADMIN),
    "evaluate": ("/ui/models/m/versions/1/evaluate", {"dataset_id": "{ds}"}, Role.TRAIN),
    "evaluate versions": ("/ui/versions/evaluate", {"v": ["m@1", "m@2"], "dataset_id": "{ds}"}, Role.TRAIN),
}


@pytest.fixture
def keyed(settings: Settings, tmp_path: Path) -> Iterator[tuple[TestClient, dict[Role, str]]]:
    path = tmp_path / "keys.jsonl"
    keys = {role: add_key(path, f"{role.value}-key", role) for role in Role}
    app = create_app(settings.model_copy(update={"api_keys_file": path}))
    with TestClient(app, headers={"Origin": "http://testserver"}) as client:
        yield client, keys


def _sign_in(client: TestClient, key: str) -> str:
    client.cookies.clear()
    token = _csrf(client, "/ui/login")
    client.post("/ui/login", data={"csrf": token, "api_key": key})
    return _csrf(client, "/ui")


def test_new_actions_need_their_role_and_their_token(keyed: tuple[TestClient, dict[Role, str]]) -> None:
    client, keys = keyed
    admin = {"X-API-Key": keys[Role.ADMIN]}
    X, Y = make_multilabel(n=60)
    ds = client.post(
        "/datasets",
        headers=admin,
        files={"file": ("g.csv", csv_bytes(X, Y))},
        data={"label_count": "3", "name": "guarded"},
    ).json()["id"]
    for _ in range(2):
        body = {"method": "br", "dataset_id": ds, "model_name": "m"}
        assert client.post("/train?wait=true", json=body, headers=admin).json()["status"] == "succeeded"
    pages = {
        f"/ui/datasets/{ds}": {"split": "Split</button>", "delete": "Delete dataset"},
        "/ui/models/m/versions/1": {"evaluate": "Evaluate and open the report", "export": "Export the artifact"},
        f"/ui/versions?v=m@1&v=m@2&dataset_id={ds}": {"evaluate versions": "Evaluate the versions not yet"},
    }
    needed = {**{k: v[2] for k, v in NEW_FORMS.items()}, "export": Role.ADMIN}
    for role in Role:
        token = _sign_in(client, keys[role])
        for page, shown in pages.items():
            text = client.get(page).text
            for action, marker in shown.items():  # the page hides what the role may not do
                assert (marker in text) == role.allows(needed[action]), (role, action)
        for action, (path, fields, need) in NEW_FORMS.items():
            if role.allows(need):
                continue
            form = {k: (v.format(ds=ds) if isinstance(v, str) else v) for k, v in fields.items()}
            r = client.post(path.format(ds=ds), data={**form, "csrf": token})
            assert r.status_code == 403 and f"it needs the '{need.value}' role" in r.text, (role, action)
        r = client.get("/ui/models/m/versions/1/artifact")
        assert (r.status_code == 200) == (role is Role.ADMIN), role
    # an admin's session without the form's token changes nothing either
    token = _sign_in(client, keys[Role.ADMIN])
    for action, (path, fields, _) in NEW_FORMS.items():
        form = {k: (v.format(ds=ds) if isinstance(v, str) else v) for k, v in fields.items()}
        assert client.post(path.format(ds=ds), data=form).status_code == 403, action
        forged = client.post(
            path.format(ds=ds), data={**form, "csrf": token}, headers={"Origin": "http://evil.example"}
        )
        assert forged.status_code == 403, action
    assert [d["id"] for d in client.get("/datasets", headers=admin).json()["items"]] == [ds]  # no split, no delete
    assert client.get("/models/m/versions/1", headers=admin).json()["evaluations"] == []


def _selects(client: TestClient, path: str) -> int:
    """How many SELECTs the page costs."""
    from sqlalchemy import event

    statements: list[str] = []

    def record(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    engine = client.app.state.core.database.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", record)
    try:
        assert client.get(path).status_code == 200, path
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return len([s for s in statements if s.lstrip().upper().startswith("SELECT")])


def test_lists_cost_the_same_queries_whatever_their_length(client: TestClient) -> None:
    """No query a row: the lists, the model page and the comparison read as much with twice the rows."""
    X, Y = make_multilabel(n=40)
    ds = upload_csv(client, X, Y, "few")
    paths = ("/ui/models", "/ui/models?q=m", "/ui/models/m0", "/ui/jobs", "/ui/datasets?kind=multilabel",
             "/ui/versions?v=m0@1&v=m0@2")  # fmt: skip
    counts = []
    for round_ in range(2):
        for i in range(2):
            train(client, "br", ds["id"], f"m{round_}{i}" if round_ or i else "m0")
            train(client, "br", ds["id"], "m0")
            assert client.post("/evaluate", json={"model": "m0", "dataset_id": ds["id"]}).status_code == 200
            upload_csv(client, X[: 20 + 2 * round_ + i], Y[: 20 + 2 * round_ + i], f"more-{round_}-{i}")
        counts.append([_selects(client, path) for path in paths])
    assert counts[0] == counts[1], dict(zip(paths, zip(*counts)))
