"""Every call the dashboard makes into the service layer, in one place.

The pages never touch the database or the store themselves: each function here takes the
application core (``app.core.Core``, on ``app.state.core``) and opens its own session from it,
read-only where it only reads (read-only work and writes alike go through ``app.services``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core import Core
from app.errors import NotFound
from app.evaluation.auto_request import AutoParams
from app.jobs.base import JobStatus
from app.methods.catalog import catalog
from app.schemas import (
    CompareRequest,
    DatasetOut,
    DatasetSummary,
    JobOut,
    MethodOut,
    ModelOut,
    Page,
    PredictRequest,
    TrainRequest,
    VersionOut,
)
from app.services import comparison, datasets, jobs, methods, models, prediction, training
from app.services.keys import Caller
from app.services.paging import PageParams

#: at most this many datasets or models are offered in a form's choice list
CHOICES = 200
#: models trained on a dataset listed on its page
DATASET_VERSIONS = 50


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


def dataset_view(state: Core, dataset_id: str) -> DatasetView:
    with _read(state) as session:
        row = datasets.show_dataset(session, state.store, dataset_id)
        versions = models.versions_trained_on(session, dataset_id, DATASET_VERSIONS)
    Y = state.store.load_stored(row.sha256).Y  # the labels only: sparse features stay as stored
    counts = np.asarray(Y).sum(axis=0)
    cardinality = float(np.mean((np.asarray(Y) > 0).sum(axis=1))) if len(Y) else 0.0
    pairs = [
        (name, round(float(c), 2) if row.kind == "distribution" else int(c)) for name, c in zip(row.label_names, counts)
    ]
    return DatasetView(row, pairs, cardinality, versions)


def upload_dataset(state: Core, upload: datasets.Upload) -> tuple[DatasetOut, bool]:
    with _write(state) as session:
        return datasets.upload(session, state.store, datasets.limits_of(state.settings), upload)


def dataset_choices(state: Core) -> list[DatasetSummary]:
    return list_datasets(state, 0, CHOICES).items


# ------------------------------------------------------------------------------------ models
def list_models(state: Core, offset: int, limit: int) -> Page[ModelOut]:
    with _read(state) as session:
        return models.list_models(session, PageParams(limit=limit, offset=offset))


def model(state: Core, name: str) -> ModelOut:
    with _read(state) as session:
        return models.show_model(session, state.refs, name)


def version(state: Core, name: str, number: int) -> tuple[VersionOut, dict[str, int]]:
    """The version and the model's aliases."""
    with _read(state) as session:
        found = models.show_version(session, name, number)
        aliases = models.show_model(session, state.refs, name).aliases
    return found, aliases


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


def jobs_by_id(state: Core, job_ids: list[str]) -> tuple[list[JobOut], dict[str, int]]:
    """The given jobs as they are now; unknown ids are left out."""
    found = []
    with _read(state) as session:
        for job_id in job_ids:
            try:
                found.append(jobs.show_job(session, job_id))
            except NotFound:
                continue
        positions = jobs.queue_positions(session, [j.id for j in found if j.status == JobStatus.QUEUED])
    return found, positions


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
