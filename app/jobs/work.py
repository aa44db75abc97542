"""What a job does, in whichever process runs it (a local pool process or a remote worker).

Only ids and configuration cross the process boundary; the job reads its payload from the
database, its data from the store, and writes its progress and result back to both. Every state
change goes through ``app.jobs.transitions`` (compare-and-set), so a cancellation from the API
and the worker's own transitions can never overwrite each other.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import socket
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.core import Core
from app.errors import DomainError, InvalidInput, raised_by_the_service
from app.evaluation import auto_request, choice, pool, reports
from app.jobs import peak_memory, transitions
from app.jobs.payloads import BatchPredictPayload, ComparePayload, TrainPayload, load_payload
from app.methods import fit_warnings
from app.methods.base import MB, JobCancelled, MethodSpec, ProgressFn, data_shape, draw_seed, fit_input
from app.methods.catalog import get_method
from app.methods.memory_bounds import MemoryBudget, fitting
from app.registry.versions import drop_unused_artifacts, library_versions, register_version, resolve
from app.serving.answers import label_matrix, predict_items
from app.serving.selected_features import SelectedFeatures, top_features
from app.storage.db import Database
from app.storage.db_errors import retry_transient
from app.storage.orm import Dataset, Job, ModelVersion
from app.storage.store import DENSE_MAX_CELLS, Store

log = logging.getLogger("labelserve.jobs")


class JobTimedOut(JobCancelled):
    """The job ran past its time limit: it stops as a cancelled one does (every layer that lets a
    cancellation through lets this through), then fails with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class TimeLimit:
    """How long a job may run, and whose limit that is (the failed job's error names it)."""

    seconds: float
    requested: bool  # the request's max_seconds (else the server's LABELSERVE_MAX_JOB_SECONDS)
    server: float  # the server's limit, which a request's may approach

    @classmethod
    def of(cls, server: float, requested: float | None) -> TimeLimit:
        """The tighter of the server's limit and the request's.

        The request's is refused at submit when it exceeds the server's, but a job queued before
        the server's limit was lowered may still carry a larger one: the server's then applies.
        """
        if requested is not None and requested < server:
            return cls(requested, True, server)
        return cls(server, False, server)

    def exceeded(self, seconds: float) -> str:
        """The failed job's error: which limit stopped it, and which setting would let it run longer."""
        if self.requested:
            whose = "the request's time limit is {:g} s (max_seconds)"
            longer = f"give a larger max_seconds, up to the server's {self.server:g} s"
        else:
            whose = "the server's job time limit is {:g} s (LABELSERVE_MAX_JOB_SECONDS)"
            longer = "raise LABELSERVE_MAX_JOB_SECONDS for longer jobs"
        return (
            f"stopped after {seconds:.0f} s: {whose.format(self.seconds)}; {longer}, "
            "or train on fewer rows or with a smaller search (cv, tune, methods)"
        )


