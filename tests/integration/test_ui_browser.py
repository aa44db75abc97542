"""The dashboard in a real browser, with no request leaving the machine.

Debian's ``chromium`` runs headless, driven by Playwright, against ``labelserve serve`` with an
API key: every request to a host other than 127.0.0.1 is aborted by route interception (and
would not resolve anyway), and any failed request, script error, anything a page's
Content-Security-Policy refused or page sent without its security headers fails the test. One flow as a
user would go: sign in, upload a dataset through the form, train ``auto`` and watch its progress
bar reach done, open the version page and its report, move an alias, predict in the playground,
cancel a running job; and the workbench journey of issue 38 (split, evaluate on the held-out
part, find, compare versions, export, delete a dataset). Each page is screenshotted at 1400 px and at 390 px (a phone) into
``LABELSERVE_UI_SCREENSHOTS`` (default: the test's tmp dir), checked by axe-core (the engine
``axe-playwright-python`` ships: no violation of WCAG 2.x A/AA rules) and for labelled fields and
keyboard navigation. The reports are opened as served (plotly's bundle from the service's own
cached asset) and as the downloaded file, from disk with every request refused: it opens offline.
"""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.helpers import csv_bytes, launched_chromium, live_server, make_multilabel

pytestmark = pytest.mark.browser

API_KEY = "ui-browser-key"
WIDTHS = (1400, 390)
PlaywrightError: type[Exception] = Exception  # playwright's own, once the browser fixture imported it

# every field the page shows has a label (a <label for>, a wrapping label, aria-label or aria-labelledby)
UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea')]
  .filter(el => el.type !== 'hidden' && !(el.labels && el.labels.length)
          && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
  .map(el => el.outerHTML.slice(0, 120))"""
# what Tab can reach, and what it cannot although it is a link, a button or a field
FOCUSABLE = """() => [...document.querySelectorAll('a[href], button, input, select, textarea')]
  .filter(el => el.type !== 'hidden' && el.offsetParent !== null && el.tabIndex < 0)
  .map(el => el.outerHTML.slice(0, 120))"""


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    global PlaywrightError
    with launched_chromium() as instance:
        PlaywrightError = pytest.importorskip("playwright.sync_api").Error
        yield instance


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"LABELSERVE_API_KEY": API_KEY, "LABELSERVE_WORKERS": "2"}
    with live_server(tmp_path_factory.mktemp("ui"), env=env) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("LABELSERVE_UI_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(browser, server: str) -> Iterator[object]:
    """A page whose requests off 127.0.0.1 are aborted and recorded, as are failures and script errors."""
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.failed = []

    def guard(route) -> None:
        if urlsplit(route.request.url).hostname != "127.0.0.1":
            tab.failed.append(f"blocked: {route.request.url}")
            route.abort()
        else:
            route.continue_()

    context.route("**/*", guard)
    # net::ERR_ABORTED is the browser cancelling a request of a page it leaves (a progress poll in
    # flight when the page reloads itself at a job's end): not a failure of the server
    tab.on(
        "requestfailed",
        lambda request: (
            None if request.failure == "net::ERR_ABORTED" else tab.failed.append(f"{request.url}: {request.failure}")
        ),
    )
    tab.on("pageerror", lambda error: tab.failed.append(f"script error: {error}"))
    # anything the page's Content-Security-Policy refused (Chromium's console says so), and any
    # page of the service sent without the headers that keep it out of frames
    tab.on("console", lambda message: csp_violation(tab, message.text))
    # and any error the console shows (a missing favicon had logged one on each first visit)
    tab.on("console", lambda message: message.type == "error" and tab.failed.append(f"console: {message.text}"))
    tab.on("response", lambda response: unguarded(tab, response))
    yield tab
    context.close()


def csp_violation(tab, text: str) -> None:
    if "Content Security Policy" in text:
        tab.failed.append(f"refused by the page's policy: {text}")


def unguarded(tab, response) -> None:
    headers = response.headers
    if urlsplit(response.url).hostname == "127.0.0.1" and headers.get("content-type", "").startswith("text/html"):
        policy = headers.get("content-security-policy", "")
        if headers.get("x-frame-options") != "DENY" or "frame-ancestors 'none'" not in policy:
            tab.failed.append(f"a page without its security headers: {response.url}")


def accessibility(page, name: str) -> None:
    """axe-core's WCAG 2.0/2.1/2.2 A and AA rules on the page as it is: no violation."""
    from axe_playwright_python.sync_playwright import Axe

    tags = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": tags}, "resultTypes": ["violations"]})
    assert results.violations_count == 0, f"{name}:\n{results.generate_report()}"


def check_page(page, shots: Path, name: str) -> None:
    """axe-core and screenshots at both widths, labelled fields, every control reachable by Tab, nothing failed."""
    assert page.evaluate(UNLABELLED) == [], name
    assert page.evaluate(FOCUSABLE) == [], name
    page.evaluate("() => { const b = document.body; b.tabIndex = -1; b.focus(); b.removeAttribute('tabindex'); }")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip", name  # the first stop skips the menu
    seen = set()
    for _ in range(12):
        page.keyboard.press("Tab")
        seen.add(page.evaluate("document.activeElement.outerHTML.slice(0, 60)"))
    assert len(seen) >= 6, (name, seen)  # focus moves through the menu and on
    page.evaluate("document.activeElement.blur()")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} is {overflow}px wider than a {width}px window"
        accessibility(page, f"{name} at {width} px")
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    assert page.failed == [], (name, page.failed)


