"""The embedded job backend (``LABELSERVE_JOB_BACKEND=local``): a process pool next to the API.

Nothing else has to run. Jobs survive a restart as database rows: at start-up the ones left
``running`` fail as interrupted (their process is gone with the old API) and the ``queued`` ones
are submitted again.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import multiprocessing.context
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from sqlalchemy import select

from app.config import Settings
from app.db import session_scope
from app.jobs import transitions
from app.jobs.base import WORKER_DIED, JobStatus
from app.jobs.work import execute_job
from app.methods.catalog import method_module_names
from app.orm import Job

log = logging.getLogger("labelserve.jobs")


def _pool_context() -> multiprocessing.context.ForkServerContext:
    """Pool processes fork from a server that has already imported every method module.

    Forking a threaded server process (uvicorn) is unsafe and spawning re-imports numpy, scipy
    and scikit-learn for every pool (seconds); the fork server imports them once.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["app.jobs.work", *method_module_names()])
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
        future.add_done_callback(functools.partial(self._done, job_id))

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
        if status == JobStatus.RUNNING:
            self._fail(job_id, WORKER_DIED)
        elif status == JobStatus.QUEUED:
            self.submit(job_id)

    def _fail(self, job_id: str, error: str) -> None:
        with session_scope(self._url) as session:
            transitions.fail(session, job_id, error)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.cancel()

    def recover(self) -> None:
        """Jobs left ``running`` by a crash fail; jobs left ``queued`` are queued again."""
        with session_scope(self._url) as session:
            transitions.fail_interrupted(session)
            queued = transitions.queued(session)
        for job_id in queued:
            self.submit(job_id)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
