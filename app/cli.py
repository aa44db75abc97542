"""The ``labelserve`` command: ``serve`` (the API), ``worker`` (a Celery worker) and ``migrate``."""

from __future__ import annotations

import argparse
import logging

import uvicorn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="labelserve", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    worker = commands.add_parser("worker", help="start a Celery worker (LABELSERVE_JOB_BACKEND=celery)")
    worker.add_argument("--concurrency", type=int, default=1)
    migrate = commands.add_parser(
        "migrate",
        help="bring the database (LABELSERVE_DATABASE_URL) to the schema this version needs",
        description="Apply the database migrations; run it before starting the API and the workers "
        "of a new version. Idempotent.",
    )
    migrate.add_argument("--revision", default="head", help="target revision (default: the newest)")
    migrate.add_argument("--sql", action="store_true", help="print the SQL instead of running it (offline)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        uvicorn.run("app.main:app", host=args.host, port=args.port, workers=args.workers)
    elif args.command == "migrate":
        _migrate(args.revision, args.sql)
    else:
        from app.jobs.celery_backend import run_worker

        run_worker(args.concurrency)


def _migrate(revision: str, sql: bool) -> None:
    from app.config import get_settings
    from app.db import current_revision, migrate
    from app.observability import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level)
    url = settings.resolved_database_url
    migrate(url, revision, sql=sql)
    if not sql:
        logging.getLogger("labelserve.db").info("database migrated", extra={"revision": current_revision(url)})


if __name__ == "__main__":
    main()
