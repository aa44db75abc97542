"""``labelserve models`` (the registry: list, show, export, aliases), ``labelserve audit`` and
``labelserve methods``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.client.cli.base import (
    JsonOption,
    LimitOption,
    OffsetOption,
    cli,
    connect,
    emit,
    fields,
    methods_cli,
    models_cli,
    number,
    page_table,
    say,
    settings,
    show,
    table,
    when,
)


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
                when(latest.get("created_at"), day=True),
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
            ", ".join(settings(v["params"])),
            number(v["training_seconds"]),
            when(v["created_at"]),
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


@cli.command("audit")
def audit(
    ctx: typer.Context,
    action: Annotated[
        str | None,
        typer.Option(help="Only this action: alias.set, alias.delete, version.delete, model.delete, dataset.delete."),
    ] = None,
    key: Annotated[str | None, typer.Option(help="Only the changes of the API key of this name.")] = None,
    target: Annotated[
        str | None, typer.Option(help="Only this target: name@alias, name@version, a name, a dataset id.")
    ] = None,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    as_json: JsonOption = False,
) -> None:
    """Who moved aliases and deleted versions, models and datasets, newest first (an admin key)."""
    with connect(ctx) as client:
        page = client.audit(action, key, target, limit, offset)
    rows = [
        [
            when(e["at"]),
            e["action"],
            e["target"],
            e["key_name"] or "",
            e["address"] or "",
            json.dumps(e["detail"] or {}),
        ]
        for e in page["items"]
    ]
    columns = ["at", "action", "target", "key", "address", "detail"]
    emit(page, as_json, lambda: page_table("audit events", columns, rows, page))


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
