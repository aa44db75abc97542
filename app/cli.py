"""The ``labelserve`` command: ``labelserve serve`` (the API) and ``labelserve worker``."""

from __future__ import annotations

import argparse

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
    args = parser.parse_args(argv)
    if args.command == "serve":
        uvicorn.run("app.main:app", host=args.host, port=args.port, workers=args.workers)
    else:
        from app.jobs.celery_backend import run_worker

        run_worker(args.concurrency)


if __name__ == "__main__":
    main()
