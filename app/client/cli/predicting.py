"""``labelserve predict`` and ``evaluate``: instances from a file, predictions as a table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from app.client.cli.base import JsonOption, cli, connect, emit, number, show, table


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


def show_predictions(result: dict[str, Any]) -> None:
    model = result["model"]
    title = f"{model['name']}@{model['version']} ({model['method']}): {result['output']}"
    if result["output"] == "features":
        rows = [[f["index"], f["name"], number(f["score"])] for f in result["features"]]
        table(title, ["index", "feature", "score"], rows)
        return
    predictions = result["predictions"]
    if result["output"] == "distribution":
        labels = list(predictions[0]["distribution"]) if predictions else []
        rows = [[i, *(number(p["distribution"][label]) for label in labels)] for i, p in enumerate(predictions)]
        table(title, ["#", *labels], rows)
        return
    if result["output"] == "ranking":
        rows = [
            [i, ", ".join(f"{r['label']} {number(r['score'])}" for r in p["ranking"])]
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
    rows = [[name, "n/a" if value is None else number(value)] for name, value in result["metrics"].items()]
    emit(result, as_json, lambda: table(title, ["metric", "value"], rows))
