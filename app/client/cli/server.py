"""The server-side commands: serve (the API), worker (a Celery worker), migrate and keys (add, remove).

They import the server's modules inside the command, so the client commands start fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.client.cli.base import Exit, cli, fail, keys_cli, say, show

KeysFileOption = Annotated[
    Path | None,
    typer.Option("--file", help="The keys file (default: LABELSERVE_API_KEYS_FILE).", show_default=False),
]


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


@keys_cli.command("add")
def keys_add(
    name: Annotated[str, typer.Argument(help="The key's name, recorded on the jobs, versions and deletes it makes.")],
    role: Annotated[
        str, typer.Option(help="What the key may do: read, predict, train or admin (each allows the ones before it).")
    ],
    file: KeysFileOption = None,
) -> None:
    """Make a key: print it (once: the file keeps only its SHA-256) and append its entry to the file.

    The server reads the file again within a second of the change: no restart.
    """
    from app.services.keys import KeyFileError, Role, add_key

    roles = [r.value for r in Role]
    if role not in roles:
        fail(Exit.USAGE, f"--role: '{role}' is not one of {', '.join(roles)}")
    path = _keys_file(file)
    try:
        key = add_key(path, name, Role(role))
    except (KeyFileError, OSError) as exc:
        fail(Exit.USAGE, str(exc))
    show(key)
    say(f"added key '{name}' (role {role}) to {path}; the key above is shown this once")


@keys_cli.command("remove")
def keys_remove(
    name: Annotated[str, typer.Argument(help="The key's name.")],
    file: KeysFileOption = None,
) -> None:
    """Revoke a key: remove its entry from the file (the server refuses it, 401, within a second)."""
    from app.services.keys import KeyFileError, remove_key

    path = _keys_file(file)
    try:
        removed = remove_key(path, name)
    except (KeyFileError, OSError) as exc:
        fail(Exit.USAGE, str(exc))
    if not removed:
        fail(Exit.NOT_FOUND, f"no key named '{name}' in {path}")
    say(f"removed key '{name}' from {path}")


def _keys_file(file: Path | None) -> Path:
    from app.config import get_settings

    path = file or get_settings().api_keys_file
    if path is None:
        fail(Exit.USAGE, "no keys file: give --file or set LABELSERVE_API_KEYS_FILE")
    return path
