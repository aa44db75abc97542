"""The dashboard's progress poll (``GET /ui/jobs/progress``): every open page asks for the progress
of the jobs it shows 0.7 s after each answer (``static/ui.js``).

200 open pages had taken the API's shared thread pool (one query per job in each poll, 47 jobs a
page): ``GET /jobs?limit=1`` waited seconds. Now a poll is one query, read in a thread of the
polls' own limiter (``THREADS``), and the polls for the same jobs within ``FRESH_SECONDS`` share
one read: however many pages are open, the database sees a few reads a second and the shared
pool none.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from anyio import CapacityLimiter, to_thread

from app.services.jobs import JobProgress

#: threads the progress polls of every open page share (their own: the API's pool stays free)
THREADS = 3
#: how long one read answers the polls for the same jobs (a page polls every 0.7 s)
FRESH_SECONDS = 0.5

Reader = Callable[[list[str]], list[JobProgress]]


class ProgressPolls:
    """Answers the polls of one app: a read per set of job ids and ``FRESH_SECONDS``, shared by
    the polls that arrive meanwhile. Made and used on the app's event loop only."""

    def __init__(self, read: Reader) -> None:
        self._read = read
        self._limiter = CapacityLimiter(THREADS)
        self._answers: dict[str, tuple[float, asyncio.Task[list[JobProgress]]]] = {}

    async def progress(self, job_ids: list[str]) -> list[JobProgress]:
        now = time.monotonic()
        key = ",".join(job_ids)
        found = self._answers.get(key)
        if found is None or found[0] <= now:
            self._answers = {k: v for k, v in self._answers.items() if v[0] > now}  # drop the stale ones
            task = asyncio.create_task(to_thread.run_sync(self._read, job_ids, limiter=self._limiter))
            found = self._answers[key] = (now + FRESH_SECONDS, task)
            task.add_done_callback(lambda done: self._forget_failed(key, done))
        return await asyncio.shield(found[1])  # a poll that goes away leaves the read to the others

    def _forget_failed(self, key: str, task: asyncio.Task[list[JobProgress]]) -> None:
        """A failed read is not shared with later polls: they read again."""
        if task.cancelled() or task.exception() is not None:
            entry = self._answers.get(key)
            if entry is not None and entry[1] is task:
                del self._answers[key]
