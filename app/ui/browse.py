"""``/ui``'s datasets, models and versions: their lists (a search box and filters kept in the
address, totals and page numbers), their pages, and every action the API has on them, each
behind the role and the confirmation the API asks for: upload, split and delete a dataset; set
and remove aliases; delete a version or a model; export a version's artifact; evaluate a
version on a chosen dataset; and the side-by-side comparison of versions.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile

from app.api import access
from app.api.routes.models import version_artifact
from app.errors import Conflict, DomainError, InvalidInput
from app.evaluation import reports
from app.registry.refs import ALIAS_PATTERN, ID_PATTERN, NAME_PATTERN
from app.schemas import SplitRequest, VersionOut
from app.scoring import LOWER_IS_BETTER
from app.services import datasets, models
from app.services.datasets import Upload
from app.ui import data
from app.ui.pages import (
    PAGE,
    check_path,
    domain_text,
    failure,
    form_text,
    offset_of,
    posted_form,
    pydantic_text,
    render,
    report_response,
    see,
    threaded,
)
from app.upload_options import PARSE_OPTIONS

router = APIRouter(prefix="/ui", include_in_schema=False)


# -------------------------------------------------------------------------------- datasets
def _dataset_filter(request: Request) -> tuple[datasets.DatasetFilter, dict[str, str]]:
    """The listing's filter from the address, and the filter's fields as they are kept in links."""
    query = request.query_params
    kind = query.get("kind", "")
    kept = datasets.DatasetFilter(
        name=query.get("q", "").strip()[:255],
        kind=kind if kind in ("multilabel", "distribution") else "",
        min_rows=_count(query.get("min_rows", "")),
        max_rows=_count(query.get("max_rows", "")),
    )
    fields = {
        "q": kept.name,
        "kind": kept.kind,
        "min_rows": query.get("min_rows", ""),
        "max_rows": query.get("max_rows", ""),
    }
    return kept, {k: v for k, v in fields.items() if v}


def _count(text: str) -> int | None:
    return int(text) if text.strip().isdigit() and len(text) < 12 else None


def _datasets_context(request: Request, offset: int, **extra: Any) -> dict[str, Any]:
    kept, fields = _dataset_filter(request)
    found, total = data.search_datasets(request.app.state.core, offset, PAGE, kept)
    return {"title": "Datasets", "page": found, "total": total, "offset": offset, "limit": PAGE, "filters": fields,
            **extra}  # fmt: skip


@router.get("/datasets")
def datasets_page(request: Request) -> HTMLResponse:
    return render(request, "datasets.html", _datasets_context(request, offset_of(request)))


@router.post("/datasets")
async def upload(request: Request) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    file = form.get("file")
    labels = form.get("labels_file")
    if not isinstance(file, UploadFile) or not file.filename:
        error = "file: choose a dataset file (ARFF, CSV, LIBSVM or MAT)"
        return render(request, "datasets.html", _datasets_context(request, 0, error=error), 422)
    try:
        options = _upload_options(form)
    except InvalidInput as exc:
        return render(request, "datasets.html", _datasets_context(request, 0, error=str(exc)), 422)
    request_upload = Upload(
        content=await file.read(),
        filename=file.filename,
        labels_file=await labels.read() if isinstance(labels, UploadFile) and labels.filename else None,
        name=form_text(form, "name") or None,
        options=options,
    )
    try:
        row, _ = await threaded(data.upload_dataset, request.app.state.core, request_upload)
    except DomainError as exc:
        return render(request, "datasets.html", _datasets_context(request, 0, error=str(exc)), exc.status_code)
    return see(f"/ui/datasets/{row.id}")


def _upload_options(form: FormData) -> dict[str, Any]:
    """The parse options of ``app.upload_options`` from the form (empty fields: their defaults)."""
    options: dict[str, Any] = {}
    for option in PARSE_OPTIONS:
        text = form_text(form, option.name)
        if not text:
            options[option.name] = option.default
        elif option.kind is int:
            if not text.isdigit() or len(text) > 12:
                raise InvalidInput(f"{option.name}: give a whole number", loc=("body", option.name))
            options[option.name] = int(text)
        else:
            options[option.name] = text
    return options


@router.get("/datasets/{dataset_id}")
def dataset_page(request: Request, dataset_id: str) -> HTMLResponse:
    try:
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        view = data.dataset_view(request.app.state.core, dataset_id)
    except DomainError as exc:
        return failure(request, exc)
    top = max((c for _, c in view.label_counts), default=0) or 1
    return render(request, "dataset.html", {"title": view.dataset.name, "view": view, "top": top})


@router.post("/datasets/{dataset_id}/split")
async def split(request: Request, dataset_id: str) -> Response:
    """``POST /datasets/{id}/split`` from the dataset's page; back to it, its parts listed."""
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    try:
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        fraction, seed = form_text(form, "test_fraction"), form_text(form, "random_state")
        body = SplitRequest.model_validate(
            {
                "test_fraction": float(fraction) if fraction else 0.2,
                "random_state": int(seed) if seed.isdigit() else 0,
                "train_name": form_text(form, "train_name") or None,
                "test_name": form_text(form, "test_name") or None,
            }
        )
        await threaded(data.split_dataset, request.app.state.core, dataset_id, body)
    except ValueError as exc:  # a fraction that is no number, and pydantic's ValidationError
        text = (
            pydantic_text(exc) if isinstance(exc, ValidationError) else "test_fraction: give a number between 0 and 1"
        )
        return render(request, "error.html", {"title": "Not split", "message": text}, 422)
    except DomainError as exc:
        return render(request, "error.html", {"title": "Not split", "message": domain_text(exc)}, exc.status_code)
    return see(f"/ui/datasets/{dataset_id}#parts")


