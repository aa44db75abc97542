"""The labelserve command.

Server side: serve (the API), worker (a Celery worker), migrate and keys (the API keys
file). Client side, over HTTP with
the Python client (app.client.Client): datasets, train, jobs, predict, evaluate, models, methods
and compare. The server is --url or LABELSERVE_URL (default http://127.0.0.1:8000), the key
--api-key or LABELSERVE_API_KEY. Every client command prints a table, or the server's JSON with
--json. Tables fit the terminal's width (--wide: never folded); in a pipe they are plain
columns, one line per row.

Exit codes: 0 done; 1 the job failed or was cancelled; 2 wrong usage; 3 the server rejected the
request (4xx); 4 not found (404); 5 missing or invalid API key (401/403); 6 server unreachable or
failing (5xx); 7 gave up waiting (--timeout); 130 interrupted (the job keeps running).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

import app as package
from app.client import DEFAULT_URL

# The client (httpx), rich, NumPy and the server's modules are imported where they are used, in
# every module of the command: ``labelserve --version`` or a ``--help`` imports none of them
# (benchmarks/cli_startup.py measures the start-up, tests/integration/test_cli_startup.py checks it).
if TYPE_CHECKING:
    from rich.console import Console

    from app.client.http import Client


class Exit(IntEnum):
    OK = 0
    JOB_FAILED = 1
    USAGE = 2
    REJECTED = 3
    NOT_FOUND = 4
    AUTH = 5
    SERVER = 6
    TIMEOUT = 7
    INTERRUPTED = 130


cli = typer.Typer(
    name="labelserve",
    help=__doc__,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
datasets_cli = typer.Typer(help="Upload, list, show and delete datasets.", no_args_is_help=True)
jobs_cli = typer.Typer(help="List, show, follow and cancel jobs.", no_args_is_help=True)
models_cli = typer.Typer(help="The model registry: list, show, aliases.", no_args_is_help=True)
methods_cli = typer.Typer(help="The methods the server offers and their hyperparameters.", no_args_is_help=True)
keys_cli = typer.Typer(
    help="The server's API keys (LABELSERVE_API_KEYS_FILE): add one, or revoke one.", no_args_is_help=True
)
cli.add_typer(datasets_cli, name="datasets")
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(models_cli, name="models")
cli.add_typer(methods_cli, name="methods")
cli.add_typer(keys_cli, name="keys")
Command = TypeVar("Command", bound=Callable[..., Any])
# --wide (set by the root callback): tables are never folded to the terminal's width
display = {"wide": False}


@cache
def console(stderr: bool = False) -> Console:
    """The rich console of stdout (tables) or stderr (messages, progress)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def say(message: str) -> None:
    """A line on stderr (what happened, warnings, errors): plain text, no rich needed."""
    print(message, file=sys.stderr)


def show(text: str) -> None:
    """A line on stdout."""
    print(text)


JsonOption = Annotated[bool, typer.Option("--json", help="Print the server's JSON instead of a table.")]
LimitOption = Annotated[int, typer.Option(help="At most this many.")]
OffsetOption = Annotated[int, typer.Option(help="Skip this many.")]
FollowOption = Annotated[bool, typer.Option("--follow", "-f", help="Show a progress bar until the job ends.")]
TimeoutOption = Annotated[
    float | None, typer.Option("--timeout", help="With --follow: give up after this many seconds (exit 7).")
]
WaitTimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", help="Give up waiting after this many seconds (exit 7); the job keeps running."),
]


# plumbing -----------------------------------------------------------------------------------
def _version(value: bool) -> None:
    if value:
        print(f"labelserve {package.__version__}")
        raise typer.Exit()


@cli.callback()
def root(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(envvar="LABELSERVE_URL", help="The labelserve server.")] = DEFAULT_URL,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="LABELSERVE_API_KEY", help="The server's API key, if it has one.", show_default=False),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Tables as wide as their contents, never folded to the terminal.")
    ] = False,
) -> None:
    ctx.obj = {"url": url, "api_key": api_key}
    display["wide"] = wide


def fail(code: Exit, message: str) -> NoReturn:
    say(f"error: {message}")
    raise typer.Exit(int(code))


def make_client(url: str, api_key: str | None) -> Client:
    """The client every command uses (one place to swap the transport, e.g. in tests)."""
    from app.client.http import Client

    return Client(url, api_key)


