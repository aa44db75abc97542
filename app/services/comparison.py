"""Comparison and reports: ``POST /compare`` jobs, their HTML report, and one version's report.

The cross-validation itself runs in the job (``app.jobs.work``, through ``app.evaluation``); what
is checked here, before a job is queued, is everything the request alone can get wrong: the
dataset, whether each named method fits its kind, and the metric.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import scoring
from app.core import Core
from app.errors import Conflict, InvalidInput, NotFound
from app.evaluation import cross_validation, pool, reports
from app.jobs.base import JobStatus
from app.jobs.payloads import ComparePayload
from app.methods.catalog import get_method
from app.methods.mlknn import MLkNN
from app.schemas import CompareRequest, JobOut
from app.services.datasets import dataset_with_features, get_dataset
from app.services.evaluation import DOWNSTREAM_K, label_columns, unscorable
from app.services.jobs import queue_job, time_limit
from app.services.keys import Caller
from app.services.models import load_served, method_of, resolve_version
from app.serving.selected_features import top_features
from app.storage.orm import Dataset, Evaluation, Job, ModelVersion
from app.storage.store import Store


def submit(session: Session, core: Core, body: CompareRequest, caller: Caller) -> JobOut:
    """Check the request and queue its compare job for ``caller``."""
    max_seconds = time_limit(core.settings, body.max_seconds)
    dataset = get_dataset(session, body.dataset_id, loc=("body", "dataset_id"))
    task = pool.task_of(dataset.kind)
    allowed = ("multilabel", "selection") if dataset.kind == "multilabel" else ("distribution",)
    for i, method in enumerate(body.methods or []):
        spec = get_method(method)
        if method in (body.methods or [])[:i]:  # each method costs its cross-validation
            raise InvalidInput(f"method '{method}' is listed twice", loc=("body", "methods", i))
        if spec is None or spec.task not in allowed or spec.dataset_kind != dataset.kind:
            raise InvalidInput(f"method '{method}' does not fit a {dataset.kind} dataset", loc=("body", "methods", i))
    if body.metric is not None and body.metric not in pool.metric_names(task):
        names = ", ".join(pool.metric_names(task))
        raise InvalidInput(f"'{body.metric}' is not a {task} metric ({names})", loc=("body", "metric"))
    if body.cv > dataset.n_samples:
        raise InvalidInput(f"cv={body.cv} exceeds the dataset's {dataset.n_samples} samples", loc=("body", "cv"))
    payload = ComparePayload(
        dataset_id=dataset.id,
        methods=body.methods,
        metric=body.metric,
        cv=body.cv,
        random_state=body.random_state,
        max_seconds=max_seconds,
    )
    return queue_job(session, core, payload, caller)


def report_file(session: Session, store: Store, job_id: str) -> Path:
    """The stored HTML report of a succeeded compare job (``reports.with_scripts`` makes it servable)."""
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


def report_page(session: Session, store: Store, job_id: str) -> str:
    """The compare job's stored report, its plotly bundle still a marker (``reports.with_scripts``
    or ``reports.linked`` finish it)."""
    return report_file(session, store, job_id).read_text(encoding="utf-8")


def report_html(session: Session, store: Store, job_id: str) -> str:
    """The compare job's report as the API serves it: plotly's bundle inlined (it opens offline)."""
    return reports.with_scripts(report_page(session, store, job_id))


def leaderboard_csv(session: Session, store: Store, job_id: str) -> str:
    """The compare job's leaderboard as CSV (``?format=csv``), from its JSON result."""
    document = json.loads(report_file(session, store, job_id).with_suffix(".json").read_text(encoding="utf-8"))
    names = list(document["leaderboard"][0]["metrics"]) if document["leaderboard"] else []
    header = ["rank", "method", "parameters", *[f"{n} {part}" for n in names for part in ("mean", "std")]]
    rows: list[list[object]] = []
    for i, entry in enumerate(document["leaderboard"], 1):
        values = [entry["metrics"][n][part] for n in names for part in ("mean", "std")]
        row = [i, entry["method"], reports.params_text(entry["params"]), *("" if v is None else v for v in values)]
        rows.append([*row, entry.get("fit_seconds") or "", entry.get("error", "")])
    return reports.csv_text([*header, "fit seconds", "error"], rows)