@router.post("/datasets/{dataset_id}/delete")
async def delete_dataset(request: Request, dataset_id: str) -> Response:
    """``DELETE /datasets/{id}`` after the dataset's name is typed; ``force`` ticked: also when
    versions were trained on it. The 409 of a dataset in use says what to do."""
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    try:
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        view = data.dataset_view(request.app.state.core, dataset_id)
        if form_text(form, "confirm") != view.dataset.name:
            message = f"confirm: type {view.dataset.name} to delete this dataset"
            return render(request, "error.html", {"title": "Not deleted", "message": message}, 422)
        force = form_text(form, "force") == "true"
        await threaded(data.delete_dataset, request.app.state.core, dataset_id, access.caller_of(request), force)
    except Conflict as exc:
        context = {"title": "Not deleted", "message": str(exc), "in_use": True, "dataset_id": dataset_id}
        return render(request, "error.html", context, exc.status_code)
    except DomainError as exc:
        return failure(request, exc)
    return see("/ui/datasets")


# ---------------------------------------------------------------------------------- models
def _model_filter(request: Request) -> tuple[models.ModelFilter, dict[str, str]]:
    query = request.query_params
    kept = models.ModelFilter(
        name=query.get("q", "").strip()[:255],
        method=query.get("method", "").strip()[:64],
        alias=query.get("alias", "").strip()[:64],
    )
    fields = {"q": kept.name, "method": kept.method, "alias": kept.alias}
    return kept, {k: v for k, v in fields.items() if v}


@router.get("/models")
def models_page(request: Request) -> HTMLResponse:
    offset = offset_of(request)
    kept, fields = _model_filter(request)
    view = data.search_models(request.app.state.core, offset, PAGE, kept)
    context = {
        "title": "Models",
        "page": view.page,
        "total": view.total,
        "names": view.names,
        "offset": offset,
        "limit": PAGE,
        "filters": fields,
        "methods": [m.id for m in data.method_list()],
        "headline": data.headline,
    }
    return render(request, "models.html", context)


@router.get("/models/{name}")
def model_page(request: Request, name: str) -> HTMLResponse:
    try:
        check_path(name, NAME_PATTERN, "name")
        view = data.model(request.app.state.core, name)
    except DomainError as exc:
        return failure(request, exc)
    history = _history(view.model.versions, request.query_params.get("history", ""))
    context = {"title": name, "model": view.model, "names": view.names, "job_times": view.job_times,
               "headline": data.headline, "history": history, "lower": LOWER_IS_BETTER}  # fmt: skip
    return render(request, "model.html", context)


def _history(versions: list[VersionOut], dataset_id: str) -> dict[str, Any]:
    """The model's main metric over its versions on one dataset (``dataset_id``, else the one
    most of its versions were evaluated on): each version's newest evaluation there."""
    counts = Counter(e.dataset_id for v in versions for e in {e.dataset_id: e for e in v.evaluations}.values())
    if not counts:
        return {}
    chosen = dataset_id if dataset_id in counts else counts.most_common(1)[0][0]
    points = []
    for v in versions:
        found = data.recorded_on(v, chosen)
        line = data.headline(v)
        if found is not None and line is not None:
            points.append((v.version, found.metrics.get(line[0]), line[0]))
    values = [p[1] for p in points if p[1] is not None]
    top = max(values, default=0.0) or 1.0
    return {"dataset_id": chosen, "datasets": sorted(counts), "points": points, "top": top}


