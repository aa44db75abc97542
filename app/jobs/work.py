"""What a job does, in whichever process runs it (a local pool process or a remote worker).

Only ids and configuration cross the process boundary; the job reads its request from the
database, its data from the store, and writes its state, progress and result back to both.
State changes are compare-and-set updates (``WHERE status = ...``) so that a cancellation from
the API and the worker's own transitions can never overwrite each other.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import secrets
import socket
import threading
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from app.db import session_scope
from app.jobs.progress import JobProgress
from app.methods.base import JobCancelled
from app.methods.catalog import get_method
from app.orm import Dataset, Job, utcnow
from app.pipeline import SelectedFeatures, top_features
from app.prediction import predict_items
from app.registry import artifact_in_use, library_versions, register_version, resolve
from app.store import Store

log = logging.getLogger("labelserve.jobs")


class Heartbeat:
    """Stamps ``heartbeat_at`` every ``interval`` seconds from a daemon thread while a job runs.

    A reaper in another process (or on another machine) fails ``running`` jobs whose stamp has
    gone stale: their process died without getting to record it (SIGKILL, out of memory, power).
    A thread rather than the progress reports, because a long step between two reports is no
    sign of death. It stops on its own once the job has left ``running``.
    """

    def __init__(self, database_url: str, job_id: str, interval: float) -> None:
        self.database_url = database_url
        self.job_id = job_id
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with session_scope(self.database_url) as session:
                    alive = session.execute(
                        update(Job).where(Job.id == self.job_id, Job.status == "running").values(heartbeat_at=utcnow())
                    ).rowcount
            except Exception:  # a transient database error: the next beat may get through
                log.warning("heartbeat failed", extra={"job_id": self.job_id}, exc_info=True)
                continue
            if not alive:
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def execute_job(job_id: str, database_url: str, model_dir: str, heartbeat_seconds: float | None = None) -> None:
    """Run one queued job to its end state. Safe to call for a job that is no longer queued.

    With ``heartbeat_seconds`` the job stamps ``heartbeat_at`` that often while it runs (see
    ``Heartbeat``); the claim always stamps it once.
    """
    store = Store(Path(model_dir))
    with session_scope(database_url) as session:
        now = utcnow()
        claimed = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(
                status="running",
                stage="starting",
                started_at=now,
                heartbeat_at=now,
                worker=f"{socket.gethostname()}:{os.getpid()}",
            )
        ).rowcount
        job = session.get(Job, job_id)
    if not claimed or job is None:
        return
    extra = {"job_id": job_id}
    log.info("job started", extra=extra | {"kind": job.kind, "method": job.method})
    progress = JobProgress(database_url, job_id)
    beat: AbstractContextManager[object] = (
        Heartbeat(database_url, job_id, heartbeat_seconds) if heartbeat_seconds else nullcontext()
    )
    try:
        with beat:
            if job.kind == "train":
                _train(job, database_url, store, progress)
            else:
                _batch_predict(job, database_url, store, progress)
    except JobCancelled:
        log.info("job cancelled", extra=extra)
    except Exception as exc:  # a failed job must record why, whatever went wrong
        log.error("job failed", extra=extra | {"error": traceback.format_exc()})
        _finish(database_url, job_id, "failed", error=f"{type(exc).__name__}: {exc}")


def _finish(database_url: str, job_id: str, status: str, **values: Any) -> bool:
    with session_scope(database_url) as session:
        return bool(
            session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status == "running")
                .values(status=status, finished_at=utcnow(), **values)
            ).rowcount
        )


def _train(job: Job, database_url: str, store: Store, progress: JobProgress) -> None:
    request = job.request
    spec = get_method(request["method"])
    if spec is None:
        raise ValueError(f"unknown method '{request['method']}'")
    with session_scope(database_url) as session:
        dataset = session.get(Dataset, request["dataset_id"])
        if dataset is None:
            raise LookupError(f"dataset '{request['dataset_id']}' no longer exists")
        selector_ref = request.get("feature_selector")
        selector_row = resolve(session, selector_ref["model"]) if selector_ref else None
    progress("loading data", 0.0)
    X, Y = store.load_dataset(dataset.sha256)
    params = dict(request.get("params") or {})
    if "random_state" in spec.params.model_fields and params.get("random_state") is None:
        # An unseeded training records the seed it drew, so every version is reproducible.
        seed = request.get("random_state")
        params["random_state"] = secrets.randbelow(2**31) if seed is None else seed
    estimator = spec.build(params)
    indices = None
    if selector_row is not None:
        selector = store.load_artifact(selector_row.artifact_sha256)
        indices = top_features(selector, selector_ref.get("top_k"), selector_ref.get("top_fraction"))
        X = X[:, indices]
    started = time.perf_counter()
    estimator.fit(X, Y, progress=progress)
    seconds = time.perf_counter() - started
    progress("saving", 1.0)
    artifact: Any = estimator
    if indices is not None:
        artifact = SelectedFeatures(estimator, indices, selector_ref["model"])
    sha256 = store.save_artifact(artifact)
    full_params = spec.params.model_validate(params).model_dump(mode="json")
    if selector_row is not None:
        full_params["feature_selector"] = {
            **selector_ref,
            "resolved": f"{selector_row.model_name}@{selector_row.version}",
            "feature_indices": indices.tolist(),
        }
    with session_scope(database_url) as session:
        job_row = session.execute(select(Job).where(Job.id == job.id).with_for_update()).scalar_one()
        if job_row.status != "running":  # cancelled while fitting: register nothing
            if not artifact_in_use(session, sha256):
                store.delete_artifact(sha256)
            return
        version = register_version(
            session,
            request["model_name"],
            method=spec.id,
            params=full_params,
            dataset_id=dataset.id,
            dataset_sha256=dataset.sha256,
            feature_names=dataset.feature_names,
            label_names=dataset.label_names,
            metrics=None,
            training_seconds=seconds,
            library_versions=library_versions(),
            artifact_sha256=sha256,
            job_id=job.id,
        )
        job_row.status = "succeeded"
        job_row.stage = "done"
        job_row.progress = 1.0
        job_row.finished_at = utcnow()
        job_row.model_version = version.version
    log.info("job succeeded", extra={"job_id": job.id, "seconds": round(seconds, 3)})


def _batch_predict(job: Job, database_url: str, store: Store, progress: JobProgress) -> None:
    """Predict a stored dataset in chunks and write JSON lines or CSV to the results folder."""
    request = job.request
    with session_scope(database_url) as session:
        version = resolve(session, request["model"])
        dataset = session.get(Dataset, request["dataset_id"])
        if dataset is None:
            raise LookupError(f"dataset '{request['dataset_id']}' no longer exists")
    model = store.load_artifact(version.artifact_sha256)
    X, _ = store.load_dataset(dataset.sha256)
    fmt = request.get("format", "jsonl")
    path = store.result_path(job.id, fmt)
    tmp = path.with_suffix(".part")
    labels = version.label_names
    chunk = 2000
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh) if fmt == "csv" else None
        if writer is not None:
            writer.writerow(["row", "labels"] if request["output"] == "labels" else ["row", *labels])
        for start in range(0, X.shape[0], chunk):
            progress("predicting", start / X.shape[0])
            items = predict_items(
                model,
                request["output"],
                X[start : start + chunk],
                labels,
                threshold=request.get("threshold"),
                top_k=request.get("top_k"),
                include_scores=request.get("include_scores", False),
            )
            for row, item in enumerate(items, start=start):
                if writer is None:
                    fh.write(json.dumps({"row": row, **item}) + "\n")
                else:
                    writer.writerow(_csv_row(row, item, labels))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    if not _finish(database_url, job.id, "succeeded", stage="done", progress=1.0, result_path=path.name):
        path.unlink(missing_ok=True)


def _csv_row(row: int, item: dict[str, Any], labels: list[str]) -> list[Any]:
    """One CSV row: the label set joined by ';', or one score column per label."""
    if "labels" in item:
        return [row, ";".join(item["labels"])]
    values = item.get("distribution") or {e["label"]: e["score"] for e in item["ranking"]}
    return [row, *(values.get(name, "") for name in labels)]
