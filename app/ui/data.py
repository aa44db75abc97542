"""Every call the dashboard makes into the service layer, in one place.

The pages never touch the database or the store themselves: each function here takes the
application core (``app.core.Core``, on ``app.state.core``) and opens its own session from it,
read-only where it only reads (read-only work and writes alike go through ``app.services``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core import Core
from app.errors import NotFound
from app.evaluation.auto_request import AutoParams
from app.evaluation.pool import default_metric
from app.jobs.base import JobStatus
from app.methods.catalog import catalog, get_method
from app.schemas import (
    CompareRequest,
    DatasetOut,
    DatasetSummary,
    EvaluateRequest,
    EvaluateResponse,
    EvaluationOut,
    JobOut,
    MethodOut,
    ModelOut,
    Page,
    PredictRequest,
    SplitOut,
    SplitRequest,
    TrainRequest,
    VersionOut,
)
from app.services import comparison, datasets, evaluation, export, jobs, methods, models, prediction, splits, training
from app.services.keys import Caller
from app.services.paging import PageParams

#: at most this many datasets or models are offered in a form's choice list
CHOICES = 200
#: models trained on a dataset listed on its page
DATASET_VERSIONS = 50
#: parts split from a dataset listed on its page
DATASET_PARTS = 50
#: versions side by side on the comparison page
COMPARED = 4

JobTimes = dict[str, tuple[datetime | None, datetime | None]]


def _read(core: Core) -> AbstractContextManager[Session]:
    """A read-only session: on SQLite it never takes the write lock other processes wait on."""
    return core.database.reading()


def _write(core: Core) -> AbstractContextManager[Session]:
    return core.database.session()


# ---------------------------------------------------------------------------------- datasets
def list_datasets(state: Core, offset: int, limit: int) -> Page[DatasetSummary]:
    with _read(state) as session:
        return datasets.list_datasets(session, PageParams(limit=limit, offset=offset))


@dataclass
class DatasetView:
    """A dataset's page: the record, its label frequencies and the versions trained on it."""

    dataset: DatasetOut
    label_counts: list[tuple[str, int | float]]
    cardinality: float
    versions: list[VersionOut] = field(default_factory=list)
    parts: list[DatasetSummary] = field(default_factory=list)
    parent_name: str | None = None


def search_datasets(
    state: Core, offset: int, limit: int, kept: datasets.DatasetFilter
) -> tuple[Page[DatasetSummary], int]:
    """A page of the datasets the filter keeps and how many it keeps (two queries)."""
    with _read(state) as session:
        return datasets.search_datasets(session, PageParams(limit=limit, offset=offset), kept)


def dataset_view(state: Core, dataset_id: str) -> DatasetView:
    with _read(state) as session:
        row = datasets.show_dataset(session, state.store, dataset_id)
        versions = models.versions_trained_on(session, row.id, DATASET_VERSIONS)
        parts = datasets.parts_of(session, row.id, DATASET_PARTS)
        parent = datasets.names_of(session, [row.parent_id]) if row.parent_id else {}
    Y = state.store.load_stored(row.sha256).Y  # the labels only: sparse features stay as stored
    counts = np.asarray(Y).sum(axis=0)
    cardinality = float(np.mean((np.asarray(Y) > 0).sum(axis=1))) if len(Y) else 0.0
    pairs = [
        (name, round(float(c), 2) if row.kind == "distribution" else int(c)) for name, c in zip(row.label_names, counts)
    ]
    return DatasetView(row, pairs, cardinality, versions, parts, parent.get(row.parent_id or ""))


def split_dataset(state: Core, dataset_id: str, body: SplitRequest) -> SplitOut:
    with _write(state) as session:
        return splits.split_dataset(session, state.store, dataset_id, body)[0]


def delete_dataset(state: Core, dataset_id: str, caller: Caller, force: bool) -> None:
    with _write(state) as session:
        datasets.delete_dataset(session, state.store, dataset_id, caller, force=force)


def upload_dataset(state: Core, upload: datasets.Upload) -> tuple[DatasetOut, bool]:
    with _write(state) as session:
        return datasets.upload(session, state.store, datasets.limits_of(state.settings), upload)


def dataset_choices(state: Core) -> list[DatasetSummary]:
    return list_datasets(state, 0, CHOICES).items


# ------------------------------------------------------------------------------------ models
def list_models(state: Core, offset: int, limit: int) -> Page[ModelOut]:
    with _read(state) as session:
        return models.list_models(session, PageParams(limit=limit, offset=offset))