@router.get("/models/{name}/versions/{number}")
def version_page(request: Request, name: str, number: int) -> HTMLResponse:
    try:
        check_path(name, NAME_PATTERN, "name")
        view = data.version(request.app.state.core, name, number)
    except DomainError as exc:
        return failure(request, exc)
    found = view.version
    leaderboard = [
        {**e, "shown": _params_shown(e.get("params", {}))} for e in (found.selection or {}).get("leaderboard", [])
    ]
    members = found.params.get("members", []) if found.method in ("blend", "blend-ldl") else []
    total = sum(float(m.get("weight", 1.0)) for m in members) or 1.0
    shares = sorted(
        ((m["method"], m.get("params", {}), float(m.get("weight", 1.0)), float(m.get("weight", 1.0)) / total)
         for m in members), key=lambda t: -t[3]
    )  # fmt: skip
    evaluated = {e.dataset_id for e in found.evaluations}
    offered = [d.id for d, _ in view.choices]
    report_sets = [i for i in dict.fromkeys([*offered, *evaluated]) if i in evaluated and i != found.dataset_id]
    if found.dataset_id in view.names:  # the training data's report, last: its metrics are optimistic
        report_sets.append(found.dataset_id)
    context = {
        "title": f"{name} v{number}",
        "v": found,
        "aliases": {a: n for a, n in view.aliases.items() if n == number},
        "all_aliases": view.aliases,
        "leaderboard": leaderboard,
        "shares": shares,
        "report_sets": report_sets,
        "choices": view.choices,
        "names": view.names,
        "job": view.job_times.get(found.job_id or ""),
        "lower": LOWER_IS_BETTER,
    }
    return render(request, "version.html", context)


@router.post("/models/{name}/versions/{number}/evaluate")
async def evaluate(request: Request, name: str, number: int) -> Response:
    """``POST /evaluate`` of this version on the chosen dataset, then its report."""
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    dataset_id = form_text(form, "dataset_id")
    try:
        check_path(name, NAME_PATTERN, "name")
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        await threaded(data.evaluate, request.app.state.core, name, number, dataset_id)
    except DomainError as exc:
        return render(request, "error.html", {"title": "Not evaluated", "message": domain_text(exc)}, exc.status_code)
    return see(f"/ui/models/{quote(name)}/versions/{number}/report?dataset_id={dataset_id}")


@router.get("/models/{name}/versions/{number}/artifact")
async def artifact(request: Request, name: str, number: int) -> Response:
    """The version's zip, as ``GET /models/{name}/versions/{version}/artifact`` sends it."""
    try:
        check_path(name, NAME_PATTERN, "name")
        return await version_artifact(name, number, request)
    except DomainError as exc:
        return failure(request, exc)


