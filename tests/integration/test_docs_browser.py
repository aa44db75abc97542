"""The interactive docs in a real browser on a host with no route off the machine.

Debian's ``chromium`` runs headless, driven by Playwright (never a browser of Playwright's own),
with every host name but 127.0.0.1 unresolvable, against ``labelserve serve`` on a free port.
``/docs`` and ``/redoc`` must render and list the operations, and the Swagger UI's "Authorize"
and "Try it out" must upload a dataset, train a model and predict with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.api import examples
from tests.helpers import launched_chromium, live_server

# ReDoc's bundle always links its "API docs by Redocly" footer logo to Redocly's CDN; the image
# removes itself when it cannot load, so it is the one request that may fail (the page's
# Content-Security-Policy, img-src 'self', refuses it before the network could).
REDOC_FOOTER_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
API_KEY = "browser-key"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with launched_chromium() as instance:
        yield instance


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("docs"), env={"LABELSERVE_API_KEY": API_KEY}) as url:
        yield url


def csp_violation(tab, text: str) -> None:
    """A script, style or request the page's Content-Security-Policy refused (Chromium's console says so)."""
    if "Content Security Policy" in text:
        tab.failed.append(f"refused by the page's policy: {text}")


@pytest.fixture
def page(browser, server: str) -> Iterator[object]:
    """A fresh page that records every request the browser could not complete."""
    context = browser.new_context(base_url=server)
    tab = context.new_page()
    tab.failed = []
    tab.on("requestfailed", lambda request: tab.failed.append(f"{request.url}: {request.failure}"))
    tab.on("pageerror", lambda error: tab.failed.append(f"script error: {error}"))
    tab.on("console", lambda message: csp_violation(tab, message.text))
    yield tab
    context.close()


def operation(page, method: str, path: str):
    """The Swagger UI block of one operation, expanded and switched to "Try it out"."""
    block = page.locator(f".opblock-{method}").filter(has=page.locator(f'[data-path="{path}"]')).first
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    return block


def execute(block) -> tuple[int, dict]:
    """Press Execute and read the live response's status and JSON body."""
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table .response .response-col_status").first
    status.wait_for(timeout=60_000)
    body = block.locator(".live-responses-table .response-col_description pre").first.inner_text()
    return int(status.inner_text().split()[0]), json.loads(body)


def documented_operations(page) -> list[tuple[str, str, str]]:
    """(method, path, summary) of every operation the service's OpenAPI document declares."""
    spec = page.request.get("/openapi.json").json()
    return [
        (method, path, entry["summary"]) for path, methods in spec["paths"].items() for method, entry in methods.items()
    ]


def test_docs_render_offline_and_list_the_operations(page) -> None:
    page.goto("/docs")
    page.locator(".opblock").first.wait_for()
    pairs = page.locator(".opblock").evaluate_all(
        "els => els.map(e => [e.querySelector('.opblock-summary-method').innerText.toLowerCase(),"
        " e.querySelector('.opblock-summary-path').dataset.path])"
    )
    shown = {(method, path) for method, path in pairs}
    expected = {(method, path) for method, path, _ in documented_operations(page)}
    assert len(expected) > 20 and shown == expected
    assert page.locator("button.authorize").is_visible()
    assert page.failed == []


def test_redoc_renders_offline_and_lists_the_operations(page) -> None:
    page.goto("/redoc")
    page.locator("h2").first.wait_for()
    headings = set(page.locator("h2").all_inner_texts())
    missing = [summary for _, _, summary in documented_operations(page) if summary not in headings]
    assert missing == []
    assert [failure for failure in page.failed if REDOC_FOOTER_LOGO not in failure] == []


def test_authorize_then_try_it_out_uploads_trains_and_predicts(page) -> None:
    page.goto("/docs")
    page.locator(".opblock").first.wait_for()

    page.locator("button.authorize").click()
    dialog = page.locator(".modal-ux")
    scheme = dialog.locator(".auth-container").filter(has_text="X-API-Key")
    scheme.locator("input").fill(API_KEY)
    scheme.locator("button.authorize").click()
    scheme.get_by_text("Authorized").wait_for()  # Swagger UI now holds the key
    dialog.locator("button.close-modal").click()

    upload = operation(page, "post", "/datasets")
    guide = upload.locator(".opblock-description-wrapper").first.inner_text()
    ids = {}
    # every upload example through the form, as its description (shown above the form) says; the one
    # with a labels_file last, as a chosen file is not taken back
    for name in sorted(examples.UPLOAD, key=lambda name: len(examples.UPLOAD_SAMPLES[name])):
        example = examples.UPLOAD[name]
        assert example["summary"] in guide, name
        for field in ("name", "label_count", "label_columns", "n_features"):
            box = upload.locator(f'tr[data-property-name="{field}"] input[type="text"]')
            assert ids or box.input_value() == "", field  # nothing made up to clear
            box.fill(str(example["value"].get(field, "")))
        for field, sample in examples.UPLOAD_SAMPLES[name].items():
            upload.locator(f'tr[data-property-name="{field}"] input[type="file"]').set_input_files(
                str(SAMPLES / sample)
            )
        if ids:
            upload.locator("button.btn-clear").click()  # the last answer, so that execute reads the new one
        status, dataset = execute(upload)
        assert status == 201 and dataset["name"] == examples.UPLOAD_SAMPLES[name]["file"], (name, dataset)
        ids[name] = dataset["id"]
    assert ids["csv"] == examples.TOY and ids["arff"] == examples.SHAPES_TRAIN

    train = operation(page, "post", "/train")
    train.locator('tr[data-param-name="wait"] select').select_option("true")
    train.locator(".opblock-section-request-body .examples-select select").select_option("mlknn")
    assert json.loads(train.locator("textarea.body-param__text").input_value()) == examples.TRAIN["mlknn"]["value"]
    status, job = execute(train)
    assert status == 200 and job["status"] == "succeeded", job

    predict = operation(page, "post", "/predict")  # its first example: labels from that model
    status, predicted = execute(predict)
    assert status == 200, predicted
    assert predicted["model"]["name"] == "toy-mlknn" and len(predicted["predictions"]) == 2
    assert page.failed == []
