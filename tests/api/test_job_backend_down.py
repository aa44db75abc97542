"""The Celery backend with its broker down (a Redis URL at a closed port): ``/ready`` says so,
job submits answer 503 with ``Retry-After`` and store nothing, and the API's subscription to
ended jobs backs off instead of logging a traceback every second."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.jobs import events
from app.jobs.events import JobEvents, RedisJobEnded
from app.main import create_app
from tests.helpers import make_multilabel, upload_csv

CLOSED_PORT = "redis://127.0.0.1:1/15"


@pytest.fixture
def down(settings: Settings) -> Iterator[TestClient]:
    broken = settings.model_copy(update={"job_backend": "celery", "broker_url": CLOSED_PORT})
    with TestClient(create_app(broken)) as client:
        yield client


def _stored(client: TestClient) -> tuple[int, int]:
    return len(client.get("/jobs").json()["items"]), len(client.get("/datasets").json()["items"])


def test_ready_says_the_job_backend_cannot_queue(down):
    r = down.get("/ready")
    assert r.status_code == 503, r.text
    assert r.json()["status"] == "not ready" and r.json()["job_backend"] == "unreachable"
    assert r.json()["database"] == "ok" and r.json()["model_store"] == "ok"
    assert down.get("/v2/health/ready").status_code == 503


def test_submits_answer_503_with_retry_after_and_store_nothing(down):
    X, Y = make_multilabel(n=30)
    dataset = upload_csv(down, X, Y, "toy")
    inline = {"X": X[:10].tolist(), "Y": Y[:10].tolist()}
    for path, body in (
        ("/train", {"method": "br", "dataset_id": dataset["id"], "model_name": "m"}),
        ("/train?wait=true", {"method": "br", "data": inline, "model_name": "m"}),
        ("/compare", {"dataset_id": dataset["id"], "cv": 2}),
    ):
        r = down.post(path, json=body)
        assert r.status_code == 503, (path, r.text)
        assert r.headers["Retry-After"] == "5"
        assert "job broker is unreachable; nothing was stored" in r.json()["detail"]
    assert _stored(down) == (0, 1)  # no job, and the inline data were not stored either


def test_a_send_that_fails_after_the_probe_withdraws_the_job(down):
    """The broker went down between the probe and the send: the job row is withdrawn."""
    X, Y = make_multilabel(n=30)
    dataset = upload_csv(down, X, Y, "toy")
    down.app.state.core.runner.can_queue = lambda: True  # the probe's cached answer, made stale
    r = down.post("/train", json={"method": "br", "dataset_id": dataset["id"], "model_name": "m"})
    assert r.status_code == 503 and r.headers["Retry-After"] == "5", r.text
    assert _stored(down) == (0, 1)


def test_the_ended_jobs_subscription_backs_off_and_traces_once_a_minute(monkeypatch, caplog):
    monkeypatch.setattr(events, "RELAY_RETRY_FIRST", 0.01)
    monkeypatch.setattr(events, "RELAY_RETRY_MAX", 0.08)
    stop = threading.Event()
    attempts: list[float] = []
    subscriber = RedisJobEnded(CLOSED_PORT, "labelserve:test:job-ended")
    connect = subscriber._redis

    def counted():
        attempts.append(time.monotonic())
        return connect()

    monkeypatch.setattr(subscriber, "_redis", counted)
    thread = threading.Thread(target=subscriber.relay, args=(JobEvents(), stop))
    with caplog.at_level(logging.DEBUG, logger="labelserve.jobs"):
        thread.start()
        time.sleep(1.0)
        stop.set()
        thread.join(5)
    subscriber.close()
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    assert 5 <= len(attempts) <= 25, attempts  # 1 s of 10 ms, 20 ms, 40 ms, then 80 ms apart
    assert gaps[-1] > 3 * gaps[0]
    traced = [r for r in caplog.records if r.exc_info and "subscription" in r.getMessage()]
    assert len(traced) == 1, [r.getMessage() for r in traced]
