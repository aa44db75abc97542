"""``labelserve datasets``: upload (the options of ``app.upload_options``), list, show, delete, split."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from app.client.cli.base import (
    Command,
    JsonOption,
    LimitOption,
    OffsetOption,
    connect,
    datasets_cli,
    emit,
    fields,
    page_table,
    say,
    short,
    table,
    when,
)
from app.upload_options import UPLOAD_OPTIONS, UploadOption


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
        dataset, stored = client.store_dataset(file, labels_file=labels_file, **options)
    if not stored:
        say(f"already stored: the same upload is dataset {dataset['id']} ({dataset['name']})")
    emit(dataset, as_json, lambda: show_dataset(dataset))


def show_dataset(dataset: dict[str, Any]) -> None:
    record = dict(dataset)
    record["feature_names"] = short(dataset["feature_names"])
    record["label_names"] = short(dataset["label_names"])
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
            when(d["created_at"], day=True),
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
    train_name: Annotated[
        str | None,
        typer.Option(help="Name of the train part (default NAME-train, or NAME-train-2 ... when that name is taken)."),
    ] = None,
    test_name: Annotated[
        str | None,
        typer.Option(help="Name of the test part (default NAME-test, or NAME-test-2 ... when that name is taken)."),
    ] = None,
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
