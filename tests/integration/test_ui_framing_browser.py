"""Another site's page cannot frame the dashboard (clickjacking), in a real browser.

A page served by a second server on another port (another origin) frames a model's page of
``labelserve serve`` (no API key: nothing but the headers keeps the page out of the frame), the
way an attacker would put an invisible "remove alias" button under a visitor's click. Debian's
``chromium``, driven by Playwright as in ``test_ui_browser.py``, must get the answer and refuse
to show it (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``): the frame stays blank. A
frame of the attacker's own origin on the same page renders, so the check sees rendered frames.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.helpers import csv_bytes, launched_chromium, live_server, make_multilabel

pytestmark = pytest.mark.browser

# what the framed page would show, were it shown
SHOWN = "Set or move alias"


class Attacker(BaseHTTPRequestHandler):
    """The other site: a page framing the target, and a page of its own to frame beside it."""

    def __init__(self, *args: object, target: str, **kwargs: object) -> None:
        self.target = target
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        if self.path == "/own.html":
            body = "<!DOCTYPE html><p>the attacker's own frame</p>"
        else:
            body = (
                "<!DOCTYPE html><title>win a prize</title><p>Click the button!</p>"
                f'<iframe name="victim" src="{self.target}" width="800" height="400"></iframe>'
                '<iframe name="own" src="/own.html" width="400" height="100"></iframe>'
            )
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("framing")) as url:
        X, Y = make_multilabel(n=40, d=4, q=3)
        with httpx.Client(base_url=url, timeout=120) as client:
            files = {"file": ("framed.csv", csv_bytes(X, Y), "text/csv")}
            dataset = client.post("/datasets", files=files, data={"label_count": "3"}).json()
            body = {"method": "br", "dataset_id": dataset["id"], "model_name": "framed"}
            assert client.post("/train?wait=true", json=body).json()["status"] == "succeeded"
        yield url


@pytest.fixture
def attacker(server: str) -> Iterator[str]:
    handler = partial(Attacker, target=f"{server}/ui/models/framed")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with launched_chromium() as instance:
        yield instance


def test_another_origin_cannot_frame_the_dashboard(browser, server: str, attacker: str) -> None:
    target = f"{server}/ui/models/framed"
    assert SHOWN in httpx.get(target).text  # the page itself shows it, outside a frame
    context = browser.new_context()
    tab = context.new_page()
    answers: dict[str, dict[str, str]] = {}
    console: list[str] = []
    tab.on("response", lambda response: answers.setdefault(response.url, response.headers))
    tab.on("console", lambda message: console.append(message.text))
    tab.goto(f"{attacker}/attack.html")
    own = tab.frame(name="own")
    assert own is not None
    own.wait_for_load_state("load")
    assert "the attacker's own frame" in own.inner_text("body")  # a frame that may render, renders

    # the service answered the framed request, with the headers that keep it out of frames...
    tab.wait_for_timeout(500)
    assert target in answers, answers.keys()
    assert answers[target]["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answers[target]["content-security-policy"]
    # ...and the browser showed none of it
    victim = tab.frame(name="victim")
    assert victim is not None and victim.url != target, victim.url if victim else None
    shown = victim.evaluate("() => document.body ? document.body.innerText : ''")
    assert SHOWN not in shown and "labelserve" not in shown, shown
    assert any("frame-ancestors 'none'" in text for text in console), console
    context.close()
