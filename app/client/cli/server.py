"""The server-side commands: serve (the API), worker (a Celery worker) and migrate.

They import the server's modules inside the command, so the client commands start fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from app.client.cli.base import cli


# server-side commands -----------------------------------------------------------------------
@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes.")] = 1,
) -> None:
    """Start the HTTP API (app.main:app with uvicorn; several workers share the port evenly)."""
    from app.runtime.server import serve as run

    run(host, port, workers)


@cli.command()
def worker(concurrency: Annotated[int, typer.Option(help="Trainings run at once.")] = 1) -> None:
    """Start a Celery worker (LABELSERVE_JOB_BACKEND=celery)."""
    from app.jobs.celery_backend import run_worker

    run_worker(concurrency)


@cli.command()
def migrate(
    revision: Annotated[str, typer.Option(help="Target revision (default: the newest).")] = "head",
    sql: Annotated[bool, typer.Option("--sql", help="Print the SQL instead of running it (offline).")] = False,
) -> None:
    """Bring the database (LABELSERVE_DATABASE_URL) to the schema this version needs.

    Run it before starting the API and the workers of a new version. Idempotent.
    """
    import logging

    from app.config import get_settings
    from app.runtime.observability import configure_logging
    from app.storage.db import current_revision
    from app.storage.db import migrate as apply_migrations

    settings = get_settings()
    configure_logging(settings.log_level)
    url = settings.resolved_database_url
    apply_migrations(url, revision, sql=sql)
    if not sql:
        logging.getLogger("labelserve.db").info("database migrated", extra={"revision": current_revision(url)})
