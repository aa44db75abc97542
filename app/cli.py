"""The labelserve command.

Server side: serve (the API), worker (a Celery worker) and migrate. Client side, over HTTP with
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

import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, TypeVar

import typer

import app as package
from app.client import DEFAULT_URL, ApiError, Client, describe_detail
from app.upload_options import UPLOAD_OPTIONS, UploadOption

# rich, httpx and the server's modules are imported where they are used: a ``--help`` or a simple
# call should start in well under half a second (benchmarks/cli_startup.py measures it)
if TYPE_CHECKING:
    from rich.console import Console


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
cli.add_typer(datasets_cli, name="datasets")
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(models_cli, name="models")
cli.add_typer(methods_cli, name="methods")

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


# server-side commands -----------------------------------------------------------------------
@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes.")] = 1,
) -> None:
    """Start the HTTP API (app.main:app with uvicorn; several workers share the port evenly)."""
    from app.server import serve as run

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
    from app.db import current_revision
    from app.db import migrate as apply_migrations
    from app.observability import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level)
    url = settings.resolved_database_url
    apply_migrations(url, revision, sql=sql)
    if not sql:
        logging.getLogger("labelserve.db").info("database migrated", extra={"revision": current_revision(url)})


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
    return Client(url, api_key)


@contextmanager
def connect(ctx: typer.Context) -> Iterator[Client]:
    """The client for ``--url``; server errors become a message on stderr and an exit code."""
    import httpx

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
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
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
    """One record as a two-column key/value table."""
    shown = keys if keys is not None else list(record)
    rows = [[key, value if isinstance(value, str) else json.dumps(value)] for key, value in record.items()]
    table(title, ["field", "value"], [row for row in rows if row[0] in shown])


def page_table(title: str, columns: list[str], rows: list[list[Any]], page: dict[str, Any]) -> None:
    """A listing, and how to get its next page."""
    table(title, columns, rows)
    if page.get("next_offset") is not None:
        show(f"more: --offset {page['next_offset']}")


def _short(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f", … (+{len(names) - limit})" if len(names) > limit else "")


def _when(timestamp: str | None, *, day: bool = False) -> str:
    """A listing's timestamp to the minute (``2026-12-02 06:18``), or the ``day`` (datasets and
    models, so that their listing fits 80 columns); the full one is in ``show`` and --json."""
    return "" if not timestamp else timestamp.replace("T", " ")[: 10 if day else 16]


def _option(option: UploadOption) -> inspect.Parameter:
    """The ``datasets upload`` option of one declared upload option (unset: the server's default)."""
    help = option.description + (f" (default: {option.default})" if option.default is not None else "")
    kind: Any = Literal[option.choices] if option.choices else option.kind
    flag = "--" + option.name.replace("_", "-")
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[kind | None, typer.Option(flag, help=help, show_default=False, min=option.minimum)],
    )


def with_upload_options(command: Command) -> Command:
    """Replace the command's ``**options`` by one option per declared upload option (Typer reads the
    options from the signature and passes them back as keyword arguments)."""
    signature = inspect.signature(command, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*fixed, *(_option(option) for option in UPLOAD_OPTIONS)]
    )
    return command


# datasets -----------------------------------------------------------------------------------
@datasets_cli.command("upload")
@with_upload_options
def datasets_upload(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="ARFF, CSV, LIBSVM or MAT file.")],
    labels_file: Annotated[
        Path | None, typer.Option(exists=True, dir_okay=False, help="Mulan XML label file (ARFF).")
    ] = None,
    as_json: JsonOption = False,
    **options: Any,
) -> None:
    """Upload a dataset file; uploading the same content again returns the stored dataset."""
    with connect(ctx) as client:
        dataset = client.upload_dataset(file, labels_file=labels_file, **options)
    emit(dataset, as_json, lambda: show_dataset(dataset))


