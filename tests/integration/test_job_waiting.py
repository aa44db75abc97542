"""Waiting for a job without polling: the in-process events, the database fallback, and real
servers whose fallback poll is a minute long (so an answer within seconds proves it was the
notification), for ``POST /train?wait=true``, ``GET /jobs/{id}?wait=`` and the client's wait."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.client import Client
from app.jobs import transitions
from app.jobs.base import JobStatus
from app.jobs.events import JobEvents
from app.jobs.queue import wait_for
from app.storage.db import Database, migrate
from tests.helpers import LiveServer, csv_bytes, make_multilabel, running_job

SLOW_FALLBACK = "60"  # seconds: any answer much sooner came from a notification


@pytest.fixture
def url(database_url: str) -> str:
    migrate(database_url)
    return database_url


def finish_later(url: str, job_id: str, delay: float, events: JobEvents | None) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        with Database(url).session() as session:
            assert transitions.succeed(session, job_id, model_version=1)
        if events is not None:
            events.notify(job_id)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_notification_wakes_the_waiter_at_once(url: str):
    events = JobEvents(fallback=60.0)
    job_id = running_job(url)
    thread = finish_later(url, job_id, 0.2, events)
    started = time.monotonic()
    job = asyncio.run(wait_for(Database(url), events, job_id, timeout=30))
    thread.join()
    assert job is not None and job.status == JobStatus.SUCCEEDED
    assert time.monotonic() - started < 10  # not the 60 s fallback
    assert events.waiting() == 0  # the waiter unregistered


def test_without_notification_the_database_still_answers(url: str):
    events = JobEvents(fallback=0.2)  # nobody notifies: only the fallback reads can see the end
    job_id = running_job(url)
    thread = finish_later(url, job_id, 0.5, None)
    job = asyncio.run(wait_for(Database(url), events, job_id, timeout=30))
    thread.join()
    assert job is not None and job.status == JobStatus.SUCCEEDED


def test_a_spurious_notification_does_not_end_the_wait_and_timeout_returns_the_job_as_it_is(url: str):
    events = JobEvents(fallback=60.0)
    job_id = running_job(url)

    async def scenario() -> JobStatus:
        waiter = asyncio.create_task(wait_for(Database(url), events, job_id, timeout=0.8))
        await asyncio.sleep(0.2)
        events.notify(job_id)  # the job has not ended: the waiter reads the row and goes on waiting
        job = await waiter
        assert job is not None
        return JobStatus(job.status)

    started = time.monotonic()
    assert asyncio.run(scenario()) == JobStatus.RUNNING
    assert time.monotonic() - started >= 0.8


def test_waiting_for_an_unknown_job_is_none(url: str):
    assert asyncio.run(wait_for(Database(url), JobEvents(), "0" * 32, timeout=5)) is None


# real servers -----------------------------------------------------------------------------------
@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path, {"LABELSERVE_WAIT_POLL_SECONDS": SLOW_FALLBACK})
    try:
        yield live.start()
        live.stop()
    finally:
        live.cleanup()


def upload(client: Client, tmp_path: Path, n: int = 60) -> str:
    X, Y = make_multilabel(n=n)
    path = tmp_path / "data.csv"
    path.write_bytes(csv_bytes(X, Y))
    return str(client.upload_dataset(path, label_count=3)["id"])


@pytest.mark.slow
def test_train_wait_returns_when_the_pool_process_is_done(server: LiveServer, tmp_path: Path):
    with Client(server.url) as client:
        dataset = upload(client, tmp_path)
        for attempt in range(3):
            started = time.monotonic()
            response = client.request(
                "POST",
                "/train",
                params={"wait": "true"},
                json={"method": "mlknn", "dataset_id": dataset, "model_name": "m", "params": {"k": 3}},
            )
            assert response.status_code == 200 and response.json()["status"] == "succeeded"
            assert time.monotonic() - started < 20, f"attempt {attempt}: waited for the fallback poll"


def long_training(dataset: str) -> dict:
    """A training that runs until it is cancelled (ELCFS with no convergence)."""
    return {
        "method": "elcfs",
        "dataset_id": dataset,
        "model_name": "long",
        "params": {"max_iter": 1_000_000, "tol": 0.0},
    }


@pytest.mark.slow
def test_job_long_poll_answers_at_the_end_or_after_the_wait(server: LiveServer, tmp_path: Path):
    with Client(server.url) as client:
        dataset = upload(client, tmp_path)
        job_id = client.request("POST", "/train", json=long_training(dataset)).json()["job_id"]
        started = time.monotonic()
        held = client.request("GET", f"/jobs/{job_id}", params={"wait": 1.0}).json()
        assert held["status"] in ("queued", "running") and time.monotonic() - started >= 1.0
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(client.wait, job_id, poll=45.0)
            time.sleep(1.0)
            client.cancel_job(job_id)  # the API commits the end itself and tells the waiters
            started = time.monotonic()
            job = waiting.result(timeout=30)
        assert job["status"] == "cancelled" and time.monotonic() - started < 15
        missing = client.http.get("/jobs/" + "0" * 32, params={"wait": 5})
        assert missing.status_code == 404
        bad = client.http.get(f"/jobs/{job_id}", params={"wait": -1})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "wait"]


@pytest.mark.slow
def test_client_wait_sees_the_end_without_polling_and_reports_progress(server: LiveServer, tmp_path: Path):
    with Client(server.url) as client:
        dataset = upload(client, tmp_path)
        accepted = client.train("mlknn", dataset, "followed", params={"k": 3})
        updates: list[dict] = []
        started = time.monotonic()
        job = client.wait(accepted["job_id"], poll=45.0, on_update=updates.append)
        assert job["status"] == "succeeded" and time.monotonic() - started < 20
        assert updates[-1] == job


def test_a_job_this_process_will_not_hear_about_is_read_often(url: str):
    events = JobEvents(fallback=60.0, hears=lambda job_id: False)  # another process's pool runs it
    assert events.interval("any") == 0.25 and JobEvents(fallback=60.0).interval("any") == 60.0
    job_id = running_job(url)
    thread = finish_later(url, job_id, 0.5, None)  # and nobody here is told
    started = time.monotonic()
    job = asyncio.run(wait_for(Database(url), events, job_id, timeout=30))
    thread.join()
    assert job is not None and job.status == JobStatus.SUCCEEDED.value
    assert time.monotonic() - started < 10  # not the 60 s fallback


@pytest.mark.slow
def test_a_waiter_on_another_api_process_sees_the_end_soon(tmp_path: Path):
    """Two API processes on one database and store; the job runs in the first one's pool and ends
    there (cancelled): a waiter on the second hears nothing, and reads the row often."""
    env = {"LABELSERVE_WAIT_POLL_SECONDS": SLOW_FALLBACK, "LABELSERVE_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}"}
    first, second = LiveServer(tmp_path, env), LiveServer(tmp_path, env)
    try:
        first.start()
        second.start()
        with Client(first.url) as owner, Client(second.url) as other:
            dataset = upload(owner, tmp_path)
            job_id = owner.request("POST", "/train", json=long_training(dataset)).json()["job_id"]
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(lambda: other.request("GET", f"/jobs/{job_id}", params={"wait": 30}).json())
                time.sleep(1.0)
                owner.cancel_job(job_id)
                ended = time.monotonic()
                job = waiting.result(timeout=60)
            assert job["status"] == "cancelled" and time.monotonic() - ended < 10
        first.stop()
        second.stop()
    finally:
        first.cleanup()
        second.cleanup()