class JobProgress:
    """The job's reports while it runs: the ``(stage, fraction)`` callable given to ``fit``, the
    heartbeat, the cancellation check and the stage log lines, in one daemon thread.

    A report only records the stage in memory (and logs a stage change); the thread writes the
    latest one every ``interval`` seconds when it changed, else stamps the heartbeat every
    ``heartbeat_seconds``. So a small job writes no progress at all (it used to commit one row
    per stage, a few milliseconds each, more than the fit of a small dataset), a long one shows
    its stage within ``interval``, and no report ever waits for the database.

    Every write applies only while the job is still ``running``; once one finds it cancelled (or
    failed by a reaper that thought this process dead), the next report raises ``JobCancelled``
    and the fit stops at that safe point. A reaper in another process fails ``running`` jobs
    whose heartbeat has gone stale: their process died without recording it (SIGKILL, out of
    memory). A thread rather than the reports stamps it, because a long step between two
    reports is no sign of death.

    ``limit`` (``LABELSERVE_MAX_JOB_SECONDS``, or the request's tighter ``max_seconds``): the first
    report after that many seconds raises ``JobTimedOut``, so a 114-byte ``auto`` request cannot
    hold a training process for twenty minutes; like cancellation, the fit stops at a report, not
    in the middle of a step. The payload sets it once it is read (``execute_job``).
    """

    def __init__(
        self,
        database: Database,
        job_id: str,
        *,
        heartbeat_seconds: float | None = None,
        interval: float = 0.25,
        limit: TimeLimit | None = None,
    ) -> None:
        self.database = database
        self.limit = limit
        self.job_id = job_id
        self.interval = interval
        self.heartbeat_seconds = heartbeat_seconds
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._pending: tuple[str, float] | None = None
        self._ended = threading.Event()  # the row left ``running``: the job must stop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{job_id}", daemon=True)

    def seconds(self) -> float:
        """Seconds since the job was claimed (what the log lines carry)."""
        return round(time.monotonic() - self.started, 4)

    def __call__(self, stage: str, fraction: float) -> None:
        if self._ended.is_set():
            raise JobCancelled(self.job_id)
        limit = self.limit
        if limit is not None and time.monotonic() - self.started > limit.seconds:
            raise JobTimedOut(limit.exceeded(self.seconds()))
        with self._lock:
            changed = stage != self._stage
            self._stage, self._pending = stage, (stage, fraction)
        if changed:
            log.info(
                "job stage",
                extra={
                    "job_id": self.job_id,
                    "stage": stage,
                    "progress": round(fraction, 4),
                    "seconds": self.seconds(),
                },
            )

    def _write(self, pending: tuple[str, float] | None) -> bool:
        with self.database.session() as session:
            if pending is not None:
                return transitions.report_progress(session, self.job_id, *pending)
            return transitions.beat(session, self.job_id)

    def _run(self) -> None:
        tick = min(self.interval, self.heartbeat_seconds or self.interval)
        beat_due = time.monotonic() + (self.heartbeat_seconds or float("inf"))
        while not self._stop.wait(tick):
            with self._lock:
                pending, self._pending = self._pending, None
            if pending is None and time.monotonic() < beat_due:
                continue
            try:
                alive = self._write(pending)
            except Exception:  # a transient database error: the next round may get through
                log.warning("progress or heartbeat write failed", extra={"job_id": self.job_id}, exc_info=True)
                with self._lock:
                    self._pending = self._pending or pending
                continue
            beat_due = time.monotonic() + (self.heartbeat_seconds or float("inf"))
            if not alive:
                self._ended.set()
                return

    def __enter__(self) -> JobProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def worker_identity() -> str:
    """``host:pid`` of this process, recorded on the jobs it claims (orphan detection reads it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_gone(worker: str) -> bool:
    """True when ``worker`` (``host:pid``) names a process of this host that no longer runs
    (it does not exist, or it is a zombie: dead, not yet reaped by its parent)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's process: only its heartbeat can tell
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by someone else
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (not Linux): existence is all we can tell
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def run_job(job_id: str, settings: Settings) -> int | None:
    """A pool process's entry point: ``execute_job`` with this process's core for ``settings``.

    Returns the process's resident high-water mark during the job (bytes; None where unknown),
    by which the local runner replaces a process that grew large (``LABELSERVE_RECYCLE_WORKER_MB``).
    """
    peak_memory.reset_peak()
    execute_job(job_id, Core.for_worker(settings))
    return peak_memory.peak_bytes()