def api(server: str) -> httpx.Client:
    return httpx.Client(base_url=server, headers={"X-API-Key": API_KEY}, timeout=60)


def plotly_version() -> str:
    import plotly

    return plotly.__version__


def keep_offline_file(page, target: Path) -> Path:
    """The report's offline file, through its download link, as a user keeps it."""
    with page.expect_download() as download:
        page.get_by_role("link", name="Download this report as one HTML file").click()
    download.value.save_as(str(target))
    return target


def open_offline(browser, saved: Path, expected: str, shots: Path, name: str) -> None:
    """The saved file from disk, every request but the file itself refused: its charts still draw."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    requests: list[str] = []

    def refuse(route) -> None:
        if route.request.url == saved.as_uri():
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    context.route("**/*", refuse)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(saved.as_uri())
    tab.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    assert expected in tab.inner_text("body")
    assert tab.locator(".js-plotly-plot").count() == tab.locator("div.chart").count() > 0
    tab.screenshot(path=str(shots / f"{name}-1400.png"), full_page=True)
    context.close()
    assert requests == [] and errors == [], (requests, errors)


def test_the_dashboard_flow_offline(browser, page, server: str, shots: Path, tmp_path: Path) -> None:
    # sign in once
    page.goto("/ui")
    assert page.url.endswith("/ui/login")
    check_page(page, shots, "login")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui")
    (cookie,) = page.context.cookies()  # a signed session, never the key
    assert cookie["name"] == "labelserve_session" and API_KEY not in cookie["value"], cookie
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui", cookie

    # upload a dataset through the form
    X, Y = make_multilabel(n=120, d=6, q=4, seed=3)
    data_file = tmp_path / "generated.csv"
    data_file.write_bytes(csv_bytes(X, Y))
    page.goto("/ui/datasets")
    check_page(page, shots, "datasets")
    page.get_by_label("File (ARFF, CSV, LIBSVM or MAT)").set_input_files(str(data_file))
    page.locator("#label_count").fill("4")  # labelled "label_count ..." by its declaration
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/ui/datasets/*")
    assert "n = 120 rows, d = 6 features, q = 4 labels" in page.inner_text("main")
    dataset_id = page.url.rsplit("/", 1)[1]
    check_page(page, shots, "dataset")

    # train auto and watch the bar move to done
    page.get_by_role("link", name="Train on it").click()
    assert page.locator("#pick-method").input_value() == "auto"
    page.get_by_label("Model name").fill("ui-auto")
    page.get_by_label("cv").fill("3")
    check_page(page, shots, "train")
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_url("**/ui/jobs/*")
    seen: list[tuple[str, float]] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            state = page.evaluate(
                "() => { const p = document.querySelector('.progress'); return p && "
                "[p.dataset.status, p.querySelector('progress').value]; }"
            )
        except PlaywrightError:  # the page reloads itself when the job ends
            continue
        if state:
            seen.append((state[0], float(state[1])))
            if state[0] in ("succeeded", "failed", "cancelled"):
                break
        time.sleep(0.1)
    assert seen[-1] == ("succeeded", 1.0), seen
    assert seen[0][1] < 1.0 and seen[0][0] in ("queued", "running"), seen  # the bar started short of done
    values = [v for _, v in seen]
    assert values == sorted(values), seen  # and only moved forward
    check_page(page, shots, "job")

    # the version page and its report
    page.get_by_role("link", name="Open ui-auto v1").click()
    page.wait_for_url("**/ui/models/ui-auto/versions/1")
    text = page.inner_text("main")
    assert "Selection leaderboard" in text and dataset_id in text
    check_page(page, shots, "version")
    page.get_by_role("link", name="Report on generated.csv").click()
    page.wait_for_load_state("load")
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    assert "Per label: confusion counts" in page.inner_text("body")
    scripts = page.evaluate("() => [...document.scripts].filter(s => s.src).map(s => s.src)")
    assert [urlsplit(src).path for src in scripts] == [f"/ui/assets/plotly-{plotly_version()}.min.js"], scripts
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # plotly redraws its charts for the new width
        accessibility(page, f"version report at {width} px")
        page.screenshot(path=str(shots / f"version-report-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    assert page.failed == []
    saved = keep_offline_file(page, tmp_path / "version-report.html")
    open_offline(browser, saved, "Per label: confusion counts", shots, "version-report-saved")

    # move an alias: prod on v1, then on v2
    with api(server) as client:
        r = client.post("/train?wait=true", json={"method": "br", "dataset_id": dataset_id, "model_name": "ui-auto"})
        assert r.json()["status"] == "succeeded", r.text
    page.goto("/ui/models/ui-auto/versions/1")
    page.get_by_label("Alias", exact=True).fill("prod")
    with page.expect_navigation():  # back to the same address: wait for the new page, not the URL
        page.get_by_role("button", name="Set or move alias").click()
    assert "prod" in page.locator("dl.facts").inner_text()
    page.goto("/ui/models/ui-auto")
    page.get_by_label("Alias", exact=True).fill("prod")
    page.get_by_label("Version", exact=True).fill("2")
    with page.expect_navigation():
        page.get_by_role("button", name="Set or move alias").click()
    assert "prod → v2" in page.inner_text("main")
    check_page(page, shots, "model")
    page.goto("/ui/models")
    check_page(page, shots, "models")

    # predict in the playground
    page.goto("/ui/predict?model=ui-auto%40prod")
    page.get_by_label("Feature rows").fill("\n".join(",".join(f"{v:.4f}" for v in row) for row in X[:4]))
    page.get_by_label("Output").select_option("ranking")
    page.get_by_role("button", name="Predict").click()
    page.locator("table.predictions").wait_for()
    assert "Predictions of ui-auto v2" in page.inner_text("main")
    assert page.locator("table.predictions > tbody > tr").count() == 4
    check_page(page, shots, "predict")

    # cancel a running job from the jobs list
    with api(server) as client:
        r = client.post(
            "/train",
            json={"method": "elcfs", "dataset_id": dataset_id, "model_name": "long",
                  "params": {"max_iter": 1_000_000, "tol": 0.0}},
        )  # fmt: skip
        long_id = r.json()["job_id"]
        deadline = time.monotonic() + 60
        while client.get(f"/jobs/{long_id}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    page.goto("/ui/jobs")
    check_page(page, shots, "jobs")
    with page.expect_navigation():
        page.get_by_role("button", name=f"cancel job {long_id}").click()
    with api(server) as client:
        assert client.get(f"/jobs/{long_id}").json()["status"] == "cancelled"
    assert page.locator(f'.progress[data-job="{long_id}"]').get_attribute("data-status") == "cancelled"

    # the overview, the compare form and a comparison's report
    page.goto("/ui")
    check_page(page, shots, "overview")
    page.goto(f"/ui/compare?dataset_id={dataset_id}")
    for method in ("br", "mlknn", "mi-filter"):
        page.locator(f"#m-{method}").check()
    page.get_by_label("Folds").fill("3")
    check_page(page, shots, "compare")
    page.get_by_role("button", name="Compare", exact=True).click()
    page.wait_for_url("**/ui/jobs/*")
    page.get_by_role("link", name="Open the report").wait_for(timeout=240_000)
    page.get_by_role("link", name="Open the report").click()
    page.wait_for_load_state("load")
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    body = page.inner_text("body")
    assert "Feature selectors" in body and "average_precision ↑" in body
    open_offline(browser, keep_offline_file(page, tmp_path / "compare-report.html"), "Feature selectors", shots,
                 "compare-report-saved")  # fmt: skip
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)
        accessibility(page, f"compare report at {width} px")
        page.screenshot(path=str(shots / f"compare-report-{width}.png"), full_page=True)
    assert page.failed == []


def sign_in(page) -> None:
    page.goto("/ui/login")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui")


def open_report(page, shots: Path, name: str) -> None:
    """A version report opened from the dashboard: its charts drawn, its bar back to the dashboard, axe clean."""
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    assert page.locator("nav.dashboard-bar").count() == 1
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # plotly redraws its charts for the new width
        accessibility(page, f"{name} at {width} px")
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    assert page.failed == [], (name, page.failed)


def test_the_workbench_journey(page, server: str, shots: Path, tmp_path: Path) -> None:
    """Issue 38's "done means", with the dashboard alone: upload, split, train on the train part,
    evaluate on the test part and open the report, find the model by typing, compare two versions
    on the test part, export a zip, delete a dataset no model uses; each page checked at both widths."""
    sign_in(page)

    # upload, then split on the dataset's page
    X, Y = make_multilabel(n=160, d=6, q=4, seed=5)
    data_file = tmp_path / "journey.csv"
    data_file.write_bytes(csv_bytes(X, Y))
    page.goto("/ui/datasets")
    page.get_by_label("File (ARFF, CSV, LIBSVM or MAT)").set_input_files(str(data_file))
    page.locator("#label_count").fill("4")
    page.locator("#name").fill("journey")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/ui/datasets/*")
    page.get_by_label("Test fraction").fill("0.25")
    with page.expect_navigation():
        page.get_by_role("button", name="Split", exact=True).click()
    parts = page.locator("#parts + ul").inner_text()
    assert "journey-train" in parts and "journey-test" in parts, parts
    check_page(page, shots, "dataset-split")

    # train mlknn on the train part: the form offers a name and only multi-label datasets
    page.locator("#parts + ul").get_by_role("link", name="train on it").click()
    page.wait_for_url("**/ui/train?dataset_id=*")
    with page.expect_navigation():
        page.locator("#pick-method").select_option("mlknn")  # the form follows the method (ui.js)
    assert page.get_by_label("Model name").input_value() == "journey-train-mlknn"
    check_page(page, shots, "train-suggested")
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_url("**/ui/jobs/*")
    page.get_by_role("link", name="Open journey-train-mlknn v1").wait_for(timeout=120_000)
    assert page.locator('[data-time="started_at"]').inner_text() != "-"  # filled in while it ran, or on reload
    page.get_by_role("link", name="Open journey-train-mlknn v1").click()
    page.wait_for_url("**/versions/1")

    # evaluate on the held-out part (offered first) and open its report
    first = page.locator("#evaluate-on option").first.inner_text()
    assert first.startswith("journey-test (held out from its training data"), first
    check_page(page, shots, "version-evaluate")
    page.get_by_role("button", name="Evaluate and open the report").click()
    page.wait_for_url("**/report?dataset_id=*")
    assert "on journey-test" in page.inner_text("h1")
    open_report(page, shots, "version-report-held-out")
    page.get_by_role("link", name="← back to journey-train-mlknn v1").click()
    page.wait_for_url("**/versions/1")
    assert "journey-test" in page.locator("#evaluations + div").inner_text()

    # a second version, then find the model by typing part of its name
    with api(server) as client:
        test_id = client.get("/datasets/journey-test").json()["id"]
        body = {"method": "br", "dataset_id": "journey-train", "model_name": "journey-train-mlknn"}
        assert client.post("/train?wait=true", json=body).json()["status"] == "succeeded"
    page.goto("/ui/models")
    page.get_by_label("Name").fill("train-ml")
    with page.expect_navigation():
        page.get_by_label("Name").press("Enter")
    assert "q=train-ml" in page.url and page.locator("table a", has_text="journey-train-mlknn").count() == 1
    assert "1 models · page 1 of 1" in page.inner_text("main")
    check_page(page, shots, "models-found")

    # compare the two versions side by side on the test part
    page.get_by_role("link", name="journey-train-mlknn").first.click()
    page.wait_for_url("**/ui/models/journey-train-mlknn")
    check_page(page, shots, "model-history")
    page.get_by_label("compare v1").check()
    page.get_by_label("compare v2").check()
    page.get_by_role("button", name="Compare the ticked versions (2 to 4)").click()
    page.wait_for_url("**/ui/versions?*")
    assert page.locator("#compare-on").input_value() == test_id
    with page.expect_navigation():
        page.get_by_role("button", name="Evaluate the versions not yet evaluated on it").click()
    with api(server) as client:
        answers = [
            client.post("/evaluate", json={"model": f"journey-train-mlknn@{n}", "dataset_id": test_id}).json()
            for n in (1, 2)
        ]
    row = page.locator("tr", has=page.locator("th", has_text="average_precision")).first.inner_text()
    for answer in answers:
        assert f"{answer['metrics']['average_precision']:.4f}" in row, row
    assert page.locator("table.bars svg.bar").count() == 2 * len(answers[0]["metrics"])
    check_page(page, shots, "versions-compared")

    # export a version's artifact: a zip downloads
    page.goto("/ui/models/journey-train-mlknn/versions/2")
    with page.expect_download() as download:
        page.get_by_role("link", name="Export the artifact (zip)").click()
    saved = tmp_path / "exported.zip"
    download.value.save_as(str(saved))
    with zipfile.ZipFile(saved) as archive:
        assert set(archive.namelist()) == {"model.pkl", "manifest.json"}

    # delete a dataset no model uses (the parent of the split)
    page.goto("/ui/datasets?q=journey")
    check_page(page, shots, "datasets-found")
    page.get_by_role("link", name="journey", exact=True).click()
    page.get_by_label("Type journey to delete").fill("journey")
    page.get_by_role("button", name="Delete dataset").click()
    page.wait_for_url("**/ui/datasets")
    with api(server) as client:
        assert client.get("/datasets/journey").status_code == 404
        assert client.get(f"/datasets/{test_id}").status_code == 200
    assert page.failed == [], page.failed
