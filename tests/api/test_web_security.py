"""The web surface as another site's page, a rebound host name or a password guesser meets it.

Security headers on every HTML answer (dashboard pages, reports as served and downloaded) and
``nosniff`` on every answer; the dashboard's forms refuse what a browser sends from another
site and tokens the server did not issue; Host names not allowed get 400; a key-less server
refuses another site's cross-site requests that change something; the dashboard's cookie is a
signed session, never the key; wrong keys are throttled.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from itsdangerous import URLSafeTimedSerializer
from plotly.offline import get_plotlyjs

from app.api.headers import PAGE_POLICY
from app.config import Settings
from app.main import create_app
from tests.helpers import csv_bytes, make_multilabel, train, upload_csv, wait_status

SITE = "http://testserver"
KEY = "k-web-123"


def _csrf(client: TestClient, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def _dump(response: httpx.Response) -> str:
    """The answer's status line and headers, as ``curl -D -`` shows them."""
    return f"HTTP/1.1 {response.status_code}\n" + "".join(f"{k}: {v}\n" for k, v in response.headers.items())


def _set_session(client: TestClient, value: str) -> None:
    client.cookies.delete("labelserve_session")
    client.cookies.set("labelserve_session", value, path="/ui")


def _inline_scripts(page: str) -> list[str]:
    """The hash sources of a page's inline scripts, computed here independently of the app."""
    bodies = re.findall(r"<script(?![^>]*\ssrc=)[^>]*>(.*?)</script>", page, flags=re.S)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in bodies]


def _assert_html_headers(response: httpx.Response, policy: str | None = PAGE_POLICY) -> str:
    """The headers of an HTML answer; its Content-Security-Policy (``policy`` exactly, if given)."""
    headers = response.headers
    dump = _dump(response)
    assert headers["content-type"].startswith("text/html"), dump
    assert headers["x-content-type-options"] == "nosniff", dump
    assert headers["x-frame-options"] == "DENY", dump
    assert headers["referrer-policy"] == "same-origin", dump
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "object-src 'none'" in csp, dump
    if policy is not None:
        assert csp == policy, dump
    return csp


def test_every_html_answer_carries_the_security_headers(client: TestClient) -> None:
    X, Y = make_multilabel(n=60, d=5, q=3)
    ds = upload_csv(client, X, Y, "headers")
    job = train(client, "br", ds["id"], "framed")
    pages = [
        "/ui",
        "/ui/login",
        "/ui/datasets",
        f"/ui/datasets/{ds['id']}",
        "/ui/models",
        "/ui/models/framed",
        "/ui/models/framed/versions/1",
        "/ui/jobs",
        f"/ui/jobs/{job['id']}",
        "/ui/train",
        "/ui/compare",
        "/ui/predict",
        "/ui/models/nope",  # an error page
    ]
    for path in pages:
        page = client.get(path)
        assert page.status_code in (200, 404), path
        _assert_html_headers(page)
        assert "<script>" not in page.text and " style=" not in page.text, path  # nothing inline to allow
    print(_dump(client.get("/ui")))  # shown with -s: the header dump of /ui

    # reports: the dashboard's (plotly linked) and its download, the API's (plotly inlined)
    compare = client.post("/compare", json={"dataset_id": ds["id"], "methods": ["br", "mi-filter"], "cv": 2})
    cid = compare.json()["id"]
    assert wait_status(client, cid, ("succeeded", "failed"), timeout=120)["status"] == "succeeded"
    bundle = _inline_scripts(f"<script>{get_plotlyjs()}</script>")[0]
    for path in (
        f"/ui/models/framed/versions/1/report?dataset_id={ds['id']}",
        f"/ui/models/framed/versions/1/report?dataset_id={ds['id']}&download=1",
        f"/models/framed/versions/1/report?dataset_id={ds['id']}",
        f"/ui/jobs/{cid}/report",
        f"/ui/jobs/{cid}/report?download=1",
        f"/jobs/{cid}/report",
    ):
        report = client.get(path)
        assert report.status_code == 200, path
        csp = _assert_html_headers(report, policy=None)
        inline = _inline_scripts(report.text)
        assert inline and all(source in csp for source in inline), (path, csp)  # every chart draws
        assert (bundle in csp) == (bundle in inline) == ('src="/ui/assets/' not in report.text), path
        assert "style-src 'self' 'unsafe-inline'" in csp  # plotly styles what it draws
        assert "http-equiv" not in report.text.lower()  # no <meta> policy: the saved file runs what it inlines
        if "download=1" in path:
            assert report.headers["content-disposition"].startswith("attachment;")

    # downloads that are not pages, and the JSON API: nosniff
    for path in (f"/ui/jobs/{cid}/report?format=csv", f"/ui/jobs/{cid}/result", f"/jobs/{cid}/result", "/models"):
        answer = client.get(path)
        assert answer.status_code == 200 and answer.headers["x-content-type-options"] == "nosniff", path
        assert "content-security-policy" not in answer.headers, path
    rows = X[:2].tolist()
    for _ in range(2):  # the route's answer, then the fast path's (the reference is resolved)
        answer = client.post("/predict", json={"model": "framed", "instances": rows})
        assert answer.status_code == 200 and answer.headers["x-content-type-options"] == "nosniff"
    for _ in range(2):  # a refusal: the route's, then the fast path's
        answer = client.post("/predict", json={"model": "nope", "instances": rows})
        assert answer.status_code == 404 and answer.headers["x-content-type-options"] == "nosniff"


