"""Prediction: resolving the model, checking the request against it, and answering it, either at
once or, for a stored dataset larger than ``batch_job_rows``, as a batch prediction job.

The hot path: a reference resolved once is kept in ``ResolvedRefs`` until the registry changes
(see ``Store.registry_changed``), so a prediction of a few instances with a cached reference
needs no database session: ``app.api.fast_path`` answers it (``predict_cached``), a small one
on the event loop. Everything else goes through ``predict`` in a worker thread. Both run the
same checks, in the same order, and give the same answers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy.orm import Session

from app.config import Settings
from app.errors import InvalidInput
from app.jobs.base import JobRunner
from app.jobs.payloads import BatchPredictPayload
from app.jobs.queue import enqueue, job_out
from app.observability import Metrics
from app.prediction import instances_to_matrix, predict_items, selected_features
from app.registry import ModelCache, Served
from app.schemas import JobOut, PredictRequest
from app.services.datasets import dataset_with_features
from app.services.registry import load_served, method_of, resolve_version_key
from app.store import Store

#: a ``PredictResponse`` as plain JSON values, built directly: validating and serialising the
#: response model cost five times what orjson takes for the same bytes, on every prediction
Answer = dict[str, Any]

REFS_KEPT = 4096  # resolved references per process (each holds only a pointer to a cached model)


class ResolvedRefs:
    """Model references (``name``, ``name@3``, ``name@alias``) -> loaded versions, per process.

    Valid while the store's registry token is the one read *before* the resolution: a change
    committed meanwhile writes a new token, so the entry is dropped on the next lookup instead
    of being served stale. Thread-safe: the event loop and worker threads share it.
    """

    def __init__(self, store: Store, size: int = REFS_KEPT) -> None:
        self._store = store
        self._size = size
        self._lock = threading.Lock()
        self._token: bytes | None = None
        self._served: OrderedDict[str, Served] = OrderedDict()

    def get(self, ref: str) -> tuple[bytes, Served | None]:
        """The registry token now, and the version ``ref`` resolved to if it has not changed since
        (a new token drops every entry)."""
        token = self._store.registry_token()
        with self._lock:
            if token != self._token:
                self._served.clear()
                self._token = token
            served = self._served.get(ref)
            if served is not None:
                self._served.move_to_end(ref)
            return token, served

    def put(self, token: bytes, ref: str, served: Served) -> None:
        """Keep a resolution made after reading ``token``; ignored if the registry changed since."""
        with self._lock:
            if token != self._token:
                return
            self._served[ref] = served
            self._served.move_to_end(ref)
            while len(self._served) > self._size:
                self._served.popitem(last=False)

    def forget(self, served: Served) -> None:
        """Drop the references resolved to ``served`` (the model cache let go of it: holding it
        here would keep it in memory beyond the cache's bound)."""
        with self._lock:
            for ref in [ref for ref, kept in self._served.items() if kept is served]:
                del self._served[ref]


@dataclass(frozen=True)
class Predictor:
    """What answering a prediction needs besides the session: long-lived and shared by requests."""

    store: Store
    cache: ModelCache
    runner: JobRunner
    metrics: Metrics
    settings: Settings  # read per request: ``batch_job_rows`` is configuration, not state
    refs: ResolvedRefs = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "refs", ResolvedRefs(self.store))
        self.cache.on_evict(self.refs.forget)

    def served(self, session: Session, ref: str) -> Served:
        """The loaded version ``ref`` points to: from the resolved references, or resolved now."""
        token, served = self.refs.get(ref)
        if served is not None:
            self.metrics.cache_lookup(True)
            return served
        served = load_served(self.cache, self.metrics, resolve_version_key(session, ref))
        self.refs.put(token, ref, served)
        return served


def predict_cached(predictor: Predictor, body: PredictRequest) -> bytes | None:
    """The answer's JSON without a database session, or None when the request needs one: the
    reference is not resolved in this process yet, or a stored dataset is named."""
    if body.dataset_id is not None:
        return None
    _, served = predictor.refs.get(body.model)
    if served is None:
        return None
    answer = _answer(None, predictor, served, body)
    assert not isinstance(answer, JobOut)  # no dataset: never a job
    predictor.metrics.cache_lookup(True)
    return orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)


def predict(session: Session, predictor: Predictor, body: PredictRequest) -> Answer | JobOut:
    """The predictions, or the queued job that will write them (a large stored dataset)."""
    return _answer(session, predictor, predictor.served(session, body.model), body)


def _answer(session: Session | None, predictor: Predictor, served: Served, body: PredictRequest) -> Answer | JobOut:
    spec = method_of(served.method)
    output = body.output or spec.default_output
    if output not in spec.outputs:
        raise InvalidInput(f"a {spec.id} model gives {', '.join(spec.outputs)}; not '{output}'", loc=("body", "output"))
    info = {"name": served.name, "version": served.version, "method": spec.id}
    if output == "features":
        features = selected_features(served.model, served.feature_names, body.top_k)
        return {"model": info, "output": output, "features": features}
    if body.dataset_id is not None and body.instances is not None:
        raise InvalidInput("give exactly one of instances and dataset_id", loc=("body",))
    if body.dataset_id is not None:
        assert session is not None  # predict_cached never takes a dataset
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
    return {"model": info, "output": output, "predictions": predictions}
