"""Choosing the job backend (``LABELSERVE_JOB_BACKEND``) for the API process.

The backends depend on ``app.jobs.base`` and ``app.jobs.transitions``, never on each other or
on this module. The Celery backend is imported only when configured, so the embedded set-up
never loads Celery.
"""

from __future__ import annotations

from app.core import Core
from app.jobs.base import JobRunner
from app.jobs.local import LocalRunner

__all__ = ["JobRunner", "make_runner"]


def make_runner(core: Core) -> JobRunner:
    """The runner the core's settings ask for: ``local`` (a process pool here) or ``celery`` (workers)."""
    if core.settings.job_backend == "celery":
        from app.jobs.celery_backend import CeleryRunner

        return CeleryRunner(core.settings, core.database)
    return LocalRunner(core.settings, core.database)
