"""The distributed job backend: Celery workers fed through Redis (``LABELSERVE_JOB_BACKEND=celery``).

The API and any number of ``labelserve worker`` processes, on any number of machines, share the
database (the source of truth for job state and progress) and the model store (a shared
volume). The broker only carries job ids: a task message is ``execute_job(job_id)``, its task
id is the job id, and the worker reads everything else from the database with its own
``LABELSERVE_*`` settings (so no database credentials travel through Redis).

Delivery and failure handling, and why:

* ``task_acks_late`` + ``task_reject_on_worker_lost`` + ``worker_prefetch_multiplier=1``: a
  message is acknowledged only when its job has ended, a worker holds no more messages than it
  has pool processes, and a message whose pool process died is put back on the queue instead
  of being dropped. Redelivery is never dangerous because ``execute_job`` claims a job with a
  compare-and-set ``queued -> running`` update: a second delivery of a job that is already
  running, finished or cancelled does not run it again.
* A worker killed mid-job leaves the row ``running``. Two independent signals settle it:

  1. **Heartbeat + reaper** (the general one). The process running a job stamps
     ``jobs.heartbeat_at`` every ``heartbeat_seconds`` from a daemon thread
     (``app.jobs.work.JobProgress``). The API runs ``reap_stale_jobs`` at start-up
     (``recover``) and then every ``reap_seconds`` in a background thread: a ``running`` job
     whose heartbeat is older than ``heartbeat_timeout`` is failed with a clear error. A job
     that a live worker is running keeps a fresh heartbeat, so an API restart never fails it.
     Staleness compares the workers' clocks with the API's: keep the machines on NTP.
  2. **Redelivery** (the fast one, for a pool process killed by the OOM killer or a signal
     while its worker survives). The worker re-queues the message at once; before running a
     task, ``settle_orphan`` looks at the job: ``running`` and recorded on this host by a
     process that no longer exists, or with a stale heartbeat, means orphaned -> failed now.
     Otherwise another live process is still running it (e.g. Redis redelivered the message
     after the visibility timeout) and the delivery is dropped. Celery notices a dead pool
     process within its 5 s pool maintenance, well inside the default ``heartbeat_timeout``.

  Either way no version is half-registered: ``execute_job`` registers a version and marks the
  job ``succeeded`` in one transaction, after the artifact is durable in the store, and only if
  the job is still ``running`` under a row lock. A process killed before that commit leaves at
  most an unreferenced artifact file; a reaped job whose worker was in fact alive (a false
  positive) stops at its next progress report and registers nothing.
* The Redis ``visibility_timeout`` is only the delay before a message whose worker vanished
  before claiming its job is delivered again; since redelivery is harmless it need not exceed
  the longest training.
* Cancelling: the API has already set the row ``cancelled``; ``cancel`` also revokes the task
  with ``terminate=True`` so a running job's pool process is stopped at once rather than at its
  next progress report (the fallback if the broker is unreachable), and a queued message is
  discarded by the worker. The pool replaces the process.
* An unreachable broker: ``/ready`` answers 503 and job submits 503 with ``Retry-After``,
  storing nothing (``BrokerProbe``, a connection attempt at most every 2 s, is asked before the
  job row is written; a send that fails anyway withdraws the row). The API's subscription to
  ended jobs retries with a capped exponential backoff.
* Messages lost by the broker (Redis restarted without persistence) are re-sent at API
  start-up for every job still ``queued`` in the database; duplicates are harmless (above).
* Waiting (``POST /train?wait=true``, ``GET /jobs/{id}?wait=``): once ``execute_job`` has
  returned (the job's end is committed), the worker publishes the job id on the deployment's
  Redis channel (``app.jobs.events.redis_channel``); every API process relays the channel into
  its waiters. The API publishes the ends it commits itself (cancel, reaper) the same way.
  Celery's result backend is not used: the database already holds the outcome, and a waiter
  that misses a message reads the row within ``LABELSERVE_WAIT_POLL_SECONDS`` anyway.

Workers use the prefork pool. The worker's main process imports every method module before it
forks its pool, so a replaced pool process (after a cancellation, a crash or
``max_tasks_per_child`` jobs, which bounds memory growth from large trainings) starts in
milliseconds. The main process never opens a database connection: only pool processes do.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time

from celery import Celery
from pydantic import Field

from app.config import Settings, get_settings
from app.core import Core
from app.errors import Unavailable
from app.jobs import transitions
from app.jobs.base import JobStatus
from app.jobs.events import JobEvents, RedisJobEnded, is_redis_url, redis_channel
from app.jobs.queue import BACKEND_DOWN, BACKEND_DOWN_RETRY_SECONDS
from app.jobs.work import execute_job, process_gone
from app.methods.catalog import method_modules
from app.runtime.allocator import keep_freed_memory
from app.runtime.observability import configure_logging
from app.storage.db import Database
from app.storage.orm import Job

log = logging.getLogger("labelserve.jobs")

TASK_NAME = "labelserve.execute_job"


class CelerySettings(Settings):
    """The Celery backend's own knobs, read from the same ``LABELSERVE_*`` environment."""

    visibility_timeout: float = Field(
        3600.0, gt=0, description="Seconds before Redis redelivers an unacknowledged message"
    )
    max_tasks_per_child: int = Field(20, ge=1, description="Jobs a pool process runs before it is replaced")
    queue: str = Field(
        "labelserve",
        min_length=1,
        description="Broker queue of this deployment's jobs; deployments sharing one Redis need distinct queues",
    )


