"""The embedded job backend (``LABELSERVE_JOB_BACKEND=local``): a process pool next to the API.

Nothing else has to run. Jobs survive a restart as database rows, and several API processes
(``labelserve serve --workers N``, or several replicas on one database) may run side by side,
each with its own pool. So a ``running`` job is only settled by someone else when its owner is
dead: every job records the pool process running it (``host:pid``) and stamps a heartbeat from
a thread while it runs. At start-up and then every ``reap_seconds``, each API fails the running
jobs whose process is gone from this host, or whose heartbeat is older than
``heartbeat_timeout`` (a process elsewhere, or one whose pid was reused); it never touches a job
a live process is running. Queued jobs are submitted again at start-up (a duplicate claim is a
no-op).

Stopping stops everything this backend started: the pool processes (and the trainings in them,
whose jobs fail as interrupted), then (``stop_process_helpers``) the fork server and
multiprocessing's resource tracker. A pool
process also dies with its parent (the fork server, which exits when the API process does),
so a killed API leaves no training running.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from app.config import Settings
from app.jobs import transitions
from app.jobs.base import INTERRUPTED, WORKER_DIED, JobStatus
from app.jobs.events import JobEvents
from app.jobs.work import process_gone, run_job
from app.methods.base import MB
from app.methods.catalog import method_module_names
from app.runtime.allocator import keep_freed_memory
from app.runtime.observability import configure_logging
from app.storage.db import Database
from app.storage.orm import Job

log = logging.getLogger("labelserve.jobs")

_PR_SET_PDEATHSIG = 1
STOP_GRACE_SECONDS = 5.0


def _pool_context() -> multiprocessing.context.ForkServerContext:
    """Pool processes fork from a server that has already imported every method module.

    Forking a threaded server process (uvicorn) is unsafe and spawning re-imports numpy, scipy
    and scikit-learn for every pool (seconds); the fork server imports them once.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["app.jobs.work", "app.runtime.observability", *method_module_names()])
    return context


def _init_pool_process(api_pid: int, log_level: str, tune_allocator: bool) -> None:
    """Pool process initializer: log JSON lines as the API does, keep freed memory for reuse
    (``app.runtime.allocator``, when ``tune_allocator``), and never outlive the service."""
    configure_logging(log_level)
    if tune_allocator:
        keep_freed_memory()
    _die_with_parent(api_pid)