def show_dataset(dataset: dict[str, Any]) -> None:
    record = dict(dataset)
    record["feature_names"] = _short(dataset["feature_names"])
    record["label_names"] = _short(dataset["label_names"])
    fields(f"dataset {dataset['id']}", record)
    for warning in dataset.get("warnings", []):
        say(f"warning: {warning}")


@datasets_cli.command("list")
def datasets_list(
    ctx: typer.Context,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    as_json: JsonOption = False,
) -> None:
    """List the stored datasets."""
    with connect(ctx) as client:
        page = client.datasets(limit, offset)
    rows = [
        [
            d["id"],
            d["name"],
            d["kind"],
            d["n_samples"],
            d["n_features"],
            d["n_labels"],
            _when(d["created_at"], day=True),
        ]
        for d in page["items"]
    ]
    columns = ["id", "name", "kind", "samples", "features", "labels", "created"]
    emit(page, as_json, lambda: page_table("datasets", columns, rows, page))


@datasets_cli.command("show")
def datasets_show(
    ctx: typer.Context,
    dataset_id: Annotated[str, typer.Argument(help="Dataset id or unique name.")],
    as_json: JsonOption = False,
) -> None:
    """Show one dataset."""
    with connect(ctx) as client:
        dataset = client.dataset(dataset_id)
    emit(dataset, as_json, lambda: show_dataset(dataset))


@datasets_cli.command("delete")
def datasets_delete(
    ctx: typer.Context,
    dataset_id: Annotated[str, typer.Argument(help="Dataset id or unique name.")],
    force: Annotated[
        bool, typer.Option("--force", help="Delete it even if model versions were trained on it (they stay).")
    ] = False,
) -> None:
    """Delete a dataset (refused while a job uses it, or while model versions were trained on it unless --force)."""
    with connect(ctx) as client:
        client.delete_dataset(dataset_id, force=force)
    say(f"deleted dataset {dataset_id}")


