"""Service configuration, read from ``LABELSERVE_*`` environment variables (or a ``.env`` file).

Defaults are the embedded set-up: SQLite and the artifact store under ``models/``, jobs in a
local process pool, the schema migrated by the API at start-up. Nothing else needs to be running.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: the Host names answered when LABELSERVE_ALLOWED_HOSTS is unset (``labelserve serve`` adds a specific bind address)
DEFAULT_ALLOWED_HOSTS = ("localhost", "127.0.0.1", "::1")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LABELSERVE_", env_file=".env", extra="ignore")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default: SQLite file `labelserve.db` in the model dir"
    )
    model_dir: Path = Field(Path("models"), description="Artifact and dataset store")
    api_key: str | None = Field(
        None,
        description="When set, an admin key named 'default', required (or another key) on every route but ops/docs",
    )
    api_keys_file: Path | None = Field(
        None,
        description="JSON lines of named keys with roles and SHA-256s (app.services.keys), read again when it "
        "changes; when set, a key is required on every route but ops/docs",
    )
    # The web surface: browsers' sessions and the Host names answered (see app.api.browser, app.api.gate)
    secret_key: str | None = Field(
        None,
        description="Signs the dashboard's session cookies and CSRF tokens; unset: a random secret made once and "
        "kept in `secret.key` in the model dir (mode 0600), shared by every process on that store",
    )
    session_hours: float = Field(12.0, gt=0, description="How long a dashboard session lasts after sign-in")
    allowed_hosts: str | None = Field(
        None,
        description="Comma-separated Host names answered (any other: 400); `*.example.org` covers subdomains, `*` "
        "any. Unset or empty: localhost, 127.0.0.1, ::1 and the specific address `labelserve serve --host` binds",
    )
    max_upload_mb: float = Field(200, gt=0, description="Largest accepted upload")
    # The V2 inference protocol over gRPC (app.api.v2.grpc_server), beside the HTTP API in its process
    grpc_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of the V2 inference protocol's gRPC service (Triton uses 8001); unset: no gRPC service",
    )
    grpc_host: str = Field(
        "127.0.0.1",
        description="Address the gRPC service binds; `labelserve serve` sets it to its `--host` when unset",
    )
    # What an upload may become once parsed (see app.formats.limits; same defaults there)
    max_dataset_cells: int = Field(20_000_000, ge=1, description="Most values (samples x columns) of a dataset")
    max_dataset_features: int = Field(50_000, ge=1, description="Most features of a dataset")
    max_dataset_labels: int = Field(5_000, ge=1, description="Most labels of a dataset")
    workers: int = Field(1, ge=1, description="Training processes of the local job backend")
    recycle_worker_mb: float = Field(
        1024,
        ge=0,
        description="A local training process whose job peaked above this resident memory (MB) is replaced by a "
        "fresh one after the job (it keeps its high-water memory otherwise); 0: never",
    )
    # Store housekeeping (see app.services.maintenance)
    sweep_seconds: float = Field(600.0, gt=0, description="How often orphaned store files are looked for")
    sweep_grace_seconds: float = Field(
        3600.0, ge=0, description="Only store files older than this are swept (writes in flight are younger)"
    )
    min_free_mb: float = Field(100.0, ge=0, description="/ready answers 503 when the store has less free space")
    # Liveness of running jobs, on either backend (see app.jobs.local and app.jobs.celery_backend)
    heartbeat_seconds: float = Field(5.0, gt=0, description="How often a running job stamps its heartbeat")
    heartbeat_timeout: float = Field(
        60.0, gt=0, description="A running job whose heartbeat is older than this is failed as orphaned"
    )
    reap_seconds: float = Field(15.0, gt=0, description="How often the API looks for orphaned jobs")
    max_job_seconds: float = Field(
        21_600.0,
        gt=0,
        description="A running job is stopped and failed at its first progress report after this many seconds "
        "(default 6 hours); a request's max_seconds may lower it for its job",
    )
    max_queued_jobs_per_key: int = Field(
        20,
        ge=0,
        description="Most jobs queued (not yet running) under one API key (with no keys configured: from one "
        "client address); a submit beyond is refused with 429; 0: no bound",
    )
    max_waiters: int = Field(
        64,
        ge=0,
        description="Most requests one API process holds waiting for a job's end (POST /train?wait=true, "
        "GET /jobs/{id}?wait=); one more is refused at once with 429 and Retry-After, before it queues anything; "
        "0: no bound",
    )
    wait_poll_seconds: float = Field(
        2.0,
        gt=0,
        description="How often a waiting request (?wait) reads its job when no notification of its end came; "
        "the backend normally says so at once (see app.jobs.events)",
    )
    job_backend: Literal["local", "celery"] = "local"
    broker_url: str = "redis://127.0.0.1:6379/0"
    model_cache_size: int = Field(16, ge=1, description="Loaded models kept in memory (LRU), at most")
    model_cache_mb: float = Field(
        2048,
        gt=0,
        description="Bytes of loaded models kept in memory (LRU by size, measured by their artifact files plus what "
        "they build when they load); "
        "a model larger than this alone is still served, and kept alone",
    )
    warm_new_versions: bool = Field(
        False,
        description="Load each model's newly registered version into every API process's model cache in the "
        "background, so that no request pays its load (app.services.warming)",
    )
    warm_poll_seconds: float = Field(
        1.0, gt=0, description="How often the warming thread looks for new versions (a read of the registry token)"
    )
    max_model_mb: float = Field(
        3072,
        gt=0,
        description="Most memory a training may be estimated to take at its peak, model included (each method "
        "declares its estimate); larger ones are refused at submit. The default suits a 4 GB worker",
    )
    max_answer_cells: int = Field(
        500_000,
        ge=1,
        description="Most rows x labels of one prediction answer (a score of the compact 'scores' output counts "
        "1/16 of a cell); a request for more is refused (413) with how to batch, or becomes a batch job when it "
        "names a stored dataset",
    )
    batch_job_rows: int = Field(50_000, ge=1, description="Datasets with more rows are predicted as a background job")
    log_level: str = "INFO"
    # Switches of the speed machinery, each on by default; off, the plain path does the work
    # (for telling whether a fault or a cost is theirs; tests/api/test_speed_switches.py)
    fast_path: bool = Field(
        True,
        description="Answer POST /predict and V2 inference of references this process has resolved in front of "
        "the middlewares and routes (app.api.fast_path); off: every prediction goes through its route",
    )
    resolved_refs: bool = Field(
        True,
        description="Keep resolved (and refused) model references until the registry token changes, so "
        "predictions skip the database (app.registry.resolved_refs); off: every prediction resolves its "
        "reference in the database",
    )
    kept_model_pages: bool = Field(
        True,
        description="Keep GET /models/{name}'s answers until the registry token changes and answer them on the "
        "event loop; off: every request reads the database",
    )
    prune_pickles: bool = Field(
        True,
        description="Rewrite large artifacts without the pickle memo entries nothing reads back, so a load does "
        "not hold the model twice (app.storage.pickle_memo); off: plain pickles",
    )
    batched_logs: bool = Field(
        True,
        description="Write the request log's lines in batches (app.runtime.observability.BatchedLines); off: "
        "each line is written at once by the log's stream handler",
    )
    tune_allocator: bool = Field(
        True,
        description="Apply the glibc malloc settings that keep freed memory for reuse in the API and job "
        "processes (app.runtime.allocator); off: glibc's defaults",
    )
    gc_freeze: bool = Field(
        True,
        description="Freeze the objects alive at the end of start-up out of the garbage collector's full "
        "collections (app.runtime.gc_freeze); off: collections walk them as well",
    )
    auto_migrate: bool | None = Field(
        None,
        description="Apply the database migrations when the API starts. Unset: only on SQLite (the "
        "embedded set-up, where nothing else would); with a server database run `labelserve migrate` "
        "before starting the API and the workers",
    )

    @model_validator(mode="after")
    def _timeout_spans_several_beats(self) -> Settings:
        if self.heartbeat_timeout < 3 * self.heartbeat_seconds:
            raise ValueError("heartbeat_timeout must be at least 3 heartbeat_seconds")
        return self

    @property
    def trusted_hosts(self) -> list[str]:
        """``allowed_hosts`` as Starlette's ``TrustedHostMiddleware`` matches them (IPv6 in brackets)."""
        given = self.allowed_hosts.split(",") if self.allowed_hosts else DEFAULT_ALLOWED_HOSTS
        names = [name.strip().lower() for name in given if name.strip()]
        return [f"[{name}]" if ":" in name and not name.startswith("[") else name for name in names]

    @property
    def has_api_keys(self) -> bool:
        """Whether a key is required (``LABELSERVE_API_KEY`` or ``LABELSERVE_API_KEYS_FILE`` set)."""
        return bool(self.api_key) or self.api_keys_file is not None

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.model_dir / 'labelserve.db').resolve()}"

    @property
    def migrate_at_startup(self) -> bool:
        """``auto_migrate`` if set, else True exactly for an SQLite database."""
        if self.auto_migrate is not None:
            return self.auto_migrate
        return self.resolved_database_url.startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
