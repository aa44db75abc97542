"""``/ui``'s datasets, models and versions: their lists (a search box and filters kept in the
address, totals and page numbers), their pages, and every action the API has on them, each
behind the role and the confirmation the API asks for: upload, split and delete a dataset; set
and remove aliases; delete a version or a model; export a version's artifact; evaluate a
version on a chosen dataset; and the side-by-side comparison of versions.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData, UploadFile

from app.api import access
from app.errors import DomainError, InvalidInput
from app.evaluation import reports
from app.registry.refs import ALIAS_PATTERN, ID_PATTERN, NAME_PATTERN
from app.scoring import LOWER_IS_BETTER
from app.services.datasets import Upload
from app.ui import data
from app.ui.pages import (
    PAGE,
    check_path,
    failure,
    form_text,
    offset_of,
    posted_form,
    render,
    report_response,
    see,
    threaded,
)
from app.upload_options import PARSE_OPTIONS

router = APIRouter(prefix="/ui", include_in_schema=False)


# -------------------------------------------------------------------------------- datasets
@router.get("/datasets")
def datasets_page(request: Request) -> HTMLResponse:
    offset = offset_of(request)
    found = data.list_datasets(request.app.state.core, offset, PAGE)
    context = {"title": "Datasets", "page": found, "offset": offset, "limit": PAGE}
    return render(request, "datasets.html", context)


@router.post("/datasets")
async def upload(request: Request) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    file = form.get("file")
    labels = form.get("labels_file")
    if not isinstance(file, UploadFile) or not file.filename:
        error = "file: choose a dataset file (ARFF, CSV, LIBSVM or MAT)"
        found = data.list_datasets(request.app.state.core, 0, PAGE)
        return render(
            request,
            "datasets.html",
            {"title": "Datasets", "page": found, "offset": 0, "limit": PAGE, "error": error},
            422,
        )
    try:
        options = _upload_options(form)
    except InvalidInput as exc:
        found = data.list_datasets(request.app.state.core, 0, PAGE)
        context = {"title": "Datasets", "page": found, "offset": 0, "limit": PAGE, "error": str(exc)}
        return render(request, "datasets.html", context, 422)
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
        found = data.list_datasets(request.app.state.core, 0, PAGE)
        context = {"title": "Datasets", "page": found, "offset": 0, "limit": PAGE, "error": str(exc)}
        return render(request, "datasets.html", context, exc.status_code)
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


# ---------------------------------------------------------------------------------- models
@router.get("/models")
def models_page(request: Request) -> HTMLResponse:
    offset = offset_of(request)
    found = data.list_models(request.app.state.core, offset, PAGE)
    return render(request, "models.html", {"title": "Models", "page": found, "offset": offset, "limit": PAGE})


@router.get("/models/{name}")
def model_page(request: Request, name: str) -> HTMLResponse:
    try:
        check_path(name, NAME_PATTERN, "name")
        found = data.model(request.app.state.core, name)
    except DomainError as exc:
        return failure(request, exc)
    return render(request, "model.html", {"title": name, "model": found})


@router.get("/models/{name}/versions/{number}")
def version_page(request: Request, name: str, number: int) -> HTMLResponse:
    try:
        check_path(name, NAME_PATTERN, "name")
        found, aliases = data.version(request.app.state.core, name, number)
    except DomainError as exc:
        return failure(request, exc)
    leaderboard = [
        {**e, "shown": _params_shown(e.get("params", {}))} for e in (found.selection or {}).get("leaderboard", [])
    ]
    members = found.params.get("members", []) if found.method in ("blend", "blend-ldl") else []
    total = sum(float(m.get("weight", 1.0)) for m in members) or 1.0
    shares = sorted(
        ((m["method"], m.get("params", {}), float(m.get("weight", 1.0)) / total) for m in members), key=lambda t: -t[2]
    )
    report_sets = list(dict.fromkeys([*([found.dataset_id] if found.dataset_id else []), *(found.metrics or {})]))
    context = {
        "title": f"{name} v{number}",
        "v": found,
        "aliases": {a: n for a, n in aliases.items() if n == number},
        "all_aliases": aliases,
        "leaderboard": leaderboard,
        "shares": shares,
        "report_sets": report_sets,
        "lower": LOWER_IS_BETTER,
    }
    return render(request, "version.html", context)


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


def _params_shown(params: dict[str, Any]) -> str:
    """A leaderboard entry's parameters; a blend's members as their shares (``br 60%, rf 40%``)."""
    members = params.get("members")
    if isinstance(members, list) and members:
        total = sum(float(m.get("weight", 1.0)) for m in members) or 1.0
        return ", ".join(f"{m.get('method')} {100 * float(m.get('weight', 1.0)) / total:.0f}%" for m in members)
    return reports.params_text(params)
