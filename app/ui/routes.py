"""``/ui``: the dashboard's pages. Not part of the JSON API (``include_in_schema=False``).

Each route reads the request (path, query, form), calls ``app.ui.data`` and renders a template:
the rules stay in the services, whose domain errors become the page's error message with their
status. Pages are plain HTML that work without JavaScript; ``static/ui.js`` only refreshes job
progress (a short poll of ``/ui/jobs/progress``) and lets the training form follow the chosen method.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile

from app import __version__
from app.api import access
from app.api.headers import report_policy
from app.errors import DomainError, InvalidInput
from app.evaluation import reports
from app.evaluation.pool import metric_names
from app.jobs.base import JobStatus
from app.registry.refs import ALIAS_PATTERN, ID_PATTERN, NAME_PATTERN
from app.schemas import CompareRequest, JobOut, PredictRequest, TrainRequest
from app.scoring import LOWER_IS_BETTER
from app.services.datasets import Upload
from app.services.keys import KeyStore, digest
from app.ui import data, forms, session
from app.ui.progress import ProgressPolls
from app.upload_options import PARSE_OPTIONS, UPLOAD_OPTIONS

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

#: rows of a listing page
PAGE = 25
#: predictions shown on the playground (the rest are counted)
SHOWN_PREDICTIONS = 50
_ENDED = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _num(value: Any, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.{digits}f}"
    return "-"


templates.env.filters["when"] = _when
templates.env.filters["num"] = _num
templates.env.filters["pct"] = lambda v: f"{100 * float(v):.0f}%"
templates.env.filters["q"] = lambda v: quote(str(v), safe="")
templates.env.globals["version"] = __version__
templates.env.globals["upload_options"] = UPLOAD_OPTIONS
templates.env.globals["int_type"] = int


def render(
    request: Request, name: str, context: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """A page, with the CSRF token its forms carry (and a session, for a browser that has none)."""
    current, cookie = session.current(request), None
    if current is None:
        current, cookie = session.sessions(request).new()
    response = templates.TemplateResponse(
        request,
        name,
        {
            "csrf": session.sessions(request).csrf_token(current),
            "key_required": request.app.state.settings.has_api_keys,
            "may": functools.partial(access.may, request),
            **context,
        },
        status_code=status,
        headers=headers,
    )
    if cookie is not None:
        session.keep(request, response, cookie)
    return response


def failure(request: Request, exc: DomainError) -> HTMLResponse:
    return render(request, "error.html", {"title": "Not possible", "message": str(exc)}, exc.status_code)


def _offset(request: Request) -> int:
    raw = request.query_params.get("offset", "0")
    return int(raw) if raw.isdigit() and len(raw) < 12 else 0


async def _form(request: Request) -> FormData | Response:
    """The posted form once its CSRF token checks out, else the refusal page."""
    form = await request.form()
    if not session.csrf_ok(request, form):
        return render(
            request, "error.html", {"title": "Form expired", "message": "reload the page and send it again"}, 403
        )
    return form


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _see(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


# --------------------------------------------------------------------------------- sign-in
@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    return render(request, "login.html", {"title": "API key"})


@router.post("/login")
async def login(request: Request) -> Response:
    """Checks the key (at most ``LoginThrottle.LIMIT`` wrong ones a minute from one address) and
    starts a signed-in session."""
    form = await _form(request)
    if isinstance(form, Response):
        return form
    keys: KeyStore | None = request.app.state.gate.keys
    if keys is None:
        return _see("/ui")
    throttle: session.LoginThrottle = request.app.state.login_throttle
    client = request.client.host if request.client else ""
    wait = throttle.retry_after(client)
    if wait is not None:
        error = f"too many wrong keys from this address: try again in {wait} s"
        return render(request, "login.html", {"title": "API key", "error": error}, 429, {"Retry-After": str(wait)})
    given = _text(form, "api_key").encode()
    key = keys.identify(given)
    if key is None:
        throttle.failed(client)
        return render(request, "login.html", {"title": "API key", "error": "api_key: this is not the key"}, 403)
    throttle.succeeded(client)
    response = _see("/ui")
    session.keep(request, response, session.sessions(request).new(key.name, digest(given))[1])
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    response = _see("/ui/login")
    session.forget(response)
    return response


# -------------------------------------------------------------------------------- overview
@router.get("")
def overview(request: Request) -> HTMLResponse:
    state = request.app.state.core
    models = data.list_models(state, 0, 10)
    recent, positions = data.list_jobs(state, 0, 10, None)
    sets = data.list_datasets(state, 0, 5)
    return render(
        request,
        "overview.html",
        {"title": "Dashboard", "models": models, "jobs": recent, "positions": positions, "datasets": sets},
    )


# -------------------------------------------------------------------------------- datasets
@router.get("/datasets")
def datasets_page(request: Request) -> HTMLResponse:
    offset = _offset(request)
    found = data.list_datasets(request.app.state.core, offset, PAGE)
    context = {"title": "Datasets", "page": found, "offset": offset, "limit": PAGE}
    return render(request, "datasets.html", context)


@router.post("/datasets")
async def upload(request: Request) -> Response:
    form = await _form(request)
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
        name=_text(form, "name") or None,
        options=options,
    )
    try:
        row, _ = await _threaded(data.upload_dataset, request.app.state.core, request_upload)
    except DomainError as exc:
        found = data.list_datasets(request.app.state.core, 0, PAGE)
        context = {"title": "Datasets", "page": found, "offset": 0, "limit": PAGE, "error": str(exc)}
        return render(request, "datasets.html", context, exc.status_code)
    return _see(f"/ui/datasets/{row.id}")


def _upload_options(form: FormData) -> dict[str, Any]:
    """The parse options of ``app.upload_options`` from the form (empty fields: their defaults)."""
    options: dict[str, Any] = {}
    for option in PARSE_OPTIONS:
        text = _text(form, option.name)
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
        _check(dataset_id, ID_PATTERN, "dataset_id")
        view = data.dataset_view(request.app.state.core, dataset_id)
    except DomainError as exc:
        return failure(request, exc)
    top = max((c for _, c in view.label_counts), default=0) or 1
    return render(request, "dataset.html", {"title": view.dataset.name, "view": view, "top": top})


# ---------------------------------------------------------------------------------- models
@router.get("/models")
def models_page(request: Request) -> HTMLResponse:
    offset = _offset(request)
    found = data.list_models(request.app.state.core, offset, PAGE)
    return render(request, "models.html", {"title": "Models", "page": found, "offset": offset, "limit": PAGE})


@router.get("/models/{name}")
def model_page(request: Request, name: str) -> HTMLResponse:
    try:
        _check(name, NAME_PATTERN, "name")
        found = data.model(request.app.state.core, name)
    except DomainError as exc:
        return failure(request, exc)
    return render(request, "model.html", {"title": name, "model": found})


@router.get("/models/{name}/versions/{number}")
def version_page(request: Request, name: str, number: int) -> HTMLResponse:
    try:
        _check(name, NAME_PATTERN, "name")
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
    form = await _form(request)
    if isinstance(form, Response):
        return form
    alias, number = _text(form, "alias"), _text(form, "version")
    try:
        _check(name, NAME_PATTERN, "name")
        _check(alias, ALIAS_PATTERN, "alias")
        if not number.isdigit():
            raise InvalidInput("version: give a version number", loc=("body", "version"))
        await _threaded(data.set_alias, request.app.state.core, name, alias, int(number), access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    back = _text(form, "back")
    return _see(back if back.startswith("/ui/") else f"/ui/models/{quote(name)}")


@router.post("/models/{name}/aliases/{alias}/delete")
async def delete_alias(request: Request, name: str, alias: str) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    try:
        await _threaded(data.delete_alias, request.app.state.core, name, alias, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return _see(f"/ui/models/{quote(name)}")


@router.post("/models/{name}/versions/{number}/delete")
async def delete_version(request: Request, name: str, number: int) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    if _text(form, "confirm") != f"{name}@{number}":
        message = f"confirm: type {name}@{number} to delete this version"
        return render(request, "error.html", {"title": "Not deleted", "message": message}, 422)
    try:
        await _threaded(data.delete_version, request.app.state.core, name, number, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return _see(f"/ui/models/{quote(name)}")


@router.post("/models/{name}/delete")
async def delete_model(request: Request, name: str) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    if _text(form, "confirm") != name:
        return render(
            request, "error.html", {"title": "Not deleted", "message": f"confirm: type {name} to delete it"}, 422
        )
    try:
        await _threaded(data.delete_model, request.app.state.core, name, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    return _see("/ui/models")


@router.get("/models/{name}/versions/{number}/report")
def version_report(request: Request, name: str, number: int) -> HTMLResponse:
    """The version's report; ``?download=1``: the same as one HTML file that opens offline."""
    dataset_id = request.query_params.get("dataset_id", "")
    try:
        _check(name, NAME_PATTERN, "name")
        _check(dataset_id, ID_PATTERN, "dataset_id")
        stored = data.version_report(request.app.state.core, name, number, dataset_id)
    except DomainError as exc:
        return failure(request, exc)
    return _report(request, stored, f"{name}-v{number}-{dataset_id}-report.html")