def celery_settings(settings: Settings) -> CelerySettings:
    """``settings`` plus the Celery knobs (from the environment unless already given)."""
    if isinstance(settings, CelerySettings):
        return settings
    return CelerySettings(**settings.model_dump())


def make_celery(settings: CelerySettings) -> Celery:
    """A Celery app bound to ``settings``, with the one task registered under ``TASK_NAME``."""
    celery = Celery("labelserve", broker=settings.broker_url, set_as_current=False)
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout},
        task_ignore_result=True,  # the database holds the outcome
        task_default_queue=settings.queue,
        task_serializer="json",
        accept_content=["json"],
        task_publish_retry_policy={
            "max_retries": 3,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 1,
        },
        broker_connection_retry_on_startup=True,
        worker_max_tasks_per_child=settings.max_tasks_per_child,
        worker_hijack_root_logger=False,
    )
    announcer = job_announcer(settings)

    @celery.task(name=TASK_NAME, shared=False)
    def run_job(job_id: str) -> None:
        core = Core.for_worker(settings)  # built in the pool process, on its first job
        try:
            settle_orphan(core.database, job_id, settings.heartbeat_timeout)
            execute_job(job_id, core)
        finally:  # whatever happened, the row now says it: waiters read it
            if announcer is not None:
                announcer.publish(job_id)

    return celery


def job_announcer(settings: CelerySettings) -> RedisJobEnded | None:
    """The channel announcing this deployment's ended jobs, when the broker is Redis."""
    if not is_redis_url(settings.broker_url):
        return None  # another broker: waiters read the database every wait_poll_seconds
    return RedisJobEnded(settings.broker_url, redis_channel(settings.queue))


def reap_stale_jobs(database: Database, heartbeat_timeout: float, job_id: str | None = None) -> list[str]:
    """Fail every ``running`` job (or just ``job_id``) silent for more than ``heartbeat_timeout`` s."""
    with database.session() as session:
        return transitions.fail_stale(session, heartbeat_timeout, job_id)


def settle_orphan(database: Database, job_id: str, heartbeat_timeout: float) -> bool:
    """On delivery of a job that is already ``running``: fail it if its process is dead.

    Dead means recorded on this host by a process that no longer exists, or silent for more
    than ``heartbeat_timeout``. Returns True when the job was failed here.
    """
    with database.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status != JobStatus.RUNNING:
            return False
        worker = job.worker
        if worker is not None and process_gone(worker):
            return transitions.fail_orphan(session, job_id, worker)
        return bool(transitions.fail_stale(session, heartbeat_timeout, job_id))


class BrokerProbe:
    """Whether the broker takes connections, asked of it at most every ``ttl`` seconds: ``/ready``
    and every submit ask, and a connection to a host that does not answer costs up to ``timeout``.
    One probe at a time; callers meanwhile wait for its answer."""

    def __init__(self, celery: Celery, ttl: float = 2.0, timeout: float = 1.0) -> None:
        self._celery = celery
        self._ttl = ttl
        self._timeout = timeout
        self._lock = threading.Lock()
        self._checked = -math.inf
        self._ok = True

    def reachable(self) -> bool:
        with self._lock:
            if time.monotonic() - self._checked >= self._ttl:
                self._ok = self._ping()
                self._checked = time.monotonic()
            return self._ok

    def failed(self) -> None:
        """A send just failed: unreachable until the next probe."""
        with self._lock:
            self._ok, self._checked = False, time.monotonic()

    def _ping(self) -> bool:
        try:
            with self._celery.connection_for_write(connect_timeout=self._timeout) as connection:
                connection.ensure_connection(max_retries=1, interval_start=0, timeout=self._timeout)
        except Exception:  # kombu raises several types for an unreachable broker
            return False
        return True