def execute_job(job_id: str, core: Core) -> None:
    """Run one queued job to its end state. Safe to call for a job that is no longer queued.

    With ``settings.heartbeat_seconds`` the job stamps ``heartbeat_at`` that often while it runs
    (see ``JobProgress``); the claim always stamps it once. Logs the start, each stage, and the
    end with its seconds (or the failure with its error) as JSON lines carrying ``job_id``.
    """
    database, store = core.database, core.store
    model_dir = str(core.settings.model_dir.resolve())

    def claim() -> tuple[str, dict[str, Any]] | None:
        with database.session() as session:
            job = transitions.claim(session, job_id, worker_identity())
            return None if job is None else (job.kind, job.request)

    claimed = retry_transient(claim, what="claim")
    if claimed is None:
        return
    kind, request = claimed
    extra = {"job_id": job_id, "kind": kind}
    progress = JobProgress(database, job_id, heartbeat_seconds=core.settings.heartbeat_seconds)
    try:
        payload = load_payload(kind, request)
        progress.limit = TimeLimit.of(core.settings.max_job_seconds, payload.max_seconds)
        with progress:
            if isinstance(payload, TrainPayload):
                budget = MemoryBudget(core.settings.max_model_mb, DENSE_MAX_CELLS)
                succeeded = _train(job_id, payload, database, store, progress, budget)
            elif isinstance(payload, ComparePayload):
                succeeded = _compare(job_id, payload, database, store, progress)
            else:
                succeeded = _batch_predict(job_id, payload, database, store, progress)
        if succeeded:
            log.info("job succeeded", extra=extra | {"seconds": progress.seconds()})
        else:
            log.info("job stopped: it was cancelled", extra=extra | {"seconds": progress.seconds()})
    except JobTimedOut as exc:
        log.warning("job stopped: time limit", extra=extra | {"seconds": progress.seconds()})
        message = exc.message
        retry_transient(lambda: _record_failure(database, job_id, message), what="fail")
    except JobCancelled:
        log.info("job stopped: it was cancelled", extra=extra | {"seconds": progress.seconds()})
    except Exception as exc:  # a failed job must record why, whatever went wrong
        error = public_error(exc, model_dir)
        log.error(
            "job raised",
            extra=extra | {"seconds": progress.seconds(), "error": error, "traceback": traceback.format_exc()},
        )
        retry_transient(lambda: _record_failure(database, job_id, error), what="fail")


def _succeed_with(database: Database, job_id: str, result_path: str) -> bool:
    with database.session() as session:
        return transitions.succeed(session, job_id, result_path=result_path)


def _record_failure(database: Database, job_id: str, error: str) -> None:
    with database.session() as session:
        transitions.fail(session, job_id, error)


_PATH = re.compile(r"(?:[A-Za-z]:)?[/\\][\w.-]+(?:[/\\][\w.-]+)+")


def public_error(exc: BaseException, model_dir: str) -> str:
    """What a failed job shows its user: the service's own explanation, never its internals.

    Domain errors and the checks the service's own code raises (a ``ValueError`` from a method's
    ``fit``, such as ``k=50 exceeds ...``, or a ``LookupError`` for a dataset deleted meanwhile) say what was wrong with the request; anything else (a
    library's exception text, SQL, file paths, row ids) stays in the server log, and the job
    says only what kind of failure it was. Paths are removed from the shown messages too.
    """
    if isinstance(exc, DomainError):
        message = exc.message
    elif isinstance(exc, MemoryError):
        return "the job ran out of memory; train on a smaller dataset or with smaller parameters"
    elif isinstance(exc, (ValueError, LookupError)) and not isinstance(exc, KeyError) and raised_by_the_service(exc):
        message = str(exc)
    else:
        return "the job failed because of an internal error; the server log has the details"
    return _PATH.sub("<path>", message.replace(model_dir, "<store>"))


def machine_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def bound_n_jobs(params: dict[str, Any]) -> None:
    """Clamp an ``n_jobs`` parameter to this machine: ``-1`` or more than the CPUs means every CPU.

    A thread per requested job (100000 of them) exhausted the training process; more threads than
    CPUs never make a fit faster. The recorded parameters say what was actually used.
    """
    requested = params.get("n_jobs")
    if isinstance(requested, int) and not isinstance(requested, bool):
        cpus = machine_cpus()
        params["n_jobs"] = cpus if requested == -1 or requested > cpus else max(1, requested)


def _bounded_member(member: Any) -> Any:
    """A blend member with ``bound_n_jobs`` applied to its params (anything else as given: the
    blend's own parameter check refuses it)."""
    if not isinstance(member, dict) or not isinstance(member.get("params"), dict):
        return member
    params = dict(member["params"])
    bound_n_jobs(params)
    return {**member, "params": params}


def check_rows(X: np.ndarray, rows: int = 8) -> np.ndarray:
    """The training rows the output check predicts: the first ``rows`` and the ``rows`` most extreme.

    Extreme rows (largest absolute feature value) are where non-finite outputs come from; a few
    ordinary ones catch a model that is broken everywhere. Predicting 1000 rows, as the check
    first did, cost more than fitting a small dataset (ML-kNN on scene: 84 ms against a 54 ms fit).
    """
    if X.shape[0] <= 2 * rows:
        return X
    with np.errstate(all="ignore"):
        if sparse.issparse(X):  # CSR: the largest stored value of each row (implicit zeros are 0)
            magnitude = np.asarray(abs(X).max(axis=1).toarray()).ravel() if X.shape[1] else np.zeros(X.shape[0])
        else:
            magnitude = np.abs(X).max(axis=1) if X.shape[1] else np.zeros(X.shape[0])
    extreme = np.argpartition(-magnitude, rows)[:rows]
    return X[np.union1d(np.arange(rows), extreme)]