# ------------------------------------------------------------------------------------ jobs
@router.get("/jobs")
def jobs_page(request: Request) -> HTMLResponse:
    offset = _offset(request)
    raw = request.query_params.get("status", "")
    status = JobStatus(raw) if raw in {s.value for s in JobStatus} else None
    found, positions = data.list_jobs(request.app.state.core, offset, PAGE, status)
    context = {
        "title": "Jobs",
        "page": found,
        "positions": positions,
        "offset": offset,
        "limit": PAGE,
        "status": status.value if status else "",
        "statuses": [s.value for s in JobStatus],
    }
    return render(request, "jobs.html", context)


@router.get("/jobs/progress")
async def jobs_progress(request: Request) -> JSONResponse:
    """The listed jobs as they are now (what ``ui.js`` polls): status, progress, stage, queue place
    (one query, shared by the polls for the same jobs, in threads of its own: ``app.ui.progress``)."""
    ids = [i for i in request.query_params.get("ids", "").split(",") if i and len(i) <= 64][: PAGE * 2]
    found = await _progress_polls(request).progress(ids)
    return JSONResponse(
        {
            j.id: {
                "status": j.status.value,
                "progress": j.progress,
                "stage": j.stage,
                "position": j.position,
                "ended": j.status in _ENDED,
            }
            for j in found
        },
        headers={"Cache-Control": "no-store"},
    )


