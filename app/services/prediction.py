"""Prediction: resolving the model, checking the request against it, and answering it, either at
once or, for a stored dataset larger than ``batch_job_rows``, as a batch prediction job."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.config import Settings
from app.errors import InvalidInput
from app.jobs.base import JobRunner
from app.jobs.payloads import BatchPredictPayload
from app.jobs.queue import enqueue, job_out
from app.observability import Metrics
from app.prediction import instances_to_matrix, predict_items, selected_features
from app.registry import ModelCache
from app.schemas import JobOut, ModelInfo, PredictRequest, PredictResponse
from app.services.datasets import dataset_with_features
from app.services.registry import load_served, method_of, resolve_version_key
from app.store import Store


@dataclass(frozen=True)
class Predictor:
    """What answering a prediction needs besides the session: long-lived and shared by requests."""

    store: Store
    cache: ModelCache
    runner: JobRunner
    metrics: Metrics
    settings: Settings  # read per request: ``batch_job_rows`` is configuration, not state


def predict(session: Session, predictor: Predictor, body: PredictRequest) -> PredictResponse | JobOut:
    """The predictions, or the queued job that will write them (a large stored dataset)."""
    served = load_served(predictor.cache, predictor.metrics, resolve_version_key(session, body.model))
    spec = method_of(served.method)
    output = body.output or spec.default_output
    if output not in spec.outputs:
        raise InvalidInput(f"a {spec.id} model gives {', '.join(spec.outputs)}; not '{output}'", loc=("body", "output"))
    info = ModelInfo(name=served.name, version=served.version, method=spec.id)
    if output == "features":
        features = selected_features(served.model, served.feature_names, body.top_k)
        return PredictResponse(model=info, output=output, features=features)
    if body.dataset_id is not None and body.instances is not None:
        raise InvalidInput("give exactly one of instances and dataset_id", loc=("body",))
    if body.dataset_id is not None:
        dataset = dataset_with_features(session, body.dataset_id, served.feature_names)
        if dataset.n_samples > predictor.settings.batch_job_rows:
            payload = BatchPredictPayload(
                model=f"{served.name}@{served.version}",  # pinned: a moved alias must not change the job
                method=spec.id,
                dataset_id=dataset.id,
                output=output,
                threshold=body.threshold,
                top_k=body.top_k,
                include_scores=body.include_scores,
                format=body.format,
            )
            return job_out(enqueue(session, predictor.runner, payload))
        X, _ = predictor.store.load_dataset(dataset.sha256)
    elif body.instances is not None:
        X = instances_to_matrix(body.instances, served.feature_names)
    else:
        raise InvalidInput("give exactly one of instances and dataset_id", loc=("body", "instances"))
    predictions = predict_items(
        served.model,
        output,
        X,
        served.label_names,
        threshold=body.threshold,
        top_k=body.top_k,
        include_scores=body.include_scores,
    )
    return PredictResponse(model=info, output=output, predictions=predictions)