def fit_details(estimator: Any) -> dict[str, Any] | None:
    """The fitted attributes the method declares worth recording on the version
    (``recorded_attributes``), by name without the trailing underscore; None when it has none."""
    names = getattr(type(estimator), "recorded_attributes", ())
    if not names:
        return None
    details: dict[str, Any] = {}
    for name in names:
        value = getattr(estimator, name, None)
        details[name.rstrip("_")] = value.item() if isinstance(value, np.generic) else value
    return details


def check_outputs(task: str, estimator: Any, X: np.ndarray) -> None:
    """Refuse to register a model that cannot honour its output contract on its own training rows.

    Distributions must be finite, non-negative and sum to 1; classifier scores finite and label
    sets 0/1; selector scores finite with a ranking of every feature. A model fitted on extreme
    (though finite) data can break these while fitting "succeeds", and would then answer every
    prediction with nulls. The rows checked are ``check_rows(X)``.
    """
    sample = check_rows(X)
    problem = ""
    # the private twins the service predicts with (``app.serving.answers``): the rows are training
    # rows, already validated, and scikit-learn's checks were a third of the step's time
    with np.errstate(all="ignore"):
        if task == "distribution":
            P = np.asarray(estimator._predict(sample), dtype=np.float64)
            if not np.isfinite(P).all() or (P < -1e-9).any() or (np.abs(P.sum(axis=1) - 1.0) > 1e-6).any():
                problem = "label distributions that are not finite, non-negative rows summing to 1"
        elif task == "multilabel":
            scores = np.asarray(estimator._decision_function(sample), dtype=np.float64)
            labels = np.asarray(label_matrix(estimator, sample, None)[0])
            if not np.isfinite(scores).all():
                problem = "label scores that are not finite"
            elif not np.isin(labels, (0, 1)).all():
                problem = "label sets that are not 0/1"
        elif task == "selection":
            scores = np.asarray(estimator.feature_scores_, dtype=np.float64)
            ranking = np.sort(np.asarray(estimator.ranking_))
            if not np.isfinite(scores).all():
                problem = "feature scores that are not finite"
            elif not np.array_equal(ranking, np.arange(X.shape[1])):
                problem = "a feature ranking that does not rank every feature once"
    if problem:
        raise InvalidInput(
            f"the fitted model gives {problem} on its training data, so it was not registered; the "
            "data are probably too extreme or degenerate for this method (rescale the features, or try "
            "other parameters)"
        )


def _scaled(progress: ProgressFn, start: float, stop: float, prefix: str = "") -> ProgressFn:
    """``progress`` for one phase of a job: fractions mapped into [start, stop], stages prefixed."""

    def report(stage: str, fraction: float) -> None:
        progress(f"{prefix}{stage}", start + (stop - start) * min(max(fraction, 0.0), 1.0))

    return report


@dataclass(frozen=True)
class _TrainingData:
    """What a training reads before it computes: the dataset row and arrays, and the columns a
    feature selector keeps (with the selector's version, for the record)."""

    dataset: Dataset
    X: Any  # dense, or CSR for a method that accepts_sparse
    Y: np.ndarray
    indices: np.ndarray | None = None
    selector: ModelVersion | None = None


@dataclass(frozen=True)
class _Fitted:
    """A fitted estimator with what its version records about the fit."""

    spec: MethodSpec
    estimator: Any
    params: dict[str, Any]
    seconds: float
    warnings: list[dict[str, Any]]
    selection: dict[str, Any] | None = None
    #: the fit's estimated and measured memory (MB): ``estimate_peak``, ``estimate_model``,
    #: ``measured_peak`` (resident growth during the fit), ``resident_peak``; ``artifact`` once saved
    memory: dict[str, float] | None = None