def version_report(core: Core, name: str, version: int, dataset_id: str) -> str:
    """The evaluation report of one version on one dataset as the API serves it (plotly inlined)."""
    return reports.with_scripts(version_report_page(core, name, version, dataset_id))


def version_report_page(core: Core, name: str, version: int, dataset_id: str) -> str:
    """The evaluation report of one version on one dataset, its plotly bundle still a marker;
    nothing is recorded.

    Built once per (version, dataset content, names in its header) and then kept in
    ``core.pages``: none of these change once written, so the cached page is the page a new
    evaluation would build (but for its date, which says when it was built). Its metrics are a
    recorded evaluation's when ``POST /evaluate`` already scored this version on these very rows
    with the defaults the report uses; the rest (predictions, per-label counts, charts) is
    computed here, after the read-only session that read the rows has closed (a report takes
    seconds on large data, and a session held that long keeps a pool connection from others).
    """
    loc = ("query", "dataset_id")
    with core.database.reading() as session:
        row = resolve_version(session, f"{name}@{version}", loc=("path", "name"))
        spec = method_of(row.method)
        dataset = dataset_with_features(session, dataset_id, row.feature_names, loc=loc)
        if dataset.kind != spec.dataset_kind:
            raise InvalidInput(
                f"a {spec.id} model is evaluated on {spec.dataset_kind} data; '{dataset.id}' is {dataset.kind}",
                loc=loc,
            )
        trained = session.get(Dataset, row.dataset_id) if row.dataset_id else None
        key = (row.id, row.created_at, dataset.id, dataset.sha256, dataset.name, trained.name if trained else None)
        page = core.pages.get(key)
        if page is not None:
            return page
        recorded = _recorded_metrics(session, row, dataset)
        selector_training = _selector_training(session, row) if spec.task == "selection" else None
    page = _build_version_report(core, row, spec, dataset, trained, recorded, selector_training)
    core.pages.put(key, page)
    return page


def _build_version_report(
    core: Core,
    row: ModelVersion,
    spec: Any,
    dataset: Dataset,
    trained: Dataset | None,
    recorded: dict[str, float | None] | None,
    selector_training: Dataset | None,
) -> str:
    loc = ("query", "dataset_id")
    model = load_served(core.cache, core.metrics, (row.id, row.created_at)).model
    X, Y = core.store.load_dataset(dataset.sha256)
    Y = Y[:, label_columns(dataset, row)]
    title = f"{row.model_name} v{row.version} ({spec.id}) on {dataset.name}"
    facts = _version_facts(row, trained, dataset, X, Y)
    members = [(m["method"], m.get("params", {}), float(m.get("weight", 1.0))) for m in row.params.get("members", [])]
    try:
        if spec.task == "distribution":
            P = model.predict(X)
            scores = recorded or _finite(scoring.ldl_metrics(Y, P))
            return reports.version_report(
                title=title, task="distribution", scores=scores, label_names=row.label_names, Y=Y, P=P,
                facts=facts, members=members,
            )  # fmt: skip
        if spec.task == "multilabel":
            S, Yhat = model.decision_function(X), model.predict(X)
            scores = recorded or _finite(scoring.multilabel_metrics(Y, Yhat, S))
            return reports.version_report(
                title=title, task="multilabel", scores=scores, label_names=row.label_names, Y=Y, S=S,
                Yhat=Yhat, facts=facts, members=members,
            )  # fmt: skip
        assert selector_training is not None  # read with the rows (``_selector_training``)
        return _selector_report(core.store, row, selector_training, model, X, Y, title, facts)
    except ValueError as exc:
        raise InvalidInput(f"cannot evaluate on '{dataset.id}': {unscorable(exc)}", loc=loc) from None


def _selector_training(session: Session, row: ModelVersion) -> Dataset:
    """The dataset a selector was trained on: its report's downstream classifier trains on it."""
    if row.dataset_id is None:
        raise NotFound("the selector's training dataset is unknown", loc=("query", "dataset_id"))
    return dataset_with_features(session, row.dataset_id, row.feature_names, loc=("query", "dataset_id"))