def _progress_polls(request: Request) -> ProgressPolls:
    """The app's answerer of progress polls (made on first use, on the app's event loop)."""
    polls: ProgressPolls | None = getattr(request.app.state, "ui_progress_polls", None)
    if polls is None:
        core = request.app.state.core
        polls = request.app.state.ui_progress_polls = ProgressPolls(lambda ids: data.jobs_progress(core, ids))
    return polls


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> HTMLResponse:
    try:
        _check(job_id, ID_PATTERN, "job_id")
        found, positions = data.jobs_by_id(request.app.state.core, [job_id])
    except DomainError as exc:
        return failure(request, exc)
    if not found:
        return render(request, "error.html", {"title": "Not found", "message": f"job '{job_id}' not found"}, 404)
    return render(request, "job.html", {"title": f"Job {job_id}", "job": found[0], "positions": positions})


@router.post("/jobs/{job_id}/cancel")
async def cancel(request: Request, job_id: str) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    try:
        await _threaded(data.cancel_job, request.app.state.core, job_id, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    back = _text(form, "back")
    return _see(back if back.startswith("/ui/") else f"/ui/jobs/{job_id}")


@router.get("/jobs/{job_id}/report")
def job_report(request: Request, job_id: str) -> Response:
    """A compare job's report, or with ``?format=csv`` its leaderboard (the API's route, by cookie)."""
    try:
        _check(job_id, ID_PATTERN, "job_id")
        if request.query_params.get("format") == "csv":
            return Response(
                data.leaderboard_csv(request.app.state.core, job_id),
                media_type="text/csv",
                headers={"Content-Disposition": f'attachment; filename="{job_id}-leaderboard.csv"'},
            )
        stored = data.job_report(request.app.state.core, job_id)
    except DomainError as exc:
        return failure(request, exc)
    return _report(request, stored, f"{job_id}-report.html")


def _report(request: Request, stored: str, filename: str) -> HTMLResponse:
    """A stored report as a page that loads plotly from the cached asset, or with ``?download=1``
    as the file to keep: the bundle inlined, so that it opens offline. Either with the policy
    allowing the scripts it inlines (``report_policy``)."""
    if request.query_params.get("download") == "1":
        page = reports.with_scripts(stored)
        disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
    else:
        download = f"{request.url.path}?{urlencode({**request.query_params, 'download': '1'})}"
        page = reports.linked(stored, f"/ui/assets/{reports.plotly_asset()[0]}", download)
        disposition = {}
    return HTMLResponse(page, headers={"Content-Security-Policy": report_policy(page), **disposition})


@router.get("/assets/{name}")
def asset(request: Request, name: str) -> Response:
    """plotly's bundle for the reports: its address names plotly's version, so it is cached for
    good (``immutable``), and sent gzipped (1.4 MB instead of 4.8) to a browser that accepts it."""
    filename, content = reports.plotly_asset()
    if name != filename:
        return render(request, "error.html", {"title": "Not found", "message": f"no asset '{name[:80]}'"}, 404)
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(
            _gzipped(content), media_type="text/javascript", headers={**headers, "Content-Encoding": "gzip"}
        )
    return Response(content, media_type="text/javascript", headers=headers)


@functools.cache
def _gzipped(content: bytes) -> bytes:
    return gzip.compress(content, compresslevel=6, mtime=0)


@router.get("/jobs/{job_id}/result")
def job_result(request: Request, job_id: str) -> Response:
    try:
        _check(job_id, ID_PATTERN, "job_id")
        path = data.result_file(request.app.state.core, job_id)
    except DomainError as exc:
        return failure(request, exc)
    media = {".csv": "text/csv", ".json": "application/json"}.get(path.suffix, "application/x-ndjson")
    return FileResponse(path, media_type=media, filename=f"{job_id}{path.suffix}")


# ------------------------------------------------------------------------- train, compare
def _train_context(request: Request, method: str, **extra: Any) -> dict[str, Any]:
    listed = data.method_list()
    trainable = [m for m in listed if m.id not in ("blend", "blend-ldl")]
    chosen = next((m for m in listed if m.id == method), None)
    schema = data.auto_schema() if method == "auto" else chosen.params if chosen else {}
    return {
        "title": "Train",
        "methods": trainable,
        "method": method if method == "auto" or chosen else "auto",
        "chosen": chosen,
        "fields": forms.param_fields(schema)
        if (chosen or method == "auto")
        else forms.param_fields(data.auto_schema()),
        "datasets": data.dataset_choices(request.app.state.core),
        "dataset_id": request.query_params.get("dataset_id", ""),
        "values": {},
        **extra,
    }


@router.get("/train")
def train_page(request: Request) -> HTMLResponse:
    return render(request, "train.html", _train_context(request, request.query_params.get("method", "auto")))


@router.post("/train")
async def train(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    method = _text(form, "method") or "auto"
    context = _train_context(request, method)
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context.update(values=values, dataset_id=_text(form, "dataset_id"))
    try:
        params = forms.parse_params(context["fields"], form)
        seed = _text(form, "random_state")
        body = TrainRequest(
            method=method,
            dataset_id=_text(form, "dataset_id") or None,
            model_name=_text(form, "model_name"),
            params=params,
            random_state=int(seed) if seed.isdigit() else None,
        )
        job = await _threaded(data.submit_training, request.app.state.core, body, access.caller_of(request))
    except forms.FieldError as exc:
        return render(request, "train.html", {**context, "error": f"params.{exc}"}, 422)
    except ValidationError as exc:
        return render(request, "train.html", {**context, "error": _pydantic_text(exc)}, 422)
    except DomainError as exc:
        return render(request, "train.html", {**context, "error": _domain_text(exc)}, exc.status_code)
    return _see(f"/ui/jobs/{job.id}")


def _compare_context(request: Request, **extra: Any) -> dict[str, Any]:
    return {
        "title": "Compare",
        "methods": [m for m in data.method_list() if m.id not in ("blend", "blend-ldl")],
        "datasets": data.dataset_choices(request.app.state.core),
        "metrics": sorted({*metric_names("multilabel"), *metric_names("distribution")}),
        "dataset_id": request.query_params.get("dataset_id", ""),
        "values": {},
        "picked": [],
        **extra,
    }


@router.get("/compare")
def compare_page(request: Request) -> HTMLResponse:
    return render(request, "compare.html", _compare_context(request))


@router.post("/compare")
async def compare(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    picked = [m for m in form.getlist("methods") if isinstance(m, str)]
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context = _compare_context(request, values=values, picked=picked, dataset_id=_text(form, "dataset_id"))
    try:
        cv, seed = _text(form, "cv"), _text(form, "random_state")
        body = CompareRequest(
            dataset_id=_text(form, "dataset_id"),
            methods=picked or None,
            metric=_text(form, "metric") or None,
            cv=int(cv) if cv.isdigit() else 5,
            random_state=int(seed) if seed.isdigit() else None,
        )
        job = await _threaded(data.submit_comparison, request.app.state.core, body, access.caller_of(request))
    except ValidationError as exc:
        return render(request, "compare.html", {**context, "error": _pydantic_text(exc)}, 422)
    except DomainError as exc:
        return render(request, "compare.html", {**context, "error": _domain_text(exc)}, exc.status_code)
    return _see(f"/ui/jobs/{job.id}")


# ------------------------------------------------------------------------------ playground
def _predict_context(request: Request, **extra: Any) -> dict[str, Any]:
    return {
        "title": "Predict",
        "models": data.model_names(request.app.state.core),
        "datasets": data.dataset_choices(request.app.state.core),
        "outputs": ["labels", "ranking", "distribution", "features"],
        "values": {
            "model": request.query_params.get("model", ""),
            "dataset_id": request.query_params.get("dataset_id", ""),
        },
        **extra,
    }


@router.get("/predict")
def predict_page(request: Request) -> HTMLResponse:
    return render(request, "predict.html", _predict_context(request))


@router.post("/predict")
async def predict(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context = _predict_context(request, values=values)
    try:
        dataset_id = _text(form, "dataset_id") or None
        rows = None if dataset_id else forms.parse_rows(_text(form, "rows"))
        body = PredictRequest.model_validate(
            {
                "model": _text(form, "model"),
                "instances": rows,
                "dataset_id": dataset_id,
                "output": _text(form, "output") or None,
            }
        )
        answer = await _threaded(data.predict, request.app.state.core, body, access.caller_of(request))
    except ValueError as exc:  # pasted rows that are not numbers, and pydantic's ValidationError
        text = _pydantic_text(exc) if isinstance(exc, ValidationError) else f"rows: {exc}"
        return render(request, "predict.html", {**context, "error": text}, 422)
    except DomainError as exc:
        return render(request, "predict.html", {**context, "error": _domain_text(exc)}, exc.status_code)
    if isinstance(answer, JobOut):
        return _see(f"/ui/jobs/{answer.id}")
    return render(request, "predict.html", {**context, **_shown(answer)})


def _shown(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer as the page's table and bars: one row per instance, its labels with scores."""
    predictions = answer.get("predictions", [])
    rows = []
    for i, item in enumerate(predictions[:SHOWN_PREDICTIONS]):
        if "ranking" in item:
            pairs = [(e["label"], e["score"]) for e in item["ranking"]]
        elif "distribution" in item:
            pairs = sorted(item["distribution"].items(), key=lambda p: -p[1])
        elif "scores" in item:
            pairs = sorted(item["scores"].items(), key=lambda p: -p[1])
        else:
            pairs = []
        rows.append({"index": i, "labels": item.get("labels"), "pairs": pairs[:10], "more": max(0, len(pairs) - 10)})
    return {
        "answer_model": answer.get("model"),
        "rows": rows,
        "hidden": max(0, len(predictions) - SHOWN_PREDICTIONS),
        "features": answer.get("features"),
        "raw": json.dumps(answer)[:20_000],
    }


# --------------------------------------------------------------------------------- helpers
async def _threaded(function: Any, *args: Any) -> Any:
    return await run_in_threadpool(function, *args)


def _params_shown(params: dict[str, Any]) -> str:
    """A leaderboard entry's parameters; a blend's members as their shares (``br 60%, rf 40%``)."""
    members = params.get("members")
    if isinstance(members, list) and members:
        total = sum(float(m.get("weight", 1.0)) for m in members) or 1.0
        return ", ".join(f"{m.get('method')} {100 * float(m.get('weight', 1.0)) / total:.0f}%" for m in members)
    return reports.params_text(params)


def _check(value: str, pattern: str, field: str) -> None:
    if not re.fullmatch(pattern, value):
        raise InvalidInput(f"{field}: '{value[:80]}' is not a valid {field}", loc=("path", field))


def _domain_text(exc: DomainError) -> str:
    where = ".".join(str(p) for p in exc.loc if p not in ("body", "path", "query"))
    return f"{where}: {exc}" if where and not str(exc).startswith(where) else str(exc)


def _pydantic_text(exc: ValidationError) -> str:
    return "; ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in exc.errors(include_url=False)[:5])


def page_links(offset: int, limit: int, next_offset: int | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The previous and next page's query strings of a listing."""
    links = {}
    if offset > 0:
        links["previous"] = "?" + urlencode({**(extra or {}), "offset": max(0, offset - limit)})
    if next_offset is not None:
        links["next"] = "?" + urlencode({**(extra or {}), "offset": next_offset})
    return links


templates.env.globals["page_links"] = page_links
