"""The application core: what a process of the service holds once, built from ``Settings``.

The shape of KServe's ``DataPlane`` or MLflow's store: one object owning the database (engine and
session factories), the file store, the model cache and the resolved references, the rendered
reports, the metrics and the job runner. The API builds it once in its lifespan (``app.main``) and its routes reach it
through one dependency (``app.api.deps.CoreDep``); the services take it as their collaborator; a
job worker (a local pool process or a Celery worker) builds the same object from the same
settings (``Core.for_worker``). Nothing below it sees a database URL: it hands out
``Database``, whose ``session()`` writes and whose ``reading()`` only reads.

It sits below the services and the jobs (both import it; it imports neither): the job runner is
attached by whoever starts one (``app.main``'s lifespan), and is typed here only for checking.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.config import Settings
from app.evaluation.report_cache import PageCache
from app.registry.model_cache import ModelCache
from app.registry.resolved_refs import ResolvedRefs
from app.runtime.observability import Metrics
from app.storage.db import Database
from app.storage.store import Store

if TYPE_CHECKING:  # the runner's interface lives with the jobs, which import this module
    from app.jobs.base import JobRunner


@dataclass(eq=False)
class Core:
    """One process's long-lived collaborators. ``settings`` stay readable per request: they are
    configuration (``batch_job_rows``, limits), not state."""

    settings: Settings
    database: Database
    store: Store
    metrics: Metrics
    cache: ModelCache
    refs: ResolvedRefs
    #: rendered version reports (``app.services.comparison.version_report_page``)
    pages: PageCache = field(default_factory=PageCache)
    _runner: JobRunner | None = field(default=None, repr=False)

    @classmethod
    def open(cls, settings: Settings, metrics: Metrics | None = None) -> Core:
        """The core of ``settings``: opens the database (lazily: no connection yet) and the store.

        ``metrics``: the app's, when it made them before its lifespan (its middlewares hold them).
        """
        settings.model_dir.mkdir(parents=True, exist_ok=True)
        database = Database(settings.resolved_database_url)
        store = Store(settings.model_dir, prune_pickles=settings.prune_pickles)
        core = cls(
            settings=settings,
            database=database,
            store=store,
            metrics=metrics or Metrics(),
            cache=ModelCache(
                store, database, settings.model_cache_size, max_bytes=int(settings.model_cache_mb * 1024 * 1024)
            ),
            refs=ResolvedRefs(store, keep_resolutions=settings.resolved_refs, keep_pages=settings.kept_model_pages),
        )
        core.cache.on_evict(core.refs.forget)
        return core

    @staticmethod
    def for_worker(settings: Settings) -> Core:
        """The core of a job-running process: built on its first job, then kept for the next ones
        (the engine's pool and the store are per process, as in the API)."""
        return _worker_core(type(settings), settings.model_dump_json())

    @property
    def runner(self) -> JobRunner:
        """The job runner; only an API process has one (a worker runs the jobs it is handed)."""
        if self._runner is None:
            raise RuntimeError("this process has no job runner (it is a job worker, or not started)")
        return self._runner

    def attach_runner(self, runner: JobRunner) -> None:
        self._runner = runner


@functools.lru_cache(maxsize=4)
def _worker_core(kind: type[Settings], settings_json: str) -> Core:
    return Core.open(kind.model_validate_json(settings_json))
