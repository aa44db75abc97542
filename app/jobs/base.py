"""The job vocabulary and the runner interface, shared by the API side and every backend.

A job's life is a small state machine; its states are ``JobStatus`` and the only code that
moves a job between them is ``app.jobs.transitions``. A backend (``app.jobs.local``,
``app.jobs.celery_backend``) only has to get ``app.jobs.work.execute_job(job_id, ...)`` called
once in some process: the job's state lives in the database, not in the backend.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from app.jobs.events import JobEvents


class JobStatus(str, Enum):
    """Where a job is in its life. The values are what the API shows and the database stores."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


#: States a job can still leave: it uses its dataset, it can be cancelled, a backend owns it.
ACTIVE: frozenset[JobStatus] = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
#: States a job never leaves.
TERMINAL: frozenset[JobStatus] = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})

# Why a job failed without its own code getting to say so (recorded as the job's ``error``).
INTERRUPTED = "interrupted: the service stopped while this job was running (crash or restart)"
WORKER_DIED = "the worker process died while running this job (killed or out of memory)"
CANCELLED_BY_REQUEST = "cancelled by request"


class JobRunner(Protocol):
    """What the API asks of a job backend; which backend it is is configuration."""

    #: Where this process's waiters hear that a job may have ended (see ``app.jobs.events``).
    events: JobEvents

    def can_queue(self) -> bool:
        """Whether a job submitted now could be handed on (cheap, cached: ``/ready`` and every
        submit ask it before anything is stored)."""

    def submit(self, job_id: str) -> None:
        """Get a job that is ``queued`` in the database run, in some process, once; raises
        ``app.errors.Unavailable`` when it could not be handed on (the caller withdraws it)."""

    def cancel(self, job_id: str) -> None:
        """Stop a job whose status has already been set to ``cancelled``."""

    def ended(self, job_id: str) -> None:
        """This process committed the end of ``job_id``: tell the waiters, here and elsewhere."""

    def recover(self) -> None:
        """At start-up: settle jobs that a previous process left unfinished."""

    def shutdown(self) -> None:
        """Release the backend's processes and connections."""