class CeleryRunner:
    """The API side: sends job ids to the workers, revokes cancelled jobs, reaps orphans."""

    def __init__(self, settings: Settings, database: Database) -> None:
        self._settings = celery_settings(settings)
        self._database = database
        self._celery = make_celery(self._settings)
        self._probe = BrokerProbe(self._celery)
        self.events = JobEvents(settings.wait_poll_seconds, max_waiters=settings.max_waiters)
        self._announcer = job_announcer(self._settings)
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_periodically, name="labelserve-reaper", daemon=True)
        self._reaper.start()
        self._relay: threading.Thread | None = None
        if self._announcer is not None:
            self._relay = threading.Thread(
                target=self._announcer.relay, args=(self.events, self._stop), name="labelserve-job-ended", daemon=True
            )
            self._relay.start()

    def _send(self, job_id: str) -> None:
        self._celery.send_task(TASK_NAME, args=[job_id], task_id=job_id, queue=self._settings.queue)

    def can_queue(self) -> bool:
        return self._probe.reachable()

    def submit(self, job_id: str) -> None:
        """Send the job; ``Unavailable`` when the broker cannot be reached (the caller withdraws it)."""
        try:
            self._send(job_id)
        except Exception as exc:  # kombu raises several types for an unreachable broker
            self._probe.failed()
            log.warning("could not send the job to the broker", extra={"job_id": job_id, "error": repr(exc)})
            raise Unavailable(BACKEND_DOWN, retry_after=BACKEND_DOWN_RETRY_SECONDS) from None

    def cancel(self, job_id: str) -> None:
        try:
            self._celery.control.revoke(job_id, terminate=True, signal="SIGTERM")
        except Exception:  # the job still stops at its next progress report
            log.warning("revoke failed", extra={"job_id": job_id}, exc_info=True)

    def ended(self, job_id: str) -> None:
        self.events.notify(job_id)
        if self._announcer is not None:  # the waiters of the other API processes
            self._announcer.publish(job_id)

    def recover(self) -> None:
        """Fail orphaned running jobs; send every queued job again (duplicates are no-ops)."""
        with self._database.session() as session:
            failed = transitions.fail_stale(session, self._settings.heartbeat_timeout)
            queued = transitions.queued(session)
        for job_id in failed:
            self.ended(job_id)
        for job_id in queued:
            try:
                self._send(job_id)
            except Exception:  # the broker is down: its own copies, if any, are still there
                log.error("could not re-send queued jobs", exc_info=True)
                break

    def _reap_periodically(self) -> None:
        while not self._stop.wait(self._settings.reap_seconds):
            try:
                for job_id in reap_stale_jobs(self._database, self._settings.heartbeat_timeout):
                    self.ended(job_id)
            except Exception:  # the database is briefly unreachable: try again next round
                log.warning("reaper failed", exc_info=True)

    def shutdown(self) -> None:
        self._stop.set()
        self._reaper.join(timeout=5)
        if self._relay is not None:
            self._relay.join(timeout=5)
        if self._announcer is not None:
            self._announcer.close()
        self._celery.close()


def _preload_methods() -> None:
    """Import every method module in the worker's main process, before the pool forks."""
    method_modules()


def node_name() -> str:
    """Unique per worker process, so several workers on one host are told apart."""
    return f"labelserve-{os.getpid()}@{socket.gethostname()}"


def run_worker(concurrency: int) -> None:
    """Start a Celery worker (prefork pool of ``concurrency`` processes) with the environment's settings."""
    settings = celery_settings(get_settings())
    configure_logging(settings.log_level)
    if settings.tune_allocator:
        keep_freed_memory()  # before the pool forks: its processes inherit the setting
    _preload_methods()
    celery = make_celery(settings)
    celery.worker_main(
        [
            "worker",
            f"--concurrency={concurrency}",
            "--pool=prefork",
            f"--hostname={node_name()}",
            f"--queues={settings.queue}",
            f"--loglevel={settings.log_level}",
            "--without-gossip",
            "--without-mingle",
        ]
    )


def local_worker_alive(timeout: float = 3.0) -> bool:
    """True when a worker on this host answers a ping (the worker container's health check)."""
    celery = make_celery(celery_settings(get_settings()))
    try:
        replies = celery.control.ping(timeout=timeout)
    finally:
        celery.close()
    return any(name.endswith(f"@{socket.gethostname()}") for reply in replies for name in reply)
