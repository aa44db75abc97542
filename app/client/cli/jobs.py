"""``labelserve train``, ``compare`` and ``labelserve jobs``: submit, follow with a progress bar, list, cancel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.client.cli.base import (
    Exit,
    FollowOption,
    JsonOption,
    LimitOption,
    OffsetOption,
    TimeoutOption,
    WaitTimeoutOption,
    cli,
    connect,
    console,
    emit,
    fail,
    fields,
    jobs_cli,
    number,
    page_table,
    say,
    show,
    table,
    when,
)

if TYPE_CHECKING:
    from app.client.http import Client

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
                when(job["created_at"]),
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
                number(score.get("mean", float("nan"))),
                number(score.get("std", float("nan"))),
                number(entry.get("fit_seconds", float("nan"))),
            ]
        )
    title = f"{ranked} by {result['cv']}-fold cross-validation on {dataset}"
    emit(result, as_json, lambda: table(title, ["rank", "method", "mean", "std", "fit s"], rows))
    if report is not None and not as_json:
        say(f"report written to {report}")
