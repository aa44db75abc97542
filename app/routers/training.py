"""``POST /train``: validate everything that can be validated, then queue a training job."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from app.datasets import store_dataset
from app.deps import RunnerDep, SessionDep, StoreDep
from app.formats.common import DatasetFormatError, generated_names
from app.formats.validation import finalize
from app.jobs.payloads import SelectorChoice, TrainPayload
from app.jobs.queue import enqueue, job_out, wait_for
from app.methods.base import MethodSpec
from app.methods.catalog import catalog, get_method
from app.orm import Dataset
from app.registry import RegistryError, resolve
from app.schemas import InlineData, JobOut, TrainAccepted, TrainRequest

router = APIRouter(tags=["training"])


def params_error(exc: ValidationError) -> HTTPException:
    """Pydantic errors on ``params`` as FastAPI-style 422 details located under ``params``."""
    detail = [
        {"loc": ["body", "params", *err["loc"]], "msg": err["msg"], "type": err["type"]}
        for err in exc.errors(include_url=False)
    ]
    return HTTPException(422, detail)


def inline_dataset(session: SessionDep, store: StoreDep, data: InlineData) -> Dataset:
    """Small inline data is stored like an upload, so models keep their lineage."""
    try:
        X = np.asarray(data.X, dtype=np.float64)
        Y = np.asarray(data.Y, dtype=np.float64)
    except ValueError:
        raise HTTPException(422, "data: X and Y must be rectangular arrays of numbers") from None
    try:
        if X.ndim != 2 or Y.ndim != 2:
            raise DatasetFormatError("X and Y must be 2-D (one row per sample)")
        parsed = finalize(
            X,
            Y,
            data.feature_names or generated_names("f", X.shape[1]),
            data.label_names or generated_names("l", Y.shape[1]),
            [],
        )
    except DatasetFormatError as exc:
        raise HTTPException(422, f"data: {exc}") from None
    digest = hashlib.sha256(data.model_dump_json().encode()).hexdigest()
    row, _ = store_dataset(session, store, parsed, digest, "inline", "inline")
    return row


def check_selector(session: SessionDep, spec: MethodSpec, body: TrainRequest, dataset: Dataset) -> None:
    selection = body.feature_selector
    if selection is None:
        return
    if spec.task != "multilabel":
        raise HTTPException(422, "feature_selector: only classifiers can be trained on selected features")
    try:
        version = resolve(session, selection.model)
    except ValueError as exc:
        raise HTTPException(422, f"feature_selector.model: {exc}") from None
    except RegistryError as exc:
        raise HTTPException(404, f"feature_selector.model: {exc}") from None
    selector_spec = get_method(version.method)
    if selector_spec is None or selector_spec.task != "selection":
        raise HTTPException(
            422,
            f"feature_selector.model: '{selection.model}' is a {version.method} model, not a feature selector",
        )
    if version.feature_names != dataset.feature_names:
        raise HTTPException(
            422, "feature_selector.model: the selector was trained on different features than this dataset"
        )


def prepare(session: SessionDep, store: StoreDep, body: TrainRequest) -> tuple[MethodSpec, Dataset, TrainPayload]:
    spec = get_method(body.method)
    if spec is None:
        raise HTTPException(422, f"method: unknown method '{body.method}'; available: {', '.join(catalog())}")
    params = dict(body.params)
    if body.random_state is not None and "random_state" in spec.params.model_fields:
        params.setdefault("random_state", body.random_state)
    try:
        spec.params.model_validate(params)
    except ValidationError as exc:
        raise params_error(exc) from None
    if body.data is not None:
        dataset = inline_dataset(session, store, body.data)
    else:
        dataset = session.get(Dataset, body.dataset_id)
        if dataset is None:
            raise HTTPException(404, f"dataset_id: dataset '{body.dataset_id}' not found")
    if dataset.kind != spec.dataset_kind:
        raise HTTPException(
            422,
            f"dataset_id: method '{spec.id}' needs a {spec.dataset_kind} dataset; '{dataset.id}' is {dataset.kind}",
        )
    check_selector(session, spec, body, dataset)
    payload = TrainPayload(
        method=spec.id,
        dataset_id=dataset.id,
        model_name=body.model_name,
        params=params,
        random_state=body.random_state,
        feature_selector=(
            SelectorChoice.model_validate(body.feature_selector.model_dump()) if body.feature_selector else None
        ),
    )
    return spec, dataset, payload


@router.post("/train", status_code=202, response_model=TrainAccepted, responses={200: {"model": JobOut}})
async def train(
    body: TrainRequest,
    request: Request,
    session: SessionDep,
    store: StoreDep,
    runner: RunnerDep,
    wait: bool = False,
    timeout: Annotated[float, Query(gt=0, le=86_400, description="seconds ?wait=true blocks at most")] = 3600,
) -> Any:
    """Queue a training job; with ``?wait=true`` block until it ends and return the job."""
    _, _, payload = await run_in_threadpool(prepare, session, store, body)
    job = await run_in_threadpool(enqueue, session, runner, payload)
    if not wait:
        return TrainAccepted(job_id=job.id, status=job.status, status_url=f"/jobs/{job.id}")
    settings = request.app.state.settings
    finished = await wait_for(settings.resolved_database_url, job.id, timeout)
    return JSONResponse(job_out(finished).model_dump(mode="json"), status_code=200)
