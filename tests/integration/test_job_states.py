"""The job state machine on a real database (SQLite and PostgreSQL): which transition applies
from which state, the recovery rules, the typed payloads, and the package's shape (one module
writes job state; no import cycle)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.jobs import transitions
from app.jobs.base import ACTIVE, TERMINAL, JobStatus
from app.jobs.payloads import (
    PAYLOAD_FORMAT,
    BatchPredictPayload,
    ComparePayload,
    SelectorChoice,
    TrainPayload,
    load_payload,
)
from app.storage.db import Database, migrate
from app.storage.orm import Job, utcnow

JOBS_PACKAGE = Path(__file__).resolve().parents[2] / "app" / "jobs"
APP = JOBS_PACKAGE.parent

PAYLOAD = TrainPayload(method="mlknn", dataset_id="d1", model_name="m", params={"k": 3})

# transition name -> (call, the states it applies from, the state it leads to)
Transition = Callable[[Session, str], bool]
TRANSITIONS: dict[str, tuple[Transition, set[JobStatus], JobStatus | None]] = {
    "claim": (lambda s, j: transitions.claim(s, j, "host:1") is not None, {JobStatus.QUEUED}, JobStatus.RUNNING),
    "progress": (lambda s, j: transitions.report_progress(s, j, "fitting", 0.5), {JobStatus.RUNNING}, None),
    "beat": (transitions.beat, {JobStatus.RUNNING}, None),
    "succeed": (lambda s, j: transitions.succeed(s, j, model_version=1), {JobStatus.RUNNING}, JobStatus.SUCCEEDED),
    "fail": (lambda s, j: bool(transitions.fail(s, j, "boom")), set(ACTIVE), JobStatus.FAILED),
    "cancel": (transitions.cancel, set(ACTIVE), JobStatus.CANCELLED),
}


@pytest.fixture
def url(database_url: str) -> str:
    migrate(database_url)
    return database_url


def job_in(url: str, status: JobStatus, **fields: object) -> str:
    with Database(url).session() as session:
        job = transitions.create(session, PAYLOAD)
        job.status = status.value
        for name, value in fields.items():
            setattr(job, name, value)
        return job.id


def status_of(url: str, job_id: str) -> JobStatus:
    with Database(url).session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return JobStatus(job.status)


def test_create_queues_the_payload(url: str) -> None:
    with Database(url).session() as session:
        job_id = transitions.create(session, PAYLOAD).id
    with Database(url).session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        assert (job.status, job.kind, job.method, job.dataset_id, job.model_name) == (
            "queued",
            "train",
            "mlknn",
            "d1",
            "m",
        )
        assert load_payload(job.kind, job.request) == PAYLOAD


@pytest.mark.parametrize("name", list(TRANSITIONS))
def test_each_transition_applies_exactly_from_its_source_states(url: str, name: str) -> None:
    call, sources, target = TRANSITIONS[name]
    for start in JobStatus:
        job_id = job_in(url, start)
        with Database(url).session() as session:
            applied = call(session, job_id)
        assert applied == (start in sources), (name, start)
        expected = (target or start) if applied else start
        assert status_of(url, job_id) == expected, (name, start)


def test_terminal_states_are_never_left(url: str) -> None:
    assert TERMINAL | ACTIVE == set(JobStatus) and not TERMINAL & ACTIVE
    for start in TERMINAL:
        job_id = job_in(url, start)
        for call, _, _ in TRANSITIONS.values():
            with Database(url).session() as session:
                assert not call(session, job_id)
        assert status_of(url, job_id) == start


def test_a_claim_records_who_runs_the_job_and_a_second_claim_loses(url: str) -> None:
    job_id = job_in(url, JobStatus.QUEUED)
    with Database(url).session() as session:
        job = transitions.claim(session, job_id, "host-a:10")
        assert job is not None and job.worker == "host-a:10" and job.started_at is not None
    with Database(url).session() as session:
        assert transitions.claim(session, job_id, "host-b:20") is None
        job = session.get(Job, job_id)
        assert job is not None and job.worker == "host-a:10"


def test_cancel_records_why_and_succeed_records_the_version(url: str) -> None:
    cancelled, succeeded = job_in(url, JobStatus.RUNNING), job_in(url, JobStatus.RUNNING)
    with Database(url).session() as session:
        assert transitions.cancel(session, cancelled)
        assert transitions.succeed(session, succeeded, model_version=7)
    with Database(url).session() as session:
        job = session.get(Job, cancelled)
        assert job is not None and job.error == "cancelled by request" and job.finished_at is not None
        job = session.get(Job, succeeded)
        assert job is not None and (job.model_version, job.progress, job.stage) == (7, 1.0, "done")


def test_recovery_after_a_crash_fails_running_jobs_and_keeps_queued_ones(url: str) -> None:
    running, queued = job_in(url, JobStatus.RUNNING), job_in(url, JobStatus.QUEUED)
    with Database(url).session() as session:
        assert transitions.fail_interrupted(session) == [running]
        assert transitions.queued(session) == [queued]
    with Database(url).session() as session:
        job = session.get(Job, running)
        assert job is not None and job.status == "failed" and "interrupted" in (job.error or "")


def test_the_reaper_fails_only_running_jobs_with_a_stale_heartbeat(url: str) -> None:
    old = utcnow() - timedelta(seconds=120)
    stale = job_in(url, JobStatus.RUNNING, heartbeat_at=old)
    fresh = job_in(url, JobStatus.RUNNING, heartbeat_at=utcnow())
    waiting = job_in(url, JobStatus.QUEUED, created_at=old)
    with Database(url).session() as session:
        assert transitions.fail_stale(session, 60.0) == [stale]
    assert (status_of(url, fresh), status_of(url, waiting)) == (JobStatus.RUNNING, JobStatus.QUEUED)


def test_an_orphan_is_failed_only_if_the_dead_process_still_owns_it(url: str) -> None:
    job_id = job_in(url, JobStatus.RUNNING, worker="host:2")
    with Database(url).session() as session:
        assert not transitions.fail_orphan(session, job_id, "host:1")  # redelivered and re-claimed elsewhere
        assert transitions.fail_orphan(session, job_id, "host:2")
    assert status_of(url, job_id) == JobStatus.FAILED


def test_payloads_are_typed_and_rows_of_0_1_still_load() -> None:
    legacy = {"method": "mlknn", "dataset_id": "d", "model_name": "m", "params": {}, "data": None}  # a 0.1.x row
    assert load_payload("train", legacy) == TrainPayload(
        method="mlknn", dataset_id="d", model_name="m", payload_format=1
    )
    current = TrainPayload(method="mlknn", dataset_id="d", model_name="m")
    assert current.model_dump(mode="json")["payload_format"] == PAYLOAD_FORMAT == 2
    assert load_payload("train", current.model_dump(mode="json")) == current
    with pytest.raises(ValueError, match="queued by a newer release"):
        load_payload("train", current.model_dump(mode="json") | {"payload_format": PAYLOAD_FORMAT + 1})
    batch = BatchPredictPayload(model="m@2", dataset_id="d", output="ranking", format="csv")
    assert load_payload("predict", batch.model_dump(mode="json")) == batch
    selected = TrainPayload(
        method="mlknn", dataset_id="d", model_name="m", feature_selector=SelectorChoice(model="sel", top_k=3)
    )
    assert load_payload("train", selected.model_dump(mode="json")).feature_selector == SelectorChoice(
        model="sel", top_k=3
    )
    with pytest.raises(ValidationError):
        load_payload("train", {"method": "mlknn"})  # no dataset, no model name
    compare = ComparePayload(dataset_id="d", methods=["br", "rf"], cv=3)
    assert load_payload("compare", compare.model_dump(mode="json")) == compare
    with pytest.raises(ValueError, match="unknown job kind"):
        load_payload("evaluate", {})


def _module_imports(path: Path) -> set[str]:
    """Modules imported at module level (not inside functions) by the file at ``path``."""
    imported = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return imported


def test_the_jobs_package_has_no_import_cycle() -> None:
    modules = {f"app.jobs.{p.stem}": p for p in JOBS_PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph = {name: {m for m in _module_imports(path) if m in modules} for name, path in modules.items()}
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        assert name not in visiting, f"import cycle: {' -> '.join([*trail, name])}"
        if name in done:
            return
        visiting.add(name)
        for dependency in graph[name]:
            visit(dependency, [*trail, name])
        visiting.discard(name)
        done.add(name)

    for name in graph:
        visit(name, [])
    assert "app.jobs.celery_backend" not in graph["app.jobs.local"]
    assert "app.jobs.local" not in graph["app.jobs.celery_backend"]


def test_only_the_transitions_module_writes_job_rows() -> None:
    """An ``update(Job)`` anywhere else would be a state change the state machine does not know."""
    writers = []
    for path in APP.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "update"
                and any(isinstance(arg, ast.Name) and arg.id == "Job" for arg in node.args)
            ):
                writers.append(str(path.relative_to(APP)))
    assert writers == ["jobs/transitions.py"]
