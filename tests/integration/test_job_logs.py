"""What job processes say: JSON log lines with the ``job_id`` from a real ``labelserve serve``'s
pool process (start, each stage, end with seconds, failure with its error), the cheaper progress
reports (stages kept in memory, written by a thread), and the model a batch prediction job used."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.client import Client
from app.jobs import transitions
from app.jobs.work import JobProgress, check_rows
from app.methods.base import JobCancelled
from app.storage.db import Database, migrate
from app.storage.orm import Job
from tests.helpers import LiveServer, csv_bytes, make_multilabel, running_job, train, upload_csv, wait_status


def json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            lines.append(entry)
    return lines


def of_job(lines: list[dict], job_id: str) -> dict[str, list[dict]]:
    by_message: dict[str, list[dict]] = {}
    for entry in lines:
        if entry.get("job_id") == job_id:
            by_message.setdefault(entry["message"], []).append(entry)
    return by_message


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path, {"LABELSERVE_LOG_LEVEL": "INFO"})
    try:
        yield live.start()
    finally:
        live.cleanup()


@pytest.mark.slow
def test_pool_processes_log_json_lines_with_the_job_id(server: LiveServer, tmp_path: Path):
    X, Y = make_multilabel(n=60)
    good = tmp_path / "good.csv"
    good.write_bytes(csv_bytes(X, Y))
    # fewer distinct rows than clusters: the request is valid, only the fit can tell
    dupes = tmp_path / "dupes.csv"
    dupes.write_bytes(csv_bytes(np.repeat(np.random.default_rng(0).random((3, 4)), 10, axis=0), np.full((30, 2), 0.5)))
    with Client(server.url) as client:
        dataset = client.upload_dataset(good, label_count=3)["id"]
        ok = client.request(
            "POST", "/train?wait=true", json={"method": "mlknn", "dataset_id": dataset, "model_name": "m"}
        ).json()
        broken = client.upload_dataset(dupes, label_count=2)["id"]
        bad = client.request(
            "POST",
            "/train?wait=true",
            json={"method": "ldlkm", "dataset_id": broken, "model_name": "b", "params": {"k": 5}},
        ).json()
    assert ok["status"] == "succeeded" and bad["status"] == "failed"
    server.stop()
    lines = json_lines(server.log.read_text())

    good_lines = of_job(lines, ok["id"])
    (started,) = good_lines["job started"]
    assert started["kind"] == "train" and started["method"] == "mlknn" and started["level"] == "INFO"
    assert started["logger"] == "labelserve.jobs"
    assert int(started["worker"].rpartition(":")[2]) != server.process.pid  # a pool process said it
    stages = [entry["stage"] for entry in good_lines["job stage"]]
    assert stages[0] == "loading data" and stages[-2:] == ["checking", "saving"]
    assert len(stages) == len(set(stages))  # one line per stage change, not per report
    seconds = [entry["seconds"] for entry in good_lines["job stage"]]
    assert seconds == sorted(seconds)
    (ended,) = good_lines["job succeeded"]
    assert ended["seconds"] >= seconds[-1] and ended["seconds"] < 60

    bad_lines = of_job(lines, bad["id"])
    assert "job started" in bad_lines
    (raised,) = bad_lines["job raised"]
    assert raised["level"] == "ERROR" and raised["error"] == bad["error"] and "seconds" in raised
    assert "Traceback" in raised["traceback"]
    (failed,) = bad_lines["job failed"]
    assert failed["error"] == bad["error"]


# progress reports -------------------------------------------------------------------------------
@pytest.fixture
def url(database_url: str) -> str:
    migrate(database_url)
    return database_url


def row(url: str, job_id: str) -> Job:
    with Database(url).session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def test_reports_are_written_by_the_thread_and_a_cancel_stops_the_next_report(url: str):
    job_id = running_job(url)
    with JobProgress(Database(url), job_id, heartbeat_seconds=0.3, interval=0.05) as progress:
        progress("fitting", 0.5)
        assert row(url, job_id).stage == "starting"  # the report itself did not write
        deadline = time.monotonic() + 10
        while row(url, job_id).stage != "fitting":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert row(url, job_id).progress == 0.5
        beat = row(url, job_id).heartbeat_at
        time.sleep(0.8)  # no report: the thread stamps the heartbeat on its own
        assert row(url, job_id).heartbeat_at > beat
        with Database(url).session() as session:
            assert transitions.cancel(session, job_id)
        progress("fitting", 0.6)  # the thread writes this one, and finds the job cancelled
        deadline = time.monotonic() + 10
        with pytest.raises(JobCancelled):
            while True:
                assert time.monotonic() < deadline, "the cancel was never noticed"
                progress("fitting", 0.7)
                time.sleep(0.02)
    assert row(url, job_id).stage == "cancelled"  # a report after the cancel changed nothing


def test_the_output_check_predicts_a_few_ordinary_and_the_most_extreme_rows():
    X = np.random.default_rng(0).random((500, 4))
    X[[100, 250], 2] = [1e12, -1e12]
    sample = check_rows(X, rows=8)
    assert sample.shape[0] <= 16 and {1e12, -1e12} <= set(sample[:, 2])
    assert np.array_equal(sample[:8], X[:8])
    small = X[:10]
    assert check_rows(small, rows=8) is small


# lineage ----------------------------------------------------------------------------------------
def test_a_batch_prediction_job_records_its_model(client: TestClient):
    X, Y = make_multilabel(n=40)
    dataset = upload_csv(client, X, Y)
    train(client, "mlknn", dataset["id"], "clf", k=5)
    train(client, "mlknn", dataset["id"], "clf", k=3)
    client.app.state.settings.batch_job_rows = 10
    r = client.post("/predict", json={"model": "clf@1", "dataset_id": dataset["id"]})
    assert r.status_code == 202, r.text
    assert r.json()["model"] == {"name": "clf", "version": 1}
    job = wait_status(client, r.json()["id"], ("succeeded", "failed"))
    assert job["status"] == "succeeded" and job["model"] == {"name": "clf", "version": 1}