def headline(version: VersionOut) -> tuple[str, float | None, str] | None:
    """The latest evaluation's main metric (``average_precision``, or ``chebyshev`` for label
    distributions: what ``auto`` and compare rank by), its value and its dataset; None before any."""
    if not version.evaluations:
        return None
    latest = max(version.evaluations, key=lambda e: e.created_at)
    spec = get_method(version.method)
    metric = default_metric(spec.dataset_kind if spec else "multilabel")
    return metric, latest.metrics.get(metric), latest.dataset_id


def recorded_on(version: VersionOut, dataset_id: str) -> EvaluationOut | None:
    """The newest evaluation of ``version`` on ``dataset_id`` at the default threshold (what
    ``POST /evaluate`` records without options, and what the dashboard's Evaluate sends)."""
    found = [
        e for e in version.evaluations if e.dataset_id == dataset_id and (e.options or {}).get("threshold") is None
    ]
    return max(found, key=lambda e: e.created_at) if found else None


@dataclass
class ModelsView:
    """A page of models, how many the filter keeps, and the names of the datasets their versions show."""

    page: Page[ModelOut]
    total: int
    names: dict[str, str]


def search_models(state: Core, offset: int, limit: int, kept: models.ModelFilter) -> ModelsView:
    """Four queries: the count, the models, their versions with their evaluations, their aliases; and the names."""
    with _read(state) as session:
        found, total = models.search_models(session, PageParams(limit=limit, offset=offset), kept)
        shown = [h[2] for m in found.items if m.versions and (h := headline(m.versions[-1]))]
        names = datasets.names_of(session, shown)
    return ModelsView(found, total, names)


@dataclass
class ModelView:
    """A model's page: the model, the names of the datasets it shows, each version's job times."""

    model: ModelOut
    names: dict[str, str]
    job_times: JobTimes


def model(state: Core, name: str) -> ModelView:
    with _read(state) as session:
        found = models.show_model(session, state.refs, name)
        ids = [i for v in found.versions for i in (v.dataset_id, *(e.dataset_id for e in v.evaluations))]
        names = datasets.names_of(session, ids)
        times = jobs.times_of(session, [v.job_id for v in found.versions])
    return ModelView(found, names, times)


@dataclass
class VersionView:
    """A version's page: the version, the model's aliases, dataset names, its job's times and the
    datasets it can be evaluated on (best first, each with why it is offered)."""

    version: VersionOut
    aliases: dict[str, int]
    names: dict[str, str]
    job_times: JobTimes
    choices: list[tuple[DatasetSummary, str]]


def version(state: Core, name: str, number: int) -> VersionView:
    with _read(state) as session:
        found = models.show_version(session, name, number)
        aliases = models.show_model(session, state.refs, name).aliases
        names = datasets.names_of(session, [found.dataset_id, *(e.dataset_id for e in found.evaluations)])
        times = jobs.times_of(session, [found.job_id])
        spec = get_method(found.method)
        kind = spec.dataset_kind if spec else "multilabel"
        choices = datasets.evaluation_choices(session, kind, found.feature_names, found.label_names, found.dataset_id)
    return VersionView(found, aliases, names, times, choices)


def evaluate(state: Core, name: str, number: int, dataset_id: str) -> EvaluateResponse:
    """``POST /evaluate`` of the version on the dataset (recorded with the version)."""
    return evaluation.evaluate(state, EvaluateRequest(model=f"{name}@{number}", dataset_id=dataset_id))


def export_version(state: Core, name: str, number: int) -> export.Export:
    with _read(state) as session:  # closed before the download starts
        return export.export_version(session, state.store, name, number)


@dataclass
class ComparedVersions:
    """The comparison page: the versions, dataset names, job times, the datasets all of them can be
    evaluated on, the one chosen, and each version's recorded evaluation on it (None: not yet)."""

    versions: list[VersionOut]
    names: dict[str, str]
    job_times: JobTimes
    choices: list[tuple[DatasetSummary, str]]
    dataset_id: str
    recorded: list[EvaluationOut | None]


def compare_versions(state: Core, keys: list[tuple[str, int]], dataset_id: str) -> ComparedVersions:
    """Up to ``COMPARED`` versions side by side (five queries whatever their number)."""
    with _read(state) as session:
        found = models.versions_of(session, keys[:COMPARED])
        first = found[0]
        spec = get_method(first.method)
        kind = spec.dataset_kind if spec else "multilabel"
        same = all(
            v.feature_names == first.feature_names and set(v.label_names) == set(first.label_names) for v in found
        )
        choices = (
            datasets.evaluation_choices(session, kind, first.feature_names, first.label_names, first.dataset_id)
            if same
            else []
        )
        chosen = dataset_id or (choices[0][0].id if choices else "")
        ids = [chosen, *(v.dataset_id for v in found), *(e.dataset_id for v in found for e in v.evaluations)]
        names = datasets.names_of(session, ids)
        times = jobs.times_of(session, [v.job_id for v in found])
    return ComparedVersions(found, names, times, choices, chosen, [recorded_on(v, chosen) for v in found])