def _train(
    job_id: str, plan: TrainPayload, database: Database, store: Store, progress: JobProgress, budget: MemoryBudget
) -> bool:
    """Execute a training plan (``TrainPayload``, decided at submit): read, fit (after a selection
    for ``auto``), check, save and register; False when the job was cancelled meanwhile (nothing
    registered). The parameters were validated at submit and ``fit`` checks them again; the job
    only bounds ``n_jobs`` by this machine."""
    data = _training_data(plan, database, store, progress)
    if plan.method == pool.AUTO:
        fitted = _select_and_fit(plan, data, progress, budget)
    else:
        spec = get_method(plan.method)
        if spec is None:
            raise ValueError(f"unknown method '{plan.method}'")
        fitted = _fit(spec, _machine_params(spec, plan), data, progress)
    progress("checking", 1.0)
    check_outputs(fitted.spec.task, fitted.estimator, data.X)
    progress("saving", 1.0)
    return _register(job_id, plan, data, fitted, database, store)


def _training_data(plan: TrainPayload, database: Database, store: Store, progress: ProgressFn) -> _TrainingData:
    """The plan's dataset (and selector) rows, read in a read-only session closed before the arrays load."""
    chosen = plan.feature_selector
    with database.reading() as session:
        dataset = session.get(Dataset, plan.dataset_id)
        if dataset is None:
            raise LookupError(f"dataset '{plan.dataset_id}' no longer exists")
        selector = resolve(session, chosen.model) if chosen is not None else None
    progress("loading data", 0.0)
    X, Y = _features(plan, store, dataset.sha256)
    if chosen is None or selector is None:
        return _TrainingData(dataset, X, Y)
    indices = top_features(store.load_artifact(selector.artifact_sha256), chosen.top_k, chosen.top_fraction)
    return _TrainingData(dataset, X[:, indices], Y, indices, selector)


def _features(plan: TrainPayload, store: Store, sha256: str) -> tuple[Any, np.ndarray]:
    """The dataset as the plan's method takes it: in its stored form (CSR kept) for a method that
    ``accepts_sparse``, else dense (densified by the store under its bound; ``auto`` too, whose
    candidates differ). Targets as float64."""
    spec = get_method(plan.method)
    if spec is not None and spec.estimator.accepts_sparse:
        arrays = store.load_stored(sha256)
        return fit_input(spec.estimator, arrays.X), arrays.Y.astype(np.float64)
    return store.load_dataset(sha256)


def _machine_params(spec: MethodSpec, plan: TrainPayload) -> dict[str, Any]:
    """The plan's parameters with ``n_jobs`` bounded by this machine (and a blend's members' too).

    A 0.1.x row (payload format 1) gave only the requested names and left the seed to the job:
    the others get their declared defaults and the seed is drawn here, as it was then.
    """
    declared = spec.params.model_fields
    given = plan.params
    defaults = {name: f.get_default(call_default_factory=True) for name, f in declared.items() if name not in given}
    complete = {**defaults, **given}  # not validated again: that was done at submit, and fit checks
    if "random_state" in declared and complete.get("random_state") is None:
        complete["random_state"] = plan.random_state if plan.random_state is not None else draw_seed()
    if "n_jobs" in spec.params.model_fields:
        bound_n_jobs(complete)
    if isinstance(complete.get("members"), list):  # a blend: its members' own n_jobs too
        complete["members"] = [_bounded_member(member) for member in complete["members"]]
    return complete


