"""``/ui``: the dashboard's sign-in, overview, jobs, reports, training, comparison and playground.
Not part of the JSON API (``include_in_schema=False``); datasets, models and versions are
``app.ui.browse``'s, what the pages share ``app.ui.pages``'.

Each route reads the request (path, query, form), calls ``app.ui.data`` and renders a template:
the rules stay in the services, whose domain errors become the page's error message with their
status. Pages are plain HTML that work without JavaScript; ``static/ui.js`` only refreshes job
progress (a short poll of ``/ui/jobs/progress``), lets the training form follow the chosen method
and suggests a model name.
"""

from __future__ import annotations

import functools
import gzip
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from pydantic import ValidationError

from app.api import access
from app.errors import DomainError
from app.evaluation import reports
from app.evaluation.pool import metric_names
from app.jobs.base import JobStatus
from app.registry.refs import ID_PATTERN
from app.schemas import CompareRequest, JobOut, PredictRequest, TrainRequest
from app.services.keys import KeyStore, digest
from app.ui import data, forms, session
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
    when,
)
from app.ui.progress import ProgressPolls

router = APIRouter(prefix="/ui", include_in_schema=False)

#: predictions shown on the playground (the rest are counted)
SHOWN_PREDICTIONS = 50
#: a ranking's labels shown in the label-set column
RANKING_TOP = 3
_ENDED = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


# --------------------------------------------------------------------------------- sign-in
@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    return render(request, "login.html", {"title": "API key"})


@router.post("/login")
async def login(request: Request) -> Response:
    """Checks the key (at most ``LoginThrottle.LIMIT`` wrong ones a minute from one address) and
    starts a signed-in session."""
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    keys: KeyStore | None = request.app.state.gate.keys
    if keys is None:
        return see("/ui")
    throttle: session.LoginThrottle = request.app.state.login_throttle
    client = request.client.host if request.client else ""
    wait = throttle.retry_after(client)
    if wait is not None:
        error = f"too many wrong keys from this address: try again in {wait} s"
        return render(request, "login.html", {"title": "API key", "error": error}, 429, {"Retry-After": str(wait)})
    given = form_text(form, "api_key").encode()
    key = keys.identify(given)
    if key is None:
        throttle.failed(client)
        return render(request, "login.html", {"title": "API key", "error": "api_key: this is not the key"}, 403)
    throttle.succeeded(client)
    response = see("/ui")
    session.keep(request, response, session.sessions(request).new(key.name, digest(given))[1])
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    response = see("/ui/login")
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


# ------------------------------------------------------------------------------------ jobs
@router.get("/jobs")
def jobs_page(request: Request) -> HTMLResponse:
    offset = offset_of(request)
    raw = request.query_params.get("status", "")
    status = JobStatus(raw) if raw in {s.value for s in JobStatus} else None
    view = data.jobs_view(request.app.state.core, offset, PAGE, status)
    context = {
        "title": "Jobs",
        "page": view.page,
        "positions": view.positions,
        "total": view.total,
        "registered": view.registered,
        "names": view.names,
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
                "started_at": when(j.started_at),
                "finished_at": when(j.finished_at),
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
        check_path(job_id, ID_PATTERN, "job_id")
        view = data.job_view(request.app.state.core, job_id)
    except DomainError as exc:
        return failure(request, exc)
    if view is None:
        return render(request, "error.html", {"title": "Not found", "message": f"job '{job_id}' not found"}, 404)
    context = {"title": f"Job {job_id}", "job": view.page.items[0], "positions": view.positions,
               "registered": view.registered, "names": view.names}  # fmt: skip
    return render(request, "job.html", context)


@router.post("/jobs/{job_id}/cancel")
async def cancel(request: Request, job_id: str) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    try:
        await threaded(data.cancel_job, request.app.state.core, job_id, access.caller_of(request))
    except DomainError as exc:
        return failure(request, exc)
    back = form_text(form, "back")
    return see(back if back.startswith("/ui/") else f"/ui/jobs/{job_id}")


@router.get("/jobs/{job_id}/report")
def job_report(request: Request, job_id: str) -> Response:
    """A compare job's report, or with ``?format=csv`` its leaderboard (the API's route, by cookie)."""
    try:
        check_path(job_id, ID_PATTERN, "job_id")
        if request.query_params.get("format") == "csv":
            return Response(
                data.leaderboard_csv(request.app.state.core, job_id),
                media_type="text/csv",
                headers={"Content-Disposition": f'attachment; filename="{job_id}-leaderboard.csv"'},
            )
        stored = data.job_report(request.app.state.core, job_id)
    except DomainError as exc:
        return failure(request, exc)
    return report_response(request, stored, f"{job_id}-report.html", (f"/ui/jobs/{job_id}", f"job {job_id[:12]}"))


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
        check_path(job_id, ID_PATTERN, "job_id")
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
        # only datasets of the kind the method trains on (auto trains on either)
        "datasets": [
            d for d in data.dataset_choices(request.app.state.core) if not chosen or d.kind == chosen.dataset_kind
        ],
        "dataset_id": request.query_params.get("dataset_id", ""),
        "values": {},
        **extra,
    }