def set_alias(state: Core, name: str, alias: str, number: int, caller: Caller) -> None:
    with _write(state) as session:
        models.set_alias(session, state.store, name, alias, number, caller)


def delete_alias(state: Core, name: str, alias: str, caller: Caller) -> None:
    with _write(state) as session:
        models.delete_alias(session, state.store, name, alias, caller)


def delete_version(state: Core, name: str, number: int, caller: Caller) -> None:
    with _write(state) as session:
        models.delete_version(session, state.store, name, number, caller)


def delete_model(state: Core, name: str, caller: Caller) -> None:
    with _write(state) as session:
        models.delete_model(session, state.store, name, caller)


def model_names(state: Core) -> list[str]:
    with _read(state) as session:
        return models.model_names(session, CHOICES)


# -------------------------------------------------------------------------------------- jobs
def list_jobs(state: Core, offset: int, limit: int, status: JobStatus | None) -> tuple[Page[JobOut], dict[str, int]]:
    """A page of jobs and the queue position of those queued."""
    with _read(state) as session:
        found = jobs.list_jobs(session, PageParams(limit=limit, offset=offset), status)
        positions = jobs.queue_positions(session, [j.id for j in found.items if j.status == JobStatus.QUEUED])
    return found, positions


@dataclass
class JobsView:
    """A page of jobs: queue positions, the total, the versions still registered, dataset names."""

    page: Page[JobOut]
    positions: dict[str, int]
    total: int
    registered: set[tuple[str, int]]
    names: dict[str, str]


def jobs_view(state: Core, offset: int, limit: int, status: JobStatus | None) -> JobsView:
    """Five queries whatever the page's length."""
    with _read(state) as session:
        found = jobs.list_jobs(session, PageParams(limit=limit, offset=offset), status)
        positions = {j.id: j.queue_position for j in found.items if j.queue_position is not None}
        total = jobs.count_jobs(session, status)
        registered = models.existing_versions(
            session, [(j.model.name, j.model.version) for j in found.items if j.model]
        )
        names = datasets.names_of(session, [j.dataset_id for j in found.items])
    return JobsView(found, positions, total, registered, names)


def job_view(state: Core, job_id: str) -> JobsView | None:
    """One job as ``jobs_view`` shows a page of them; None when there is none."""
    with _read(state) as session:
        try:
            found = jobs.show_job(session, job_id)
        except NotFound:
            return None
        registered = models.existing_versions(session, [(found.model.name, found.model.version)] if found.model else [])
        names = datasets.names_of(session, [found.dataset_id])
    positions = {found.id: found.queue_position} if found.queue_position is not None else {}
    return JobsView(Page(items=[found], next_offset=None), positions, 1, registered, names)


def jobs_progress(state: Core, job_ids: list[str]) -> list[jobs.JobProgress]:
    """The progress of the given jobs (the pages' poll), in one query; unknown ids are left out."""
    with _read(state) as session:
        return jobs.progress_of(session, job_ids)


def cancel_job(state: Core, job_id: str, caller: Caller) -> JobOut:
    with _write(state) as session:
        return jobs.cancel_job(session, state.runner, job_id, caller)


# ------------------------------------------------------------------------- training, compare
def method_list() -> list[MethodOut]:
    return methods.list_methods(PageParams(limit=len(catalog()) + 1, offset=0)).items


def auto_schema() -> dict[str, Any]:
    return AutoParams.model_json_schema()


def submit_training(state: Core, body: TrainRequest, caller: Caller) -> JobOut:
    return training.submit(state, body, caller)


def submit_comparison(state: Core, body: CompareRequest, caller: Caller) -> JobOut:
    with _write(state) as session:
        return comparison.submit(session, state, body, caller)


# -------------------------------------------------------------------------- predict, reports
def predict(state: Core, body: PredictRequest, caller: Caller) -> prediction.Answer | JobOut:
    return prediction.predict(state, body, caller)


def job_report(state: Core, job_id: str) -> str:
    """The stored report (plotly still a marker: the page links the bundle or inlines it)."""
    with _read(state) as session:
        return comparison.report_page(session, state.store, job_id)


def leaderboard_csv(state: Core, job_id: str) -> str:
    with _read(state) as session:
        return comparison.leaderboard_csv(session, state.store, job_id)


def result_file(state: Core, job_id: str) -> Path:
    with _read(state) as session:
        return jobs.result_file(session, state.store, job_id)


def version_report(state: Core, name: str, number: int, dataset_id: str) -> str:
    """The version's report (plotly still a marker), built once and then kept in ``state.pages``."""
    return comparison.version_report_page(state, name, number, dataset_id)