def _recorded_metrics(session: Session, row: ModelVersion, dataset: Dataset) -> dict[str, float | None] | None:
    """The metrics of the newest ``POST /evaluate`` of this version on these rows (same sha256)
    at the default threshold, which is what the report shows; None when there is none. A
    selector's are left out: its report draws its curve, which the evaluation did not record."""
    if method_of(row.method).task == "selection":
        return None
    found = session.scalars(
        select(Evaluation)
        .where(Evaluation.version_id == row.id, Evaluation.dataset_sha256 == dataset.sha256)
        .order_by(Evaluation.id.desc())
    ).all()
    order = scoring.LDL_METRICS if method_of(row.method).task == "distribution" else scoring.MULTILABEL_METRICS
    for evaluation in found:
        if (evaluation.options or {}).get("threshold") is None and set(order) <= set(evaluation.metrics):
            # in the contract's order (PostgreSQL's JSONB keeps keys in an order of its own)
            return {k: None if evaluation.metrics[k] is None else float(evaluation.metrics[k]) for k in order}
    return None


def _version_facts(
    row: ModelVersion, trained: Dataset | None, evaluated: Dataset, X: np.ndarray, Y: np.ndarray
) -> list[tuple[str, str]]:
    """The report header: the version, what it was trained on (lineage) and what it is evaluated on."""
    esc = html.escape
    trained_on = (
        f"{esc(trained.name)} (<code>{esc(trained.id)}</code>, n = {trained.n_samples}, "
        f"d = {trained.n_features}, q = {trained.n_labels})"
        if trained is not None
        else f"deleted dataset <code>{esc(row.dataset_id or '?')}</code>"
    )
    data = reports.DatasetFacts.of(evaluated.name, evaluated.id, X, Y, multilabel=evaluated.kind == "multilabel")
    libraries = ", ".join(f"{k} {v}" for k, v in sorted(row.library_versions.items()))
    return [
        ("version", f"{esc(row.model_name)} v{row.version}, method {esc(row.method)}, "
         f"params {esc(reports.params_text(row.params))}"),
        ("trained on", trained_on),
        ("training sha256", f"<code>{esc(row.dataset_sha256)}</code>"),
        ("evaluated on", f"{esc(data.name)} (<code>{esc(evaluated.id)}</code>)"),
        ("evaluated size", esc(f"n = {data.n}, d = {data.d}, q = {data.q}"
                              + (f", label cardinality {data.cardinality:.2f}" if data.cardinality is not None else ""))),
        ("libraries", esc(libraries)),
    ]  # fmt: skip


def _selector_report(
    store: Store,
    row: ModelVersion,
    train: Dataset,
    selector: Any,
    X: np.ndarray,
    Y: np.ndarray,
    title: str,
    facts: list[tuple[str, str]],
) -> str:
    """ML-kNN (k=10) on the selector's top features of its training data, at every fraction of ``FRACTIONS``."""
    Xtr, Ytr = store.load_dataset(train.sha256)
    Ytr = Ytr[:, label_columns(train, row)]
    curve: dict[float, float] = {}
    scores: dict[str, float] = {}
    for fraction in cross_validation.FRACTIONS:
        keep = top_features(selector, None, fraction)
        knn = MLkNN(k=DOWNSTREAM_K).fit(Xtr[:, keep], Ytr)
        S = knn.decision_function(X[:, keep])
        curve[fraction] = scoring.average_precision(Y, S)
        if fraction == cross_validation.SELECTOR_FRACTION:
            scores = scoring.multilabel_metrics(Y, knn.predict(X[:, keep]), S)
    note = f"ML-kNN (k={DOWNSTREAM_K}) trained on the top 20% of features of dataset '{train.id}'."
    return reports.version_report(
        title=title, task="selection", scores=_finite(scores), label_names=[], curve=curve, note=note, facts=facts
    )


def _finite(scores: dict[str, float]) -> dict[str, float | None]:
    return {k: float(v) if math.isfinite(v) else None for k, v in scores.items()}
