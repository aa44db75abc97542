"""Waiting for a job to end without polling the database: in-process events fed by the backends.

A waiter (``POST /train?wait=true``, ``GET /jobs/{id}?wait=``) registers for its job, then reads
the job's row, and reads it again whenever it hears that the job may have ended: from the local
runner's future, an API-side transition (cancel, reaper, broker down), or for Celery a Redis
message the worker publishes once the job's end is committed (``RedisJobEnded``). A notification
is a hint, never the truth: the row decides, and a waiter that hears nothing reads the row every
``fallback`` seconds anyway, so a lost notification costs latency, never a wrong answer.

Each process parks at most ``max_waiters`` waiting requests (``LABELSERVE_MAX_WAITERS``), since
each costs a task, a registration and reads of its row (docs/reliability.md); one more is refused
at once (``admitted``: 429 with ``Retry-After``), before it queues anything.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from app.errors import TooManyRequests

log = logging.getLogger("labelserve.jobs")


#: how often a waiter reads the row of a job that this process will not hear about
UNHEARD_POLL_SECONDS = 0.25
#: what a request refused for want of a waiting place is told to wait before it asks again
WAITERS_FULL_RETRY_SECONDS = 2
#: the subscription to ended jobs retries after 1, 2, 4 ... seconds, at most RELAY_RETRY_MAX apart,
#: and logs the failure's traceback at most every RELAY_TRACE_SECONDS (else one line at DEBUG)
RELAY_RETRY_FIRST = 1.0
RELAY_RETRY_MAX = 30.0
RELAY_TRACE_SECONDS = 60.0


class JobEvents:
    """Wakes this process's waiters of a job, from any thread (a future's callback, a subscriber).

    ``fallback``: how often a waiter reads its job's row when it heard nothing. ``hears``: whether
    this process will be told when a job ends (default: always). The local runner hears only
    the jobs of its own pool; a waiter on another API process of the same deployment (``serve
    --workers N`` spreads a client's connections over them) would otherwise learn of the end
    only at the next fallback read, so for those jobs the row is read every
    ``UNHEARD_POLL_SECONDS`` (when that is sooner). ``max_waiters``: how many requests may wait
    at once (``admitted``; 0: no bound).
    """

    def __init__(self, fallback: float = 2.0, hears: Callable[[str], bool] | None = None, max_waiters: int = 0) -> None:
        self.fallback = fallback
        self.max_waiters = max_waiters
        self._hears = hears
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._admitted = 0

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """A place for one waiting request while the block runs; ``TooManyRequests`` (429) when all
        ``max_waiters`` places are taken. Taken by the request, not per ``listen``, so that a
        ``POST /train?wait=true`` holds its place from before its job is queued to its answer."""
        with self._lock:
            if self.max_waiters and self._admitted >= self.max_waiters:
                raise TooManyRequests(
                    f"{self._admitted} requests are already waiting for jobs in this server process, the most "
                    f"allowed (LABELSERVE_MAX_WAITERS={self.max_waiters}); send the request again after "
                    "Retry-After seconds, or without wait and poll GET /jobs/{id}",
                    retry_after=WAITERS_FULL_RETRY_SECONDS,
                )
            self._admitted += 1
        try:
            yield
        finally:
            with self._lock:
                self._admitted -= 1

    @contextmanager
    def listen(self, job_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever ``job_id`` may have ended, while the block runs (clear it to re-arm).

        Register before the first read of the row, so an end between the read and the wait is heard.
        """
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(job_id, set()).add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                waiters = self._waiters.get(job_id)
                if waiters is not None:
                    waiters.discard(entry)
                    if not waiters:
                        del self._waiters[job_id]

    def interval(self, job_id: str) -> float:
        """Seconds between reads of ``job_id``'s row while no notification comes."""
        if self._hears is None or self._hears(job_id):
            return self.fallback
        return min(self.fallback, UNHEARD_POLL_SECONDS)

    def notify(self, job_id: str) -> None:
        """``job_id`` may have ended: wake its waiters (they read the row to find out)."""
        with self._lock:
            entries = list(self._waiters.get(job_id, ()))
        for loop, event in entries:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that waiter's loop has closed meanwhile
                pass

    def waiting(self) -> int:
        """How many waiters are registered (for tests and metrics)."""
        with self._lock:
            return sum(len(waiters) for waiters in self._waiters.values())


def redis_channel(queue: str) -> str:
    """The pub/sub channel on which a deployment's workers announce ended jobs.

    Pub/sub channels are global to a Redis server (not per database), so the name carries the
    deployment's queue, which deployments sharing a server already keep distinct.
    """
    return f"labelserve:{queue}:job-ended"


def is_redis_url(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "unix")


class RedisJobEnded:
    """Publishes ended job ids on a Redis channel, and relays them into a ``JobEvents``.

    The worker side calls ``publish`` after ``execute_job`` returned (the end is committed); the
    API side runs ``relay`` in a daemon thread, reconnecting after an outage. The client is made
    on first use, in the process that uses it (a Celery pool process forks after start-up).
    """

    def __init__(self, url: str, channel: str) -> None:
        self.url = url
        self.channel = channel
        self._client: Any = None
        self._lock = threading.Lock()

    def _redis(self) -> Any:
        import redis

        with self._lock:
            if self._client is None:
                self._client = redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=5)
            return self._client

    def publish(self, job_id: str) -> None:
        """Announce that ``job_id`` ended; a failure is logged only (waiters fall back to polling)."""
        try:
            self._redis().publish(self.channel, job_id)
        except Exception:
            log.warning("could not announce the job's end", extra={"job_id": job_id}, exc_info=True)

    def relay(self, events: JobEvents, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Until ``stop``: every job id published on the channel -> ``events.notify``.

        While Redis is down the subscription is retried with a capped exponential backoff, and
        the failure is logged with its traceback at most once a minute (it had been every second).
        """
        delay, failures, traced = RELAY_RETRY_FIRST, 0, -math.inf
        while not stop.is_set():
            pubsub = None
            try:
                pubsub = self._redis().pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                if failures:
                    log.info("job-ended subscription restored", extra={"failures": failures})
                delay, failures = RELAY_RETRY_FIRST, 0
                if ready is not None:
                    ready.set()
                while not stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None and message.get("type") == "message":
                        data = message["data"]
                        events.notify(data.decode() if isinstance(data, bytes) else str(data))
            except Exception:  # Redis is down or restarting: waiters poll meanwhile
                failures += 1
                if time.monotonic() - traced >= RELAY_TRACE_SECONDS:
                    traced = time.monotonic()
                    log.warning(
                        "job-ended subscription lost; retrying with backoff",
                        exc_info=True,
                        extra={"failures": failures, "retry_seconds": delay},
                    )
                else:
                    log.debug("job-ended subscription still down", extra={"failures": failures, "retry_seconds": delay})
                stop.wait(delay)
                delay = min(2 * delay, RELAY_RETRY_MAX)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:
                        log.debug("pubsub close failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