@router.post("/models/{name}/aliases")
async def set_alias(request: Request, name: str) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    alias, number = form_text(form, "alias"), form_text(form, "version")
    try:
        check_path(name, NAME_PATTERN, "name")
        check_path(alias, ALIAS_PATTERN, "alias")
        if not number.isdigit():
            raise InvalidInput("version: give a version number", loc=("body", "version"))
        await threaded(data.set_alias, request.app.state.core, name, alias, int(number), access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    back = form_text(form, "back")
    return see(back if back.startswith("/ui/") else f"/ui/models/{quote(name)}")


@router.post("/models/{name}/aliases/{alias}/delete")
async def delete_alias(request: Request, name: str, alias: str) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    try:
        await threaded(data.delete_alias, request.app.state.core, name, alias, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return see(f"/ui/models/{quote(name)}")


@router.post("/models/{name}/versions/{number}/delete")
async def delete_version(request: Request, name: str, number: int) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    if form_text(form, "confirm") != f"{name}@{number}":
        message = f"confirm: type {name}@{number} to delete this version"
        return render(request, "error.html", {"title": "Not deleted", "message": message}, 422)
    try:
        await threaded(data.delete_version, request.app.state.core, name, number, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return see(f"/ui/models/{quote(name)}")


@router.post("/models/{name}/delete")
async def delete_model(request: Request, name: str) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    if form_text(form, "confirm") != name:
        return render(
            request, "error.html", {"title": "Not deleted", "message": f"confirm: type {name} to delete it"}, 422
        )
    try:
        await threaded(data.delete_model, request.app.state.core, name, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return see("/ui/models")


@router.get("/models/{name}/versions/{number}/report")
def version_report(request: Request, name: str, number: int) -> HTMLResponse:
    """The version's report; ``?download=1``: the same as one HTML file that opens offline."""
    dataset_id = request.query_params.get("dataset_id", "")
    try:
        check_path(name, NAME_PATTERN, "name")
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        stored = data.version_report(request.app.state.core, name, number, dataset_id)
    except DomainError as exc:
        return failure(request, exc)
    back = (f"/ui/models/{quote(name)}/versions/{number}", f"{name} v{number}")
    return report_response(request, stored, f"{name}-v{number}-{dataset_id}-report.html", back)


# ----------------------------------------------------------------------- versions side by side
def _version_keys(values: list[str]) -> list[tuple[str, int]]:
    """``name@N`` references, each once, in their order (InvalidInput naming the first that is not one)."""
    keys: list[tuple[str, int]] = []
    for value in (v.strip() for v in values):
        if not value:
            continue
        name, _, number = value.rpartition("@")
        if not re.fullmatch(NAME_PATTERN, name) or not number.isdigit() or len(number) > 9:
            raise InvalidInput(f"v: '{value[:80]}' is not a version (name@number)", loc=("query", "v"))
        if (name, int(number)) not in keys:
            keys.append((name, int(number)))
    if len(keys) > data.COMPARED:
        raise InvalidInput(f"v: compare at most {data.COMPARED} versions", loc=("query", "v"))
    return keys


@router.get("/versions")
def versions_page(request: Request) -> HTMLResponse:
    """2 to 4 versions side by side: parameters, lineage, times, and their recorded evaluations
    on one dataset (``POST /evaluate``'s numbers), with a chart."""
    picked = request.query_params.getlist("v")
    dataset_id = request.query_params.get("dataset_id", "")
    context: dict[str, Any] = {"title": "Versions side by side", "picked": picked, "lower": LOWER_IS_BETTER}
    try:
        keys = _version_keys(picked)
        if dataset_id:
            check_path(dataset_id, ID_PATTERN, "dataset_id")
        if len(keys) < 2:
            return render(request, "versions.html", {**context, "view": None})
        view = data.compare_versions(request.app.state.core, keys, dataset_id)
    except DomainError as exc:
        return render(request, "versions.html", {**context, "view": None, "error": domain_text(exc)}, exc.status_code)
    return render(request, "versions.html", {**context, "view": view, "chart": _chart(view)})


def _chart(view: data.ComparedVersions) -> list[tuple[str, list[tuple[str, float | None, float]]]]:
    """Each metric the versions' evaluations share, with each version's value and its bar's
    length (a share of the largest value of the metric)."""
    recorded = [r for r in view.recorded if r is not None]
    if not recorded:
        return []
    names = [n for n in recorded[0].metrics if all(n in r.metrics for r in recorded)]
    chart = []
    for metric in names:
        values = [None if r is None else r.metrics.get(metric) for r in view.recorded]
        top = max((abs(v) for v in values if v is not None), default=0.0) or 1.0
        rows = [(_label(v, view.versions), value, abs(value) / top if value is not None else 0.0)
                for v, value in zip(view.versions, values)]  # fmt: skip
        chart.append((metric, rows))
    return chart


def _label(version: VersionOut, compared: list[VersionOut]) -> str:
    """``v2`` when every compared version is of one model, else ``name v2``."""
    one_model = len({v.name for v in compared}) == 1
    return f"v{version.version}" if one_model else f"{version.name} v{version.version}"


@router.post("/versions/evaluate")
async def evaluate_versions(request: Request) -> Response:
    """``POST /evaluate`` of each compared version not yet evaluated on the chosen dataset; back to the comparison."""
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    picked = [v for v in form.getlist("v") if isinstance(v, str)]
    dataset_id = form_text(form, "dataset_id")
    try:
        keys = _version_keys(picked)
        check_path(dataset_id, ID_PATTERN, "dataset_id")
        view = await threaded(data.compare_versions, request.app.state.core, keys, dataset_id)
        for version, recorded in zip(view.versions, view.recorded):
            if recorded is None:
                await threaded(data.evaluate, request.app.state.core, version.name, version.version, dataset_id)
    except DomainError as exc:
        return render(request, "error.html", {"title": "Not evaluated", "message": domain_text(exc)}, exc.status_code)
    query = urlencode([*(("v", f"{n}@{v}") for n, v in keys), ("dataset_id", dataset_id)])
    return see(f"/ui/versions?{query}")


def _params_shown(params: dict[str, Any]) -> str:
    """A leaderboard entry's parameters; a blend's members as their shares (``br 60%, rf 40%``)."""
    members = params.get("members")
    if isinstance(members, list) and members:
        total = sum(float(m.get("weight", 1.0)) for m in members) or 1.0
        return ", ".join(f"{m.get('method')} {100 * float(m.get('weight', 1.0)) / total:.0f}%" for m in members)
    return reports.params_text(params)