@datasets_cli.command("split")
def datasets_split(
    ctx: typer.Context,
    dataset_id: Annotated[str, typer.Argument(help="Dataset id or unique name.")],
    test_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of the rows for the test part (0-1, exclusive).")
    ] = 0.2,
    random_state: Annotated[int, typer.Option(min=0, help="Seed: the same seed splits the same way.")] = 0,
    train_name: Annotated[str | None, typer.Option(help="Name of the train part (default NAME-train).")] = None,
    test_name: Annotated[str | None, typer.Option(help="Name of the test part (default NAME-test).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Split a dataset into a train and a test dataset (stratified for multi-label, shuffled for distributions)."""
    with connect(ctx) as client:
        parts = client.split_dataset(
            dataset_id,
            test_fraction=test_fraction,
            random_state=random_state,
            train_name=train_name,
            test_name=test_name,
        )

    def shown() -> None:
        rows = [[part, d["id"], d["name"], d["n_samples"]] for part, d in parts.items()]
        table(f"split of {dataset_id}", ["part", "id", "name", "samples"], rows)
        for part, d in parts.items():
            for warning in d.get("warnings", []):
                say(f"warning ({part}): {warning}")

    emit(parts, as_json, shown)


# training and jobs --------------------------------------------------------------------------
PARAM_HELP = (
    "Hyperparameter KEY=VALUE (repeatable). VALUE is JSON when it parses (5, 0.1, true, null, "
    '["br", "mlknn"]), else a comma list (candidates=br,mlknn; k=3,5 are numbers), else a string.'
)


def parse_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``; VALUE is read as JSON when it parses (5, 0.1, true, [1, 2]), else as a comma
    list when it has a comma (``br,mlknn``: each item JSON when it parses, else a string), else as
    a string. A string holding a comma is written as JSON: ``'key="a,b"'``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"'{text}' is not KEY=VALUE", param_hint="--param")
    if "," in value and _json(value) is _NOT_JSON:
        items = [item.strip() for item in value.split(",")]
        return key.strip(), [item if (parsed := _json(item)) is _NOT_JSON else parsed for item in items]
    parsed = _json(value)
    return key.strip(), value if parsed is _NOT_JSON else parsed


_NOT_JSON = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


@cli.command()
def train(
    ctx: typer.Context,
    method: Annotated[str, typer.Argument(help="Method id (labelserve methods list).")],
    dataset: Annotated[str, typer.Argument(help="Dataset id or unique name.")],
    name: Annotated[str, typer.Option("--name", "-n", help="Model name; each training adds a version.")],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help=PARAM_HELP)] = None,
    random_state: Annotated[
        int | None, typer.Option(help="Seed, for a reproducible fit (auto: 0 when omitted; a method: drawn and shown).")
    ] = None,
    follow: FollowOption = False,
    timeout: TimeoutOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue a training job; with --follow, show its progress and stage until it ends.

    With --follow the exit code says how the job ended: 0 succeeded, 1 failed or cancelled.
    """
    params = dict(parse_param(item) for item in param or [])
    with connect(ctx) as client:
        accepted = client.train(method, dataset, name, params=params, random_state=random_state)
        if not follow:
            emit(
                accepted,
                as_json,
                lambda: show(
                    f"job {accepted['job_id']} queued{_seeded(accepted)}; follow it with: "
                    f"labelserve jobs show {accepted['job_id']} --follow"
                ),
            )
            return
        job = follow_job(client, accepted["job_id"], timeout, quiet=as_json)
    finish(job, as_json)


def _seeded(job: dict[str, Any]) -> str:
    """`` with random_state N`` for a job that runs with a seed (the answer says which)."""
    seed = job.get("random_state")
    return f" with random_state {seed}" if seed is not None else ""


def follow_job(client: Client, job_id: str, timeout: float | None, *, quiet: bool = False) -> dict[str, Any]:
    """Wait until the job ends, with a progress bar (stage, fraction, ETA) unless ``quiet``.

    The end is seen as soon as it happens (the client long-polls ``GET /jobs/{id}?wait=``);
    the bar is refreshed from each answer, at least once a second.
    """
    try:
        if quiet:
            return client.wait(job_id, timeout=timeout)
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console(stderr=True), transient=False) as bar:
            task = bar.add_task(f"job {job_id[:8]} queued", total=1.0)

            def update(job: dict[str, Any]) -> None:
                stage = job["stage"] or job["status"]
                bar.update(task, completed=job["progress"], description=f"{job['kind']} {job['status']}: {stage}")

            return client.wait(job_id, timeout=timeout, on_update=update)
    except TimeoutError as exc:
        fail(Exit.TIMEOUT, f"{exc}; it keeps running (labelserve jobs cancel {job_id} stops it)")
    except KeyboardInterrupt:
        fail(Exit.INTERRUPTED, f"stopped following; job {job_id} keeps running")


def finish(job: dict[str, Any], as_json: bool) -> None:
    """Print the ended job and exit non-zero unless it succeeded."""
    emit(job, as_json, lambda: show_job(job))
    if job["status"] != "succeeded":
        if not as_json:
            say(f"job {job['id']} {job['status']}: {job.get('error') or ''}")
        raise typer.Exit(int(Exit.JOB_FAILED))


def show_job(job: dict[str, Any]) -> None:
    record = dict(job)
    if job.get("model"):
        record["model"] = f"{job['model']['name']}@{job['model']['version']}"
    fields(f"job {job['id']}", record)


@jobs_cli.command("list")
def jobs_list(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option(help="Only jobs in this status: queued, running, succeeded, failed, cancelled.")
    ] = None,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    as_json: JsonOption = False,
) -> None:
    """List jobs, newest first."""
    with connect(ctx) as client:
        page = client.jobs(status, limit, offset)
    rows = []
    for job in page["items"]:
        model = f"{job['model']['name']}@{job['model']['version']}" if job.get("model") else ""
        rows.append(
            [
                job["id"],
                job["kind"],
                job["status"],
                f"{job['progress']:.0%}",
                job["stage"],
                model,
                _when(job["created_at"]),
            ]
        )
    columns = ["id", "kind", "status", "progress", "stage", "model", "created"]
    emit(page, as_json, lambda: page_table("jobs", columns, rows, page))


@jobs_cli.command("show")
def jobs_show(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="Job id.")],
    follow: FollowOption = False,
    timeout: TimeoutOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one job; with --follow, wait for it with a progress bar (exit 1 unless it succeeds)."""
    with connect(ctx) as client:
        job = follow_job(client, job_id, timeout, quiet=as_json) if follow else client.job(job_id)
    if follow:
        finish(job, as_json)
    else:
        emit(job, as_json, lambda: show_job(job))


