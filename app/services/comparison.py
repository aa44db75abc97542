"""Comparison and reports: ``POST /compare`` jobs, their HTML report, and one version's report.

The cross-validation itself runs in the job (``app.jobs.work``, through ``app.selection``); what
is checked here, before a job is queued, is everything the request alone can get wrong: the
dataset, whether each named method fits its kind, and the metric.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app import metrics, reports, selection
from app.core import Core
from app.errors import Conflict, InvalidInput, NotFound
from app.jobs.base import JobStatus
from app.jobs.payloads import ComparePayload
from app.jobs.queue import enqueue
from app.methods.catalog import get_method
from app.methods.mlknn import MLkNN
from app.observability import Metrics
from app.orm import Job, ModelVersion
from app.pipeline import top_features
from app.registry import ModelCache
from app.schemas import CompareRequest, JobOut
from app.services.datasets import dataset_with_features, get_dataset
from app.services.evaluation import DOWNSTREAM_K, label_columns
from app.services.jobs import job_out
from app.services.registry import load_served, method_of, resolve_version
from app.store import Store


def submit(session: Session, core: Core, body: CompareRequest) -> JobOut:
    """Check the request and queue its compare job."""
    dataset = get_dataset(session, body.dataset_id, loc=("body", "dataset_id"))
    task = selection.task_of(dataset.kind)
    allowed = ("multilabel", "selection") if dataset.kind == "multilabel" else ("distribution",)
    for i, method in enumerate(body.methods or []):
        spec = get_method(method)
        if spec is None or spec.task not in allowed or spec.dataset_kind != dataset.kind:
            raise InvalidInput(f"method '{method}' does not fit a {dataset.kind} dataset", loc=("body", "methods", i))
    if body.metric is not None and body.metric not in selection.metric_names(task):
        names = ", ".join(selection.metric_names(task))
        raise InvalidInput(f"'{body.metric}' is not a {task} metric ({names})", loc=("body", "metric"))
    if body.cv > dataset.n_samples:
        raise InvalidInput(f"cv={body.cv} exceeds the dataset's {dataset.n_samples} samples", loc=("body", "cv"))
    payload = ComparePayload(
        dataset_id=dataset.id, methods=body.methods, metric=body.metric, cv=body.cv, random_state=body.random_state
    )
    return job_out(enqueue(session, core.runner, payload))


def report_file(session: Session, store: Store, job_id: str) -> Path:
    """The HTML report of a succeeded compare job."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"job '{job_id}' not found", loc=("path", "job_id"))
    if job.kind != ComparePayload.kind:
        raise NotFound(f"job '{job_id}' is a {job.kind} job; only compare jobs have a report", loc=("path", "job_id"))
    if job.status != JobStatus.SUCCEEDED or not job.result_path:
        raise Conflict(f"job '{job_id}' is {job.status}; its report is not ready")
    path = (store.results / job.result_path).with_suffix(".html")
    if not path.exists():
        raise NotFound(f"the report of job '{job_id}' is no longer in the store")
    return path


def version_report(
    session: Session, store: Store, cache: ModelCache, observed: Metrics, name: str, version: int, dataset_id: str
) -> str:
    """The evaluation report (HTML) of one version on one dataset; nothing is recorded."""
    row = resolve_version(session, f"{name}@{version}", loc=("path", "name"))
    spec = method_of(row.method)
    loc = ("query", "dataset_id")
    dataset = dataset_with_features(session, dataset_id, row.feature_names, loc=loc)
    if dataset.kind != spec.dataset_kind:
        raise InvalidInput(
            f"a {spec.id} model is evaluated on {spec.dataset_kind} data; '{dataset.id}' is {dataset.kind}", loc=loc
        )
    model = load_served(cache, observed, (row.id, row.created_at)).model
    X, Y = store.load_dataset(dataset.sha256)
    Y = Y[:, label_columns(dataset, row)]
    title = f"{row.model_name} v{row.version} ({spec.id}) on {dataset.name}"
    try:
        if spec.task == "distribution":
            P = model.predict(X)
            scores = metrics.ldl_metrics(Y, P)
            return reports.version_report(
                title=title, task="distribution", scores=_finite(scores), label_names=row.label_names, Y=Y, P=P
            )
        if spec.task == "multilabel":
            S, Yhat = model.decision_function(X), model.predict(X)
            scores = metrics.multilabel_metrics(Y, Yhat, S)
            return reports.version_report(
                title=title, task="multilabel", scores=_finite(scores), label_names=row.label_names, Y=Y, S=S, Yhat=Yhat
            )
        return _selector_report(session, store, row, model, X, Y, title)
    except ValueError as exc:
        raise InvalidInput(f"cannot evaluate on '{dataset.id}': {exc}", loc=loc) from None


def _selector_report(
    session: Session, store: Store, row: ModelVersion, selector: Any, X: np.ndarray, Y: np.ndarray, title: str
) -> str:
    """ML-kNN (k=10) on the selector's top features of its training data, at every fraction of ``FRACTIONS``."""
    if row.dataset_id is None:
        raise NotFound("the selector's training dataset is unknown", loc=("query", "dataset_id"))
    train = dataset_with_features(session, row.dataset_id, row.feature_names, loc=("query", "dataset_id"))
    Xtr, Ytr = store.load_dataset(train.sha256)
    Ytr = Ytr[:, label_columns(train, row)]
    curve: dict[float, float] = {}
    scores: dict[str, float] = {}
    for fraction in selection.FRACTIONS:
        keep = top_features(selector, None, fraction)
        knn = MLkNN(k=DOWNSTREAM_K).fit(Xtr[:, keep], Ytr)
        S = knn.decision_function(X[:, keep])
        curve[fraction] = metrics.average_precision(Y, S)
        if fraction == selection.SELECTOR_FRACTION:
            scores = metrics.multilabel_metrics(Y, knn.predict(X[:, keep]), S)
    note = f"ML-kNN (k={DOWNSTREAM_K}) trained on the top 20% of features of dataset '{train.id}'."
    return reports.version_report(
        title=title, task="selection", scores=_finite(scores), label_names=[], curve=curve, note=note
    )


def _finite(scores: dict[str, float]) -> dict[str, float | None]:
    return {k: float(v) if math.isfinite(v) else None for k, v in scores.items()}