def _select_and_fit(plan: TrainPayload, data: _TrainingData, progress: ProgressFn, budget: MemoryBudget) -> _Fitted:
    """``auto``: cross-validate the candidates that fit the memory ``budget``, a candidate that
    fits only smaller at the largest size that fits (``rf``'s ``n_estimators``), the others left
    out; both with the reason in the selection record. Then fit the winner on every row."""
    request = auto_request.AutoParams.model_validate(plan.params)  # the selection's own declaration
    seed = plan.random_state if plan.random_state is not None else draw_seed()  # 0.1.x rows
    kind, shape = data.dataset.kind, data_shape(data.X, data.Y)
    named = request.candidates or pool.candidate_pool(kind)
    cpus = machine_cpus()
    fit = fitting(named, shape, budget, n_jobs=cpus)
    if not fit.kept:
        raise InvalidInput("no candidate fits LABELSERVE_MAX_MODEL_MB: " + "; ".join(fit.left_out.values()))
    result = choice.select(
        data.X,
        data.Y,
        kind,
        candidates=request.candidates,
        exclude=set(fit.left_out),
        sizes=fit.resized,
        metric=request.metric,
        cv=request.cv,
        tune=request.tune,
        random_state=seed,
        budget=request.budget_seconds,
        n_jobs=cpus,
        progress=_scaled(progress, 0.0, 0.9, "selection: "),
    )
    spec = get_method(result.best.method)
    assert spec is not None
    # the winner's parameters come from the candidate grid, not from a request: this is their one check
    params = spec.params.model_validate(dict(result.best.params)).model_dump(mode="json")
    fitted = _fit(spec, params, data, _scaled(progress, 0.9, 1.0, f"fitting {spec.id}: "))
    record = result.record() | {"random_state": seed, "request": request.model_dump(mode="json")}
    # beside the candidates the time budget left out: those the memory bound refused, with why
    record["left_out"] = list(record.get("left_out", [])) + [
        {"method": method, "reason": reason} for method, reason in fit.left_out.items()
    ]
    if fit.resized:
        record["resized"] = [
            {"method": method, "params": params, "reason": fit.reasons[method]}
            for method, params in fit.resized.items()
        ]
    return replace(fitted, selection=record)


def _fit(spec: MethodSpec, params: dict[str, Any], data: _TrainingData, progress: ProgressFn) -> _Fitted:
    """Build and fit the estimator, timing the fit and keeping the warnings it raised."""
    estimator = spec.build(params)
    estimate = spec.estimator.memory_estimate(data_shape(data.X, data.Y), params)
    peak_memory.reset_peak()
    before = peak_memory.resident_bytes()
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:  # a job runs alone in its process
        warnings.simplefilter("always")
        estimator.fit(data.X, data.Y, progress=progress)
    seconds = time.perf_counter() - started
    peak = peak_memory.peak_bytes()
    memory = {"estimate_peak": round(estimate.train_peak_mb, 1), "estimate_model": round(estimate.model_mb, 1)}
    if peak is not None and before is not None:
        memory |= {"measured_peak": round((peak - before) / MB, 1), "resident_peak": round(peak / MB, 1)}
    return _Fitted(spec, estimator, params, seconds, fit_warnings.recorded(caught), memory=memory)


def _register(
    job_id: str, plan: TrainPayload, data: _TrainingData, fitted: _Fitted, database: Database, store: Store
) -> bool:
    """Save the artifact, then register the version and succeed the job in one transaction (or
    neither: a job cancelled meanwhile registers nothing, and its artifact goes unless shared)."""
    artifact: Any = fitted.estimator
    params = dict(fitted.params)
    chosen = plan.feature_selector
    if chosen is not None and data.selector is not None and data.indices is not None:
        artifact = SelectedFeatures(fitted.estimator, data.indices, chosen.model)
        params["feature_selector"] = {
            **chosen.model_dump(),
            "resolved": f"{data.selector.model_name}@{data.selector.version}",
            "feature_indices": data.indices.tolist(),
        }
    sha256 = store.save_artifact(artifact)
    dataset = data.dataset

    def record() -> bool:  # one transaction, repeated whole if its connection drops
        with database.session() as session:
            return _record_version(session, job_id, plan, dataset, fitted, params, sha256, store)

    return retry_transient(record, what="register")


def _record_version(
    session: Session,
    job_id: str,
    plan: TrainPayload,
    dataset: Dataset,
    fitted: _Fitted,
    params: dict[str, Any],
    sha256: str,
    store: Store,
) -> bool:
    """Register the version and succeed the job, unless it was cancelled meanwhile."""
    if transitions.lock_running(session, job_id):
        memory = (fitted.memory or {}) | {"artifact": round(store.artifact_path(sha256).stat().st_size / MB, 1)}
        details = (fit_details(fitted.estimator) or {}) | {"memory_mb": memory}
        version = register_version(
            session,
            store,
            plan.model_name,
            method=fitted.spec.id,
            params=params,
            dataset_id=dataset.id,
            dataset_sha256=dataset.sha256,
            feature_names=dataset.feature_names,
            label_names=dataset.label_names,
            training_seconds=fitted.seconds,
            warnings=fitted.warnings,
            library_versions=library_versions(),
            artifact_sha256=sha256,
            job_id=job_id,
            selection=fitted.selection,
            fit_details=details,
            created_by=session.scalar(select(Job.submitter).where(Job.id == job_id)),
        )
        if transitions.succeed(session, job_id, model_version=version.version):
            log.info(
                "trained",
                extra={"job_id": job_id, "fit_seconds": round(fitted.seconds, 4), "memory_mb": memory},
            )
            return True
        session.rollback()
    # cancelled while fitting: register nothing, keep the artifact only if a version shares it
    drop_unused_artifacts(session, store, {sha256})
    return False


