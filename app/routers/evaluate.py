"""``POST /evaluate``: the standard metrics of a model's task on a stored dataset."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fastapi import APIRouter, HTTPException, Request

from app import metrics
from app.deps import CacheDep, SessionDep, StoreDep
from app.methods.mlknn import MLkNN
from app.orm import Dataset, ModelVersion
from app.pipeline import top_features
from app.routers.predict import dataset_for, load_model, resolve_or_404
from app.schemas import EvaluateRequest, EvaluateResponse, ModelInfo

router = APIRouter(tags=["evaluation"])

SELECTOR_DEFAULT_FRACTION = 0.2  # ELCFS's protocol: ML-kNN on the top 20% of features


def label_columns(dataset: Dataset, version: ModelVersion) -> np.ndarray:
    """Columns of the dataset's labels in the model's label order (names must match as sets)."""
    if sorted(dataset.label_names) != sorted(version.label_names):
        raise HTTPException(
            422,
            f"dataset_id: labels {dataset.label_names[:5]}... do not match the model's "
            f"{len(version.label_names)} labels",
        )
    position = {name: j for j, name in enumerate(dataset.label_names)}
    return np.array([position[name] for name in version.label_names], dtype=np.intp)


def _score(
    session: SessionDep,
    store: StoreDep,
    body: EvaluateRequest,
    version: ModelVersion,
    task: str,
    model: Any,
    X: np.ndarray,
    Y: np.ndarray,
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The task's metrics, and for selectors how the downstream classifier was trained."""
    if task == "distribution":
        return metrics.ldl_metrics(Y, model.predict(X)), None
    if task == "multilabel":
        Yhat, S = model.predict(X, threshold=body.threshold), model.decision_function(X)
        return metrics.multilabel_metrics(Y, Yhat, S), None
    train_id = body.train_dataset_id or version.dataset_id
    train = session.get(Dataset, train_id) if train_id else None
    if train is None:
        raise HTTPException(
            404,
            f"train_dataset_id: dataset '{train_id}' not found (was the selector's training data deleted?)",
        )
    train = dataset_for(session, train.id, version)
    Xtr, Ytr = store.load_dataset(train.sha256)
    Ytr = Ytr[:, label_columns(train, version)]
    keep = top_features(model, body.top_k, None if body.top_k else SELECTOR_DEFAULT_FRACTION)
    classifier = MLkNN(k=10).fit(Xtr[:, keep], Ytr)
    Xsel = X[:, keep]
    Yhat, S = classifier.predict(Xsel, threshold=body.threshold), classifier.decision_function(Xsel)
    downstream = {"method": "mlknn", "k": 10, "top_k": int(keep.size), "train_dataset_id": train.id}
    return metrics.multilabel_metrics(Y, Yhat, S), downstream


@router.post("/evaluate", response_model=EvaluateResponse)
def evaluate(
    body: EvaluateRequest, request: Request, session: SessionDep, store: StoreDep, cache: CacheDep
) -> EvaluateResponse:
    version, spec = resolve_or_404(session, body.model)
    dataset = dataset_for(session, body.dataset_id, version)
    if dataset.kind != spec.dataset_kind:
        raise HTTPException(
            422,
            f"dataset_id: a {spec.id} model is evaluated on {spec.dataset_kind} data; '{dataset.id}' is {dataset.kind}",
        )
    model = load_model(request, cache, version)
    X, Y = store.load_dataset(dataset.sha256)
    Y = Y[:, label_columns(dataset, version)]
    try:
        scores, downstream = _score(session, store, body, version, spec.task, model, X, Y)
    except ValueError as exc:  # e.g. a model that produced non-finite scores on this data
        raise HTTPException(422, f"dataset_id: cannot evaluate on '{dataset.id}': {exc}") from None
    # a metric that no sample defines (e.g. ranking loss when every label set is empty) is null
    scores = {name: float(value) if math.isfinite(value) else None for name, value in scores.items()}
    version.metrics = {**(version.metrics or {}), dataset.id: scores}
    session.commit()
    return EvaluateResponse(
        model=ModelInfo(name=version.model_name, version=version.version, method=spec.id),
        dataset_id=dataset.id,
        n_samples=int(X.shape[0]),
        metrics=scores,
        downstream=downstream,
    )