@router.get("/train")
def train_page(request: Request) -> HTMLResponse:
    context = _train_context(request, request.query_params.get("method", "auto"))
    picked = next((d for d in context["datasets"] if d.id == context["dataset_id"]), None)
    if picked is not None:  # a suggested name, <dataset>-<method>, which the user may change
        context["values"] = {"model_name": forms.suggested_name(picked.name, context["method"])}
    return render(request, "train.html", context)


@router.post("/train")
async def train(request: Request) -> Response:
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    method = form_text(form, "method") or "auto"
    context = _train_context(request, method)
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context.update(values=values, dataset_id=form_text(form, "dataset_id"))
    try:
        params = forms.parse_params(context["fields"], form)
        seed = form_text(form, "random_state")
        body = TrainRequest(
            method=method,
            dataset_id=form_text(form, "dataset_id") or None,
            model_name=form_text(form, "model_name"),
            params=params,
            random_state=int(seed) if seed.isdigit() else None,
        )
        job = await threaded(data.submit_training, request.app.state.core, body, access.caller_of(request))
    except forms.FieldError as exc:
        return render(request, "train.html", {**context, "error": f"params.{exc}"}, 422)
    except ValidationError as exc:
        return render(request, "train.html", {**context, "error": pydantic_text(exc)}, 422)
    except DomainError as exc:
        return render(request, "train.html", {**context, "error": domain_text(exc)}, exc.status_code)
    return see(f"/ui/jobs/{job.id}")


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
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    picked = [m for m in form.getlist("methods") if isinstance(m, str)]
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context = _compare_context(request, values=values, picked=picked, dataset_id=form_text(form, "dataset_id"))
    try:
        cv, seed = form_text(form, "cv"), form_text(form, "random_state")
        body = CompareRequest(
            dataset_id=form_text(form, "dataset_id"),
            methods=picked or None,
            metric=form_text(form, "metric") or None,
            cv=int(cv) if cv.isdigit() else 5,
            random_state=int(seed) if seed.isdigit() else None,
        )
        job = await threaded(data.submit_comparison, request.app.state.core, body, access.caller_of(request))
    except ValidationError as exc:
        return render(request, "compare.html", {**context, "error": pydantic_text(exc)}, 422)
    except DomainError as exc:
        return render(request, "compare.html", {**context, "error": domain_text(exc)}, exc.status_code)
    return see(f"/ui/jobs/{job.id}")


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
    form = await posted_form(request)
    if isinstance(form, Response):
        return form
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    context = _predict_context(request, values=values)
    try:
        dataset_id = form_text(form, "dataset_id") or None
        rows = None if dataset_id else forms.parse_rows(form_text(form, "rows"))
        body = PredictRequest.model_validate(
            {
                "model": form_text(form, "model"),
                "instances": rows,
                "dataset_id": dataset_id,
                "output": form_text(form, "output") or None,
            }
        )
        answer = await threaded(data.predict, request.app.state.core, body, access.caller_of(request))
    except ValueError as exc:  # pasted rows that are not numbers, and pydantic's ValidationError
        text = pydantic_text(exc) if isinstance(exc, ValidationError) else f"rows: {exc}"
        return render(request, "predict.html", {**context, "error": text}, 422)
    except DomainError as exc:
        return render(request, "predict.html", {**context, "error": domain_text(exc)}, exc.status_code)
    if isinstance(answer, JobOut):
        return see(f"/ui/jobs/{answer.id}")
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
        # a ranking has no label set: its top labels stand in the column, said to be that
        top = [label for label, _ in pairs[:RANKING_TOP]] if "ranking" in item and "labels" not in item else []
        rows.append(
            {"index": i, "labels": item.get("labels"), "top": top, "pairs": pairs[:10], "more": max(0, len(pairs) - 10)}
        )
    return {
        "answer_model": answer.get("model"),
        "rows": rows,
        "hidden": max(0, len(predictions) - SHOWN_PREDICTIONS),
        "features": answer.get("features"),
        "raw": json.dumps(answer)[:20_000],
    }