def test_dashboard_forms_refuse_other_sites_and_tokens_the_server_did_not_issue(
    client: TestClient, multilabel_dataset: dict
) -> None:
    token = _csrf(client, "/ui/train")
    form = {"csrf": token, "method": "br", "dataset_id": multilabel_dataset["id"], "model_name": "forged"}
    session = client.cookies["labelserve_session"]
    refused = [
        {"Origin": "null"},  # a sandboxed frame or a local file
        {},  # neither Origin nor Referer
        {"Origin": "http://evil.example"},
        {"Origin": "null", "Referer": "http://evil.example/attack.html"},
        {"Referer": "http://testserver.evil.example/ui/train"},
    ]
    for headers in refused:
        r = client.post("/ui/train", data=form, headers=headers, follow_redirects=False)
        assert r.status_code == 403 and "Form expired" in r.text, headers
    same_site = {"Origin": SITE}
    # tokens the server did not issue: made up, the old double submit (a cookie set to match),
    # the token of another browser's session, a session cookie signed with another secret
    made_up = {**form, "csrf": "A" * 43}
    assert client.post("/ui/train", data=made_up, headers=same_site).status_code == 403
    client.cookies.set("labelserve_csrf", "T" * 32, path="/ui")
    assert client.post("/ui/train", data={**form, "csrf": "T" * 32}, headers=same_site).status_code == 403
    other = TestClient(client.app)
    other_token = _csrf(other, "/ui/train")
    assert other_token != token
    assert client.post("/ui/train", data={**form, "csrf": other_token}, headers=same_site).status_code == 403
    forged = URLSafeTimedSerializer("not the server's", salt="labelserve.session").dumps(["sid", ""])
    _set_session(client, forged)
    assert client.post("/ui/train", data=form, headers=same_site).status_code == 403
    assert client.get("/jobs").json()["items"] == []  # nothing was queued

    _set_session(client, session)
    referred = {"Referer": f"{SITE}/ui/train"}  # no Origin, but a same-host Referer: Django's rule
    for headers in (same_site, referred, {"Origin": "null", **referred}):
        r = client.post("/ui/train", data=form, headers=headers, follow_redirects=False)
        assert r.status_code == 303, (headers, r.text)
    assert len(client.get("/jobs").json()["items"]) == 3


def test_host_names_not_allowed_are_refused(client: TestClient, multilabel_dataset: dict) -> None:
    train(client, "br", multilabel_dataset["id"], "hosted")
    rows = {"model": "hosted", "instances": make_multilabel(n=2, d=6)[0].tolist()}
    assert client.post("/predict", json=rows).status_code == 200  # resolved: the fast path answers it next
    for host in ("evil.example", "rebind.evil.example:8000", "localhost.evil.example", "[::2]:80"):
        for method, path in (("GET", "/ui"), ("GET", "/models"), ("GET", "/docs"), ("POST", "/predict")):
            r = client.request(method, path, headers={"Host": host}, json=rows if method == "POST" else None)
            assert r.status_code == 400 and r.text == "Invalid host header", (host, path)
            assert r.headers["x-content-type-options"] == "nosniff"
    for host in ("testserver", "localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST"):
        assert client.post("/predict", json=rows, headers={"Host": host}).status_code == 200, host
        assert client.get("/ui", headers={"Host": host}).status_code == 200, host


