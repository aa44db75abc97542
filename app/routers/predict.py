"""``POST /predict``: label sets, rankings, distributions or selected features."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope
from app.deps import CacheDep, SessionDep
from app.jobs.payloads import BatchPredictPayload
from app.jobs.queue import enqueue, job_out
from app.jobs.runner import JobRunner
from app.methods.base import MethodSpec
from app.methods.catalog import get_method
from app.orm import Dataset, ModelVersion
from app.prediction import InstanceError, instances_to_matrix, predict_items, selected_features
from app.registry import ModelCache, RegistryError, Served, VersionKey, resolve, resolve_key
from app.schemas import JobOut, ModelInfo, PredictRequest, PredictResponse
from app.store import ArtifactIntegrityError, Store

router = APIRouter(tags=["prediction"])


def _reference_error(exc: Exception) -> HTTPException:
    if isinstance(exc, RegistryError):
        return HTTPException(404, f"model: {exc}")
    return HTTPException(422, f"model: {exc}")


def resolve_or_404(session: SessionDep, ref: str) -> tuple[ModelVersion, MethodSpec]:
    try:
        version = resolve(session, ref)
    except (ValueError, RegistryError) as exc:
        raise _reference_error(exc) from None
    return version, method_of(version.method)


def method_of(method_id: str) -> MethodSpec:
    spec = get_method(method_id)
    if spec is None:
        raise HTTPException(409, f"model: method '{method_id}' is not available in this server")
    return spec


def load_served(request: Request, cache: CacheDep, key: VersionKey) -> Served:
    """The loaded version (model, names) behind ``key``; 409 when its artifact is unusable."""
    try:
        served, hit = cache.get(key)
    except RegistryError as exc:
        raise HTTPException(404, f"model: {exc}") from None
    except FileNotFoundError:
        raise HTTPException(409, f"model: version {key[0]}'s artifact is missing from the store") from None
    except ArtifactIntegrityError as exc:
        raise HTTPException(409, f"model: {exc}") from None
    request.app.state.metrics.cache_lookup(hit)
    return served


def load_model(request: Request, cache: CacheDep, version: ModelVersion) -> Any:
    return load_served(request, cache, (version.id, version.created_at)).model


def dataset_for(session: SessionDep, dataset_id: str, version: ModelVersion | Served) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise HTTPException(404, f"dataset_id: dataset '{dataset_id}' not found")
    if dataset.feature_names != version.feature_names:
        raise HTTPException(
            422,
            f"dataset_id: expected the model's {len(version.feature_names)} features in training "
            f"order; dataset '{dataset_id}' has {dataset.n_features} features that differ",
        )
    return dataset


@router.post(
    "/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    responses={202: {"model": JobOut, "description": "a large dataset, predicted as a job"}},
)
async def predict(body: PredictRequest, request: Request) -> Any:
    """One threadpool hop for the whole request, so the hot path costs about what ``/health``
    does (sync dependencies would each add a hop; the session is opened inside instead)."""
    return await run_in_threadpool(_predict, body, request)


def _predict(body: PredictRequest, request: Request) -> Any:
    state = request.app.state
    settings: Settings = state.settings
    store: Store = state.store
    with session_scope(settings.resolved_database_url) as session:
        return _answer(body, request, session, settings, store, state.model_cache, state.runner)


def _answer(
    body: PredictRequest,
    request: Request,
    session: Session,
    settings: Settings,
    store: Store,
    cache: ModelCache,
    runner: JobRunner,
) -> Any:
    try:
        key = resolve_key(session, body.model)
    except (ValueError, RegistryError) as exc:
        raise _reference_error(exc) from None
    served = load_served(request, cache, key)
    spec = method_of(served.method)
    output = body.output or spec.default_output
    if output not in spec.outputs:
        raise HTTPException(422, f"output: a {spec.id} model gives {', '.join(spec.outputs)}; not '{output}'")
    info = ModelInfo(name=served.name, version=served.version, method=spec.id)
    model = served.model
    if output == "features":
        features = selected_features(model, served.feature_names, body.top_k)
        return PredictResponse(model=info, output=output, features=features)
    if (body.instances is None) == (body.dataset_id is None):
        raise HTTPException(422, "give exactly one of instances and dataset_id")
    if body.dataset_id is not None:
        dataset = dataset_for(session, body.dataset_id, served)
        if dataset.n_samples > settings.batch_job_rows:
            payload = BatchPredictPayload(
                model=f"{served.name}@{served.version}",
                method=spec.id,
                dataset_id=dataset.id,
                output=output,
                threshold=body.threshold,
                top_k=body.top_k,
                include_scores=body.include_scores,
                format=body.format,
            )
            job = enqueue(session, runner, payload)
            return JSONResponse(job_out(job).model_dump(mode="json"), status_code=202)
        X, _ = store.load_dataset(dataset.sha256)
    else:
        try:
            X = instances_to_matrix(body.instances, served.feature_names)  # type: ignore[arg-type]
        except InstanceError as exc:
            raise HTTPException(422, str(exc)) from None
    predictions = predict_items(
        model,
        output,
        X,
        served.label_names,
        threshold=body.threshold,
        top_k=body.top_k,
        include_scores=body.include_scores,
    )
    return PredictResponse(model=info, output=output, predictions=predictions)