@contextmanager
def connect(ctx: typer.Context) -> Iterator[Client]:
    """The client for ``--url``; server errors become a message on stderr and an exit code."""
    import httpx

    from app.client.http import ApiError, describe_detail

    try:
        with make_client(ctx.obj["url"], ctx.obj["api_key"]) as client:
            yield client
    except ApiError as exc:
        status = exc.status_code
        code = (
            Exit.NOT_FOUND
            if status == 404
            else Exit.AUTH
            if status in (401, 403)
            else Exit.SERVER
            if status >= 500
            else Exit.REJECTED
        )
        fail(code, f"{status}: {describe_detail(exc.detail)}")
    except httpx.TransportError as exc:
        fail(Exit.SERVER, f"cannot reach {ctx.obj['url']}: {exc}")


def emit(data: Any, as_json: bool, render: Callable[[], None]) -> None:
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        render()


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A table on stdout: boxed and fitted to the terminal, or plain columns when stdout is not one.

    In a pipe, a file or a CI log there is no width to fit, and a boxed table folded to rich's
    default 80 columns breaks words across lines (``multila``/``bel``); plain columns keep one
    line per row, for ``grep``, ``cut`` and eyes alike.
    """
    cells = [
        ["" if cell is None else number(cell) if isinstance(cell, float) else str(cell) for cell in row] for row in rows
    ]
    if not sys.stdout.isatty():
        plain_table(title, columns, cells)
        return
    from rich.console import Console
    from rich.table import Table

    view = Table(title=title, title_justify="left")
    for column in columns:
        # ids are what a user copies into the next command: never wrapped
        view.add_column(column, overflow="fold", no_wrap=display["wide"] or column == "id", min_width=len(column))
    for row in cells:
        view.add_row(*row)
    # --wide: a console wider than any table, so that no cell is folded (or cropped by no_wrap)
    wide = Console(width=1_000_000, highlight=False, soft_wrap=False) if display["wide"] else None
    (wide or console()).print(view)


def plain_table(title: str | None, columns: list[str], rows: list[list[str]]) -> None:
    """Left-aligned columns two spaces apart, a header line and one line per row, never folded."""
    widths = [max([len(column), *(len(row[j]) for row in rows)]) for j, column in enumerate(columns)]
    lines = [title] if title else []
    for row in [columns, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")


def fields(title: str, record: dict[str, Any], keys: list[str] | None = None) -> None:
    """One record as a two-column key/value table: its numbers rounded (``shown``), its ``params``
    one ``key=value`` line each, as given."""
    rows: list[list[Any]] = []
    for key, value in record.items():
        if keys is not None and key not in keys:
            continue
        if key == "params" and isinstance(value, dict) and value:
            first, *more = settings(value)
            rows += [[key, first], *([None, line] for line in more)]
        else:
            rows.append([key, shown(value)])
    table(title, ["field", "value"], rows)


def page_table(title: str, columns: list[str], rows: list[list[Any]], page: dict[str, Any]) -> None:
    """A listing, and how to get its next page."""
    table(title, columns, rows)
    if page.get("next_offset") is not None:
        show(f"more: --offset {page['next_offset']}")


def short(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f", … (+{len(names) - limit})" if len(names) > limit else "")


def when(timestamp: str | None, *, day: bool = False) -> str:
    """A listing's timestamp to the minute (``2026-12-02 06:18``), or the ``day`` (datasets and
    models, so that their listing fits 80 columns); the full one is in ``show`` and --json."""
    return "" if not timestamp else timestamp.replace("T", " ")[: 10 if day else 16]


def number(value: float) -> str:
    """A measured number for people: 3 significant digits (0.0556, 1230, 1.23e-05); --json keeps
    every digit."""
    return f"{float(f'{value:.3g}'):g}"


def shown(value: Any) -> str:
    """A value in a table: text as it is, a number rounded (``number``), anything else as JSON with
    its numbers rounded."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return number(value)
    return json.dumps(_rounded(value))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(number(value))
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def settings(params: dict[str, Any]) -> list[str]:
    """Hyperparameters as ``key=value`` (what ``--param`` takes), every digit kept: they are what was
    asked for, not measurements."""
    return [f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in params.items()]