def test_a_keyless_server_refuses_other_sites_changes(client: TestClient) -> None:
    X, Y = make_multilabel(n=40, d=4, q=3)
    upload = {"files": {"file": ("x.csv", csv_bytes(X, Y), "text/csv")}, "data": {"label_count": "3"}}
    for origin in ("http://evil.example", "null", "http://testserver:8080"):
        r = client.post("/datasets", headers={"Origin": origin}, **upload)  # multipart: a CORS simple request
        assert r.status_code == 403 and "cross-site request refused" in r.json()["detail"], origin
    assert client.get("/datasets").json()["items"] == []
    ds = client.post("/datasets", **upload)  # no Origin: curl, the CLI, the Python client
    assert ds.status_code == 201, ds.text
    same_site = client.post("/datasets", headers={"Origin": SITE}, **upload)  # the docs' "Try it out"
    assert same_site.status_code == 200 and same_site.json()["id"] == ds.json()["id"]  # the same content, stored
    dataset_id = ds.json()["id"]
    assert client.delete(f"/datasets/{dataset_id}", headers={"Origin": "http://evil.example"}).status_code == 403
    body = {"model": "any", "instances": X[:1].tolist()}
    assert client.post("/predict", json=body, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.get(f"/datasets/{dataset_id}", headers={"Origin": "http://evil.example"}).status_code == 200


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store", api_key=KEY)
    with TestClient(create_app(settings), headers={"Origin": SITE}) as test_client:
        yield test_client


def _login(client: TestClient, key: str = KEY) -> httpx.Response:
    token = _csrf(client, "/ui/login")
    return client.post("/ui/login", data={"csrf": token, "api_key": key}, follow_redirects=False)


def test_the_session_cookie_holds_no_key_and_ends_with_the_key(keyed: TestClient, tmp_path: Path) -> None:
    r = _login(keyed)
    assert r.status_code == 303
    cookies = r.headers.get_list("set-cookie")
    assert len(cookies) == 1 and cookies[0].startswith("labelserve_session=")
    value = keyed.cookies["labelserve_session"]
    assert KEY not in cookies[0] and KEY.encode() not in base64.urlsafe_b64decode(value.split(".")[0] + "==")
    assert hashlib.sha256(KEY.encode()).hexdigest()[:16] not in value
    assert "HttpOnly" in cookies[0] and "SameSite=strict" in cookies[0] and "Path=/ui" in cookies[0]
    assert "Secure" not in cookies[0]  # plain http here; set over https
    assert keyed.get("/ui/models").status_code == 200
    assert keyed.get("/models").status_code == 401  # the session is no credential of the JSON API
    assert keyed.get("/models", headers={"X-API-Key": value}).status_code == 401  # no key the server knows
    secret = tmp_path / "store" / "secret.key"
    assert secret.stat().st_mode & 0o777 == 0o600

    # another key, the same store (and secret): the session of the old key no longer counts
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store", api_key="new")
    with TestClient(create_app(settings)) as rotated:
        _set_session(rotated, value)
        r = rotated.get("/ui/models", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"

    # the same key, a server with another secret: not a session it issued
    other = Settings(model_dir=tmp_path / "other", api_key=KEY, secret_key="x" * 40)
    with TestClient(create_app(other)) as elsewhere:
        _set_session(elsewhere, value)
        assert elsewhere.get("/ui/models", follow_redirects=False).status_code == 303
    assert not (tmp_path / "other" / "secret.key").exists()  # LABELSERVE_SECRET_KEY: no file

    # logging out clears the cookie
    token = _csrf(keyed, "/ui/models")
    r = keyed.post("/ui/logout", data={"csrf": token}, follow_redirects=False)
    assert r.status_code == 303 and 'labelserve_session=""' in r.headers["set-cookie"]
    assert keyed.get("/ui/models", follow_redirects=False).status_code == 303


def test_wrong_keys_are_throttled_per_client(keyed: TestClient) -> None:
    answers = [_login(keyed, f"guess-{i}") for i in range(20)]
    assert [r.status_code for r in answers] == [403] * 10 + [429] * 10
    for r in answers[10:]:
        assert 1 <= int(r.headers["retry-after"]) <= 60
    assert _login(keyed).status_code == 429  # not even the key, for now
    elsewhere = TestClient(keyed.app, headers={"Origin": SITE}, client=("192.0.2.7", 50000))
    assert _login(elsewhere).status_code == 303  # another address signs in