@jobs_cli.command("cancel")
def jobs_cancel(
    ctx: typer.Context, job_id: Annotated[str, typer.Argument(help="Job id.")], as_json: JsonOption = False
) -> None:
    """Cancel a queued or running job."""
    with connect(ctx) as client:
        job = client.cancel_job(job_id)
    emit(job, as_json, lambda: show_job(job))


# prediction and evaluation ------------------------------------------------------------------
def read_instances(path: str) -> list[Any]:
    """Instances from a JSON file (a list, or ``{"instances": [...]}``) or a CSV file with a header.

    CSV rows become ``{column: value}`` objects, so the column order need not be the training
    order; ``-`` reads JSON from standard input.
    """
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    if path.lower().endswith(".csv"):
        import csv
        import io

        try:
            return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(io.StringIO(text))]
        except ValueError as exc:
            raise typer.BadParameter(f"{path}: {exc}", param_hint="--input") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{path}: not JSON or CSV ({exc})", param_hint="--input") from None
    instances = data.get("instances") if isinstance(data, dict) else data
    if not isinstance(instances, list):
        raise typer.BadParameter(f"{path}: expected a list of instances", param_hint="--input")
    return instances


def _number(value: float) -> str:
    return f"{value:.4g}"


def show_predictions(result: dict[str, Any]) -> None:
    model = result["model"]
    title = f"{model['name']}@{model['version']} ({model['method']}): {result['output']}"
    if result["output"] == "features":
        rows = [[f["index"], f["name"], _number(f["score"])] for f in result["features"]]
        table(title, ["index", "feature", "score"], rows)
        return
    predictions = result["predictions"]
    if result["output"] == "distribution":
        labels = list(predictions[0]["distribution"]) if predictions else []
        rows = [[i, *(_number(p["distribution"][label]) for label in labels)] for i, p in enumerate(predictions)]
        table(title, ["#", *labels], rows)
        return
    if result["output"] == "ranking":
        rows = [
            [i, ", ".join(f"{r['label']} {_number(r['score'])}" for r in p["ranking"])]
            for i, p in enumerate(predictions)
        ]
        table(title, ["#", "ranking (best first)"], rows)
        return
    extra = [key for key in (predictions[0] if predictions else {}) if key != "labels"]
    rows = []
    for i, p in enumerate(predictions):
        cells = [json.dumps(p[key]) if not isinstance(p[key], str) else p[key] for key in extra]
        rows.append([i, ", ".join(p["labels"]), *cells])
    table(title, ["#", "labels", *extra], rows)


