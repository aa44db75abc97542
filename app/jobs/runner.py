"""The job runner interface and the embedded (local process pool) backend.

The API only ever calls ``submit``, ``cancel``, ``recover`` and ``shutdown``; which backend runs
the work is configuration (``LABELSERVE_JOB_BACKEND``). Job state lives in the database, so a
backend only has to get ``execute_job(job_id, ...)`` called once in some process.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context
import pkgutil
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol

from sqlalchemy import select, update

from app.config import Settings
from app.db import session_scope
from app.jobs.work import execute_job
from app.orm import Job, utcnow

log = logging.getLogger("labelserve.jobs")

INTERRUPTED = "interrupted: the service stopped while this job was running (crash or restart)"
WORKER_DIED = "the worker process died while running this job (killed or out of memory)"


class JobRunner(Protocol):
    def submit(self, job_id: str) -> None: ...

    def cancel(self, job_id: str) -> None:
        """Stop a job whose status the API has already set to ``cancelled``."""

    def recover(self) -> None:
        """At start-up: settle jobs that a previous process left unfinished."""

    def shutdown(self) -> None: ...


def _pool_context() -> multiprocessing.context.ForkServerContext:
    """Pool processes fork from a server that has already imported every method module.

    Forking a threaded server process (uvicorn) is unsafe and spawning re-imports numpy, scipy
    and scikit-learn for every pool (seconds); the fork server imports them once.
    """
    import app.methods as methods_pkg

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["app.jobs.work"] + [f"app.methods.{m.name}" for m in pkgutil.iter_modules(methods_pkg.__path__)]
    )
    return context


class LocalRunner:
    """A pool of ``settings.workers`` training processes next to the API process.

    Cancellation of a running job is cooperative: the job stops at its next progress report
    (see ``JobProgress``) and its result, if it finishes first, is discarded.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._url = settings.resolved_database_url
        self._lock = threading.Lock()
        self._futures: dict[str, Future[None]] = {}
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(max_workers=self._settings.workers, mp_context=_pool_context())
        pool.submit(int)  # start the fork server and a process now, not on the first job
        return pool

    def submit(self, job_id: str) -> None:
        with self._lock:
            future = self._pool.submit(execute_job, job_id, self._url, str(self._settings.model_dir))
            self._futures[job_id] = future
        future.add_done_callback(lambda f, job_id=job_id: self._done(job_id, f))

    def _done(self, job_id: str, future: Future[None]) -> None:
        with self._lock:
            self._futures.pop(job_id, None)
        if future.cancelled() or future.exception() is None:
            return
        if isinstance(future.exception(), BrokenProcessPool):
            self._handle_broken_pool(job_id)
        else:  # execute_job records its own failures; this is a bug in the runner itself
            self._fail(job_id, f"runner error: {future.exception()!r}")

    def _handle_broken_pool(self, job_id: str) -> None:
        """A pool process died: fail the job it was running and re-queue the others."""
        with self._lock:
            if self._pool._broken:  # noqa: SLF001 - the documented way to tell is this flag
                self._pool = self._new_pool()
        with session_scope(self._url) as session:
            status = session.scalar(select(Job.status).where(Job.id == job_id))
        if status == "running":
            self._fail(job_id, WORKER_DIED)
        elif status == "queued":
            self.submit(job_id)

    def _fail(self, job_id: str, error: str) -> None:
        with session_scope(self._url) as session:
            session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status.in_(("queued", "running")))
                .values(status="failed", error=error, finished_at=utcnow())
            )
        log.error("job failed", extra={"job_id": job_id, "error": error})

    def cancel(self, job_id: str) -> None:
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.cancel()

    def recover(self) -> None:
        """Jobs left ``running`` by a crash fail; jobs left ``queued`` are queued again."""
        with session_scope(self._url) as session:
            session.execute(
                update(Job)
                .where(Job.status == "running")
                .values(status="failed", error=INTERRUPTED, finished_at=utcnow())
            )
            queued = session.scalars(select(Job.id).where(Job.status == "queued").order_by(Job.created_at)).all()
        for job_id in queued:
            self.submit(job_id)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_runner(settings: Settings) -> JobRunner:
    if settings.job_backend == "celery":
        from app.jobs.celery_backend import CeleryRunner

        return CeleryRunner(settings)
    return LocalRunner(settings)