def _batch_predict(
    job_id: str, payload: BatchPredictPayload, database: Database, store: Store, progress: JobProgress
) -> bool:
    """Predict a stored dataset in chunks and write JSON lines or CSV to the results folder."""
    with database.reading() as session:
        version = resolve(session, payload.model)
        dataset = session.get(Dataset, payload.dataset_id)
        if dataset is None:
            raise LookupError(f"dataset '{payload.dataset_id}' no longer exists")
    model = store.load_artifact(version.artifact_sha256)
    X, _ = store.load_dataset(dataset.sha256)
    path = store.result_path(job_id, payload.format)
    tmp = path.with_suffix(".part")
    labels = version.label_names
    chunk = 2000
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh) if payload.format == "csv" else None
        if writer is not None:
            writer.writerow(["row", "labels"] if payload.output == "labels" else ["row", *labels])
        for start in range(0, X.shape[0], chunk):
            progress("predicting", start / X.shape[0])
            items = predict_items(
                model,
                payload.output,
                X[start : start + chunk],
                labels,
                threshold=payload.threshold,
                top_k=payload.top_k,
                include_scores=payload.include_scores,
            )
            for row, item in enumerate(items, start=start):
                if writer is None:
                    fh.write(json.dumps({"row": row, **item}) + "\n")
                else:
                    writer.writerow(_csv_row(row, item, labels))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    finished = retry_transient(lambda: _succeed_with(database, job_id, path.name), what="succeed")
    if not finished:  # cancelled meanwhile: nobody will ask for the file
        path.unlink(missing_ok=True)
    return finished


def _compare(job_id: str, payload: ComparePayload, database: Database, store: Store, progress: JobProgress) -> bool:
    """Cross-validate the methods; write the leaderboard (JSON) and its report (HTML, same name)."""
    with database.reading() as session:
        dataset = session.get(Dataset, payload.dataset_id)
        if dataset is None:
            raise LookupError(f"dataset '{payload.dataset_id}' no longer exists")
    progress("loading data", 0.0)
    X, Y = store.load_dataset(dataset.sha256)
    seed = payload.random_state if payload.random_state is not None else draw_seed()
    result = choice.compare(
        X,
        Y,
        dataset.kind,
        methods=payload.methods,
        metric=payload.metric,
        cv=payload.cv,
        random_state=seed,
        progress=_scaled(progress, 0.0, 0.95),
    )
    progress("writing the report", 0.95)
    path = store.result_path(job_id, "json")
    page = reports.compare_report(
        data=reports.DatasetFacts.of(dataset.name, dataset.id, X, Y, multilabel=dataset.kind == "multilabel"),
        metric=result.metric,
        cv=result.cv,
        seed=seed,
        metric_names=result.metric_names,
        leaderboard=result.leaderboard,
        Y=Y,
        label_names=dataset.label_names,
        job_id=job_id,
    )
    for target, text in (
        (path.with_suffix(".html"), page),
        (path, json.dumps(result.document() | {"random_state": seed})),
    ):
        tmp = target.with_suffix(target.suffix + ".part")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finished = retry_transient(lambda: _succeed_with(database, job_id, path.name), what="succeed")
    if not finished:  # cancelled meanwhile: nobody will ask for the files
        path.unlink(missing_ok=True)
        path.with_suffix(".html").unlink(missing_ok=True)
    return finished


def _csv_row(row: int, item: dict[str, Any], labels: list[str]) -> list[Any]:
    """One CSV row: the label set joined by ';', or one score column per label."""
    if "labels" in item:
        return [row, ";".join(item["labels"])]
    values = item.get("distribution") or item.get("scores") or {e["label"]: e["score"] for e in item["ranking"]}
    return [row, *(values.get(name, "") for name in labels)]