@cli.command()
def predict(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Model reference: name, name@version or name@alias.")],
    input: Annotated[
        str | None, typer.Option("--input", "-i", help="JSON or CSV file of instances ('-': JSON on stdin).")
    ] = None,
    dataset: Annotated[str | None, typer.Option(help="Predict a stored dataset instead.")] = None,
    output: Annotated[str | None, typer.Option(help="labels, ranking, distribution or features.")] = None,
    top_k: Annotated[int | None, typer.Option(help="ranking/features: keep the best k.")] = None,
    threshold: Annotated[float | None, typer.Option(help="labels: score threshold.")] = None,
    include_scores: Annotated[bool, typer.Option("--include-scores", help="labels: add the scores.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Predict label sets, rankings or distributions, or list a selector's features."""
    instances = read_instances(input) if input is not None else None
    with connect(ctx) as client:
        result = client.predict(
            model,
            instances,
            dataset_id=dataset,
            output=output,
            threshold=threshold,
            top_k=top_k,
            include_scores=include_scores,
        )
    if "job_id" in result:  # a large dataset: the queued job's answer (202)
        emit(
            result,
            as_json,
            lambda: show(
                f"large dataset: predicted by job {result['job_id']}; "
                f"follow it with labelserve jobs show {result['job_id']} --follow"
            ),
        )
        return
    emit(result, as_json, lambda: show_predictions(result))


@cli.command()
def evaluate(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Model reference: name, name@version or name@alias.")],
    dataset: Annotated[str, typer.Argument(help="Dataset (id or unique name) with the true labels.")],
    top_k: Annotated[int | None, typer.Option(help="Selectors: how many features the downstream ML-kNN uses.")] = None,
    threshold: Annotated[float | None, typer.Option(help="Classifiers: score threshold.")] = None,
    as_json: JsonOption = False,
) -> None:
    """The standard metrics of the model's task on a stored dataset."""
    with connect(ctx) as client:
        result = client.evaluate(model, dataset, top_k=top_k, threshold=threshold)
    model_info = result["model"]
    title = f"{model_info['name']}@{model_info['version']} on {result['dataset_id']} ({result['n_samples']} samples)"
    rows = [[name, "n/a" if value is None else _number(value)] for name, value in result["metrics"].items()]
    emit(result, as_json, lambda: table(title, ["metric", "value"], rows))


# registry and methods -----------------------------------------------------------------------
@models_cli.command("list")
def models_list(
    ctx: typer.Context,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    as_json: JsonOption = False,
) -> None:
    """List the registered models."""
    with connect(ctx) as client:
        page = client.models(limit, offset)
    rows = []
    for model in page["items"]:
        latest = model["versions"][-1] if model["versions"] else {}
        aliases = ", ".join(f"{alias}={version}" for alias, version in model["aliases"].items())
        rows.append(
            [
                model["name"],
                model["latest_version"],
                latest.get("method"),
                aliases,
                _when(latest.get("created_at"), day=True),
            ]
        )
    columns = ["name", "latest", "method", "aliases", "created"]
    emit(page, as_json, lambda: page_table("models", columns, rows, page))


@models_cli.command("show")
def models_show(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Argument(help="Model name (all its versions), or name@version / name@alias (that version).")
    ],
    version: Annotated[int | None, typer.Option(help="One version in full (or name@version).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a model's versions and aliases, or one version in full (name@version, name@alias or --version)."""
    if "@" in model and version is not None:
        raise typer.BadParameter("give the version as name@version or as --version, not both", param_hint="--version")
    name = model.partition("@")[0]
    with connect(ctx) as client:
        if "@" in model or version is not None:
            record = client.model_version(model if version is None else f"{name}@{version}")
            emit(record, as_json, lambda: fields(f"{name}@{record['version']}", record))
            return
        record = client.model(name)
    rows = [
        [
            v["version"],
            v["method"],
            v["dataset_id"],
            json.dumps(v["params"]),
            _number(v["training_seconds"]),
            _when(v["created_at"]),
        ]
        for v in record["versions"]
    ]
    aliases = ", ".join(f"{alias}={v}" for alias, v in record["aliases"].items()) or "none"
    emit(
        record,
        as_json,
        lambda: table(
            f"{name} (aliases: {aliases})", ["version", "method", "dataset", "params", "seconds", "created"], rows
        ),
    )


@models_cli.command("export")
def models_export(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Model reference: name (latest version), name@version or name@alias.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", dir_okay=False, help="Zip file to write (default NAME-VERSION.zip)."),
    ] = None,
) -> None:
    """Download a version as a zip: model.pkl (the pickle as stored) and manifest.json (library versions, sha256).

    Load it with pickle and the library versions the manifest lists; unpickling runs code, so load only files
    you trust. There is no import: a pickle is not accepted by the server.
    """
    with connect(ctx) as client:
        path = client.export_model(model, output)
    say(f"wrote {path}")


@models_cli.command("alias")
def models_alias(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Model name.")],
    alias: Annotated[str, typer.Argument(help="Alias, e.g. prod.")],
    version: Annotated[int | None, typer.Argument(help="Version the alias points to.")] = None,
    delete: Annotated[bool, typer.Option("--delete", help="Remove the alias instead.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Point NAME@ALIAS at a version, or remove the alias with --delete."""
    if (version is None) != delete:
        raise typer.BadParameter("give a VERSION, or --delete to remove the alias", param_hint="VERSION")
    with connect(ctx) as client:
        if delete:
            client.delete_alias(name, alias)
            say(f"removed alias {name}@{alias}")
            return
        assert version is not None
        record = client.set_alias(name, alias, version)
    emit(record, as_json, lambda: show(f"{name}@{alias} -> version {record['aliases'][alias]}"))


@methods_cli.command("list")
def methods_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the methods, their task and outputs."""
    with connect(ctx) as client:
        page = client.methods(limit=1000)
    rows = [[m["id"], m["task"], m["dataset_kind"], ", ".join(m["outputs"]), m["summary"]] for m in page["items"]]
    emit(page, as_json, lambda: table("methods", ["id", "task", "dataset kind", "outputs", "summary"], rows))


@methods_cli.command("show")
def methods_show(
    ctx: typer.Context, method_id: Annotated[str, typer.Argument(help="Method id.")], as_json: JsonOption = False
) -> None:
    """Show a method's hyperparameters: type, default, range, meaning."""
    with connect(ctx) as client:
        method = client.method(method_id)
    rows = []
    for key, spec in method["params"].get("properties", {}).items():
        bounds = [
            f"{op} {spec[op]}" for op in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum") if op in spec
        ]
        kind = spec.get("type") or " | ".join(str(s.get("type")) for s in spec.get("anyOf", []))
        rows.append([key, kind, json.dumps(spec.get("default")), ", ".join(bounds), spec.get("description", "")])
    title = f"{method['id']}: {method['summary']} (outputs: {', '.join(method['outputs'])})"
    emit(method, as_json, lambda: table(title, ["param", "type", "default", "range", "meaning"], rows))


# comparison ---------------------------------------------------------------------------------
@cli.command()
def compare(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="Dataset id or unique name.")],
    method: Annotated[
        list[str] | None, typer.Option("--method", "-m", help="Method to compare (repeatable; default: all that fit).")
    ] = None,
    metric: Annotated[str | None, typer.Option(help="Metric to rank by (any metric of evaluate).")] = None,
    cv: Annotated[int | None, typer.Option(help="Cross-validation folds.")] = None,
    random_state: Annotated[int | None, typer.Option(help="Seed of the folds.")] = None,
    report: Annotated[Path | None, typer.Option(help="Also save the HTML report to this file.")] = None,
    timeout: WaitTimeoutOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cross-validate methods on a dataset and print the leaderboard (best first)."""
    with connect(ctx) as client:
        accepted = client.compare(dataset, methods=method, metric=metric, cv=cv, random_state=random_state)
        job_id = accepted["job_id"]
        job = follow_job(client, job_id, timeout, quiet=as_json)
        if job["status"] != "succeeded":
            finish(job, as_json)
        result = json.loads(client.job_result(job_id))
        if report is not None:
            report.write_text(client.compare_report(job_id))
    ranked = result["metric"]
    rows = []
    for rank, entry in enumerate(result["leaderboard"], 1):
        score = entry["metrics"].get(ranked, {})
        rows.append(
            [
                rank,
                entry["method"],
                _number(score.get("mean", float("nan"))),
                _number(score.get("std", float("nan"))),
                _number(entry.get("fit_seconds", float("nan"))),
            ]
        )
    title = f"{ranked} by {result['cv']}-fold cross-validation on {dataset}"
    emit(result, as_json, lambda: table(title, ["rank", "method", "mean", "std", "fit s"], rows))
    if report is not None and not as_json:
        say(f"report written to {report}")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