def _die_with_parent(api_pid: int) -> None:
    """Never outlive the service.

    The kernel kills this process when its parent (the fork server) exits, which the fork
    server does when the API process goes; a watchdog thread also checks the API itself, for
    systems without ``prctl``.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watchdog alone
        pass

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(api_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="labelserve-parent-watch", daemon=True).start()


def reap_dead_jobs(database: Database, heartbeat_timeout: float) -> list[str]:
    """Fail every ``running`` job whose process is known dead (gone from this host, or never
    recorded) or silent for more than ``heartbeat_timeout``; leave every other one alone.

    A job whose process this host sees running is never failed for its silence: its heartbeat
    writes may be failing for a while ("database is locked" behind a long writer) while it
    computes, and a live job was failed as dead that way. Silence settles only the jobs of other
    hosts, and those whose pid now belongs to a process started after the job was claimed.
    """
    failed: list[str] = []
    alive: list[str] = []
    with database.session() as session:
        running = session.execute(
            select(Job.id, Job.worker, Job.started_at).where(Job.status == JobStatus.RUNNING.value)
        ).all()
        for job_id, worker, started_at in running:
            if worker is None:
                failed += transitions.fail(
                    session, job_id, INTERRUPTED, sources=[JobStatus.RUNNING], when=[Job.worker.is_(None)]
                )
            elif process_gone(worker):  # the same worker still: its pid was not claimed again meanwhile
                failed += transitions.fail(
                    session, job_id, INTERRUPTED, sources=[JobStatus.RUNNING], when=[Job.worker == worker]
                )
            elif runs_here_since(worker, started_at):
                alive.append(job_id)
        return failed + transitions.fail_stale(session, heartbeat_timeout, spare=alive)


def runs_here_since(worker: str, claimed_at: datetime | None) -> bool:
    """Whether ``worker`` (``host:pid``) is a live process of this host that was already running
    when its job was claimed (a pid reused by a newer process is not the job's)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or claimed_at is None:
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
    except (OSError, StopIteration, IndexError, ValueError):
        return False  # gone, or no /proc: only the heartbeat can tell
    if fields[0] == "Z":
        return False
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks
    return started <= claimed_at.timestamp() + 1.0  # btime is whole seconds


class LocalRunner:
    """``settings.workers`` training processes next to the API process, one job at a time each.

    Each process is a single-process executor of its own (a *slot*): when the kernel kills one
    (out of memory, kill -9), only that executor breaks, so only the job it was running fails;
    one shared pool broke as a whole (``BrokenProcessPool``) and failed every job running in it.
    Jobs wait in submission order for a free slot (``_pending``); a broken slot is replaced
    before it takes the next one.

    Cancellation of a running job is cooperative: the job stops at its next progress report
    (see ``JobProgress``) and its result, if it finishes first, is discarded.
    """

    def __init__(self, settings: Settings, database: Database) -> None:
        self._settings = settings
        self._database = database
        self._lock = threading.Lock()
        self._futures: dict[str, Future[int | None]] = {}
        self._pending: deque[str] = deque()
        self._busy: dict[int, str] = {}  # slot index -> the job it runs
        self.events = JobEvents(settings.wait_poll_seconds, hears=self._runs_here, max_waiters=settings.max_waiters)
        self._retired: list[ProcessPoolExecutor] = []
        self._slots = [self._new_slot() for _ in range(settings.workers)]
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_periodically, name="labelserve-reaper", daemon=True)
        self._reaper.start()

    def _runs_here(self, job_id: str) -> bool:
        """Whether this process's pool runs or holds ``job_id`` (its end will be heard at once)."""
        with self._lock:
            return job_id in self._futures or job_id in self._pending

    def _new_slot(self) -> ProcessPoolExecutor:
        slot = ProcessPoolExecutor(
            max_workers=1,
            mp_context=_pool_context(),
            initializer=_init_pool_process,
            initargs=(os.getpid(), self._settings.log_level, self._settings.tune_allocator),
        )
        slot.submit(int)  # start the fork server and the process now, not on the first job
        return slot

    def can_queue(self) -> bool:
        return not self._stop.is_set()

    def submit(self, job_id: str) -> None:
        with self._lock:
            self._pending.append(job_id)
        self._dispatch()

    def _dispatch(self) -> None:
        """Start pending jobs on free slots (callbacks are attached outside the lock: a future
        that is already done runs its callback at once, which takes the lock)."""
        started: list[tuple[int, str, Future[int | None]]] = []
        with self._lock:
            while self._pending and not self._stop.is_set():
                free = next((i for i in range(len(self._slots)) if i not in self._busy), None)
                if free is None:
                    break
                job_id = self._pending.popleft()
                future = self._slots[free].submit(run_job, job_id, self._settings)
                self._busy[free] = job_id
                self._futures[job_id] = future
                started.append((free, job_id, future))
        for slot, job_id, future in started:
            future.add_done_callback(functools.partial(self._done, slot, job_id))

    def _done(self, slot: int, job_id: str, future: Future[int | None]) -> None:
        """The slot is done with the job: settle what it could not record, wake the waiters, and
        give the slot (a new process if this one died or grew past the bound) the next pending job.

        ``run_job`` has committed the job's end before its future completes, so the waiters
        (``POST /train?wait=true``) learn it now instead of at their next read.
        """
        grown = self._grown(job_id, future)
        with self._lock:
            self._futures.pop(job_id, None)
            self._busy.pop(slot, None)
            broken = self._slots[slot]._broken  # noqa: SLF001 - the documented way to tell is this flag
            if (broken or grown) and not self._stop.is_set():
                if grown:  # idle now: its process exits, with the memory it kept
                    self._slots[slot].shutdown(wait=False)
                else:
                    self._retired.append(self._slots[slot])
                self._slots[slot] = self._new_slot()
        try:
            if future.cancelled() or future.exception() is None or self._stop.is_set():
                return
            if isinstance(future.exception(), BrokenProcessPool):
                self._settle_killed(job_id)
            else:  # run_job records its own failures; this is a bug in the runner itself
                log.error("runner error", extra={"job_id": job_id, "error": repr(future.exception())})
                self._fail(job_id, "the job runner failed; see the server log")
        finally:
            self.events.notify(job_id)
            self._dispatch()

    def _grown(self, job_id: str, future: Future[int | None]) -> bool:
        """Whether the job's process peaked above ``LABELSERVE_RECYCLE_WORKER_MB``: the allocator
        keeps what a large fit freed (a cancelled ``rf`` left a process at 1.34 GB), so the
        process is replaced by a fresh fork rather than hold it until the API stops."""
        bound = self._settings.recycle_worker_mb
        if not bound or future.cancelled() or future.exception() is not None:
            return False
        peak = future.result()
        if peak is None or peak <= bound * MB:
            return False
        log.info(
            "training process replaced: its job peaked above the bound",
            extra={"job_id": job_id, "peak_mb": round(peak / MB), "recycle_worker_mb": bound},
        )
        return True

    def _settle_killed(self, job_id: str) -> None:
        """The slot's process died: fail its job, or queue it again if it had not started."""
        with self._database.reading() as session:
            status = session.scalar(select(Job.status).where(Job.id == job_id))
        if status == JobStatus.RUNNING:
            self._fail(job_id, WORKER_DIED)
        elif status == JobStatus.QUEUED:
            with self._lock:
                self._pending.appendleft(job_id)

    def _fail(self, job_id: str, error: str) -> None:
        with self._database.session() as session:
            transitions.fail(session, job_id, error)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            future = self._futures.get(job_id)
            if job_id in self._pending:
                self._pending.remove(job_id)
        if future is not None:
            future.cancel()

    def ended(self, job_id: str) -> None:
        """Only this process's waiters can be told; those of other API processes read the row."""
        self.events.notify(job_id)

    def recover(self) -> None:
        """Running jobs whose owner is dead fail; jobs left ``queued`` are queued again."""
        self._reap()
        with self._database.reading() as session:
            queued = transitions.queued(session)
        for job_id in queued:
            self.submit(job_id)

    def _reap(self) -> None:
        for job_id in reap_dead_jobs(self._database, self._settings.heartbeat_timeout):
            self.events.notify(job_id)

    def _reap_periodically(self) -> None:
        while not self._stop.wait(self._settings.reap_seconds):
            try:
                self._reap()
            except Exception:  # the database is briefly unreachable: try again next round
                log.warning("reaper failed", exc_info=True)

    def shutdown(self) -> None:
        """Stop the pool processes and their trainings (``stop_process_helpers`` stops the rest)."""
        self._stop.set()
        with self._lock:
            self._pending.clear()
        pools = [*self._retired, *self._slots]
        processes = [p for pool in pools for p in list((pool._processes or {}).values())]  # noqa: SLF001
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
        self._fail_interrupted(processes)
        for pool in pools:
            pool.shutdown(wait=True)
        self._reaper.join(timeout=5)

    def _fail_interrupted(self, processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
        """The jobs the stopped pool processes were running fail as interrupted (not as lost)."""
        workers = [f"{socket.gethostname()}:{p.pid}" for p in processes if p.pid is not None]
        if not workers:
            return
        try:
            with self._database.session() as session:
                running = session.scalars(
                    select(Job.id).where(Job.status == JobStatus.RUNNING.value, Job.worker.in_(workers))
                ).all()
                transitions.fail(session, list(running), INTERRUPTED, sources=[JobStatus.RUNNING])
        except Exception:  # the database is gone too: the next start-up's recovery settles them
            log.warning("could not record interrupted jobs at shutdown", exc_info=True)


def stop_process_helpers() -> None:
    """Stop the fork server and the resource tracker multiprocessing started for the pools.

    Called when the process that owns them stops serving (``app.main:app``'s shutdown); they would
    otherwise outlive it (the fork server holds every method module in memory), since uvicorn
    ends on the signal it stopped for and skips ``atexit``. Apps built for tests share one
    process and leave them running: a fork server takes seconds to start. ``_stop`` is how
    multiprocessing's own tests stop them; a later pool starts new ones.
    """
    helpers: list[Any] = [multiprocessing.forkserver._forkserver, multiprocessing.resource_tracker._resource_tracker]
    for helper in helpers:
        try:
            helper._stop()
        except Exception:  # already gone, or never started
            log.debug("helper stop failed", exc_info=True)
