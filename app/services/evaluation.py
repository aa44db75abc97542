"""Evaluation: the standard metrics of a version's task on a stored dataset, recorded as an
evaluation row beside the (immutable) version.

Selectors are judged the way their papers do it: an ML-kNN (k=10) is fitted, inside the
request, on the selected features of a training dataset and scored on the evaluated one.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from app import scoring
from app.core import Core
from app.errors import InvalidInput, NotFound, raised_by_the_service
from app.methods.mlknn import MLkNN
from app.registry.versions import notify_on_commit
from app.schemas import EvaluateRequest, EvaluateResponse, ModelInfo
from app.services.datasets import dataset_with_features
from app.services.models import load_served, method_of, resolve_version
from app.serving.selected_features import top_features
from app.storage.orm import Dataset, Evaluation, ModelVersion

log = logging.getLogger("labelserve.api")

SELECTOR_DEFAULT_FRACTION = 0.2  # ELCFS's protocol: ML-kNN on the top 20% of features
DOWNSTREAM_K = 10


def unscorable(exc: ValueError) -> str:
    """Why a model's outputs on a dataset could not be scored: the service's own check says it;
    a library's text stays in the log."""
    if raised_by_the_service(exc):
        return str(exc)
    log.warning("evaluation failed in a library", exc_info=(type(exc), exc, exc.__traceback__))
    return "the model's outputs on it cannot be scored (non-finite or malformed scores); the server log has the details"


def evaluate(core: Core, body: EvaluateRequest) -> EvaluateResponse:
    """The metrics of a version on a dataset, recorded as an evaluation of the version.

    The rows are read in read-only sessions closed before any computation (the predictions, a
    selector's downstream classifier); the evaluation is recorded in a write transaction of its
    own at the end, so no lock or transaction is held while the model computes.
    """
    store = core.store
    with core.database.reading() as session:
        version = resolve_version(session, body.model)
        spec = method_of(version.method)
        dataset = dataset_with_features(session, body.dataset_id, version.feature_names)
    if dataset.kind != spec.dataset_kind:
        raise InvalidInput(
            f"a {spec.id} model is evaluated on {spec.dataset_kind} data; '{dataset.id}' is {dataset.kind}",
            loc=("body", "dataset_id"),
        )
    model = load_served(core.cache, core.metrics, (version.id, version.created_at)).model
    X, Y = store.load_dataset(dataset.sha256)
    Y = Y[:, label_columns(dataset, version)]
    try:
        if spec.task == "distribution":
            scores, downstream = scoring.ldl_metrics(Y, model.predict(X)), None
        elif spec.task == "multilabel":
            Yhat, S = model.predict(X, threshold=body.threshold), model.decision_function(X)
            scores, downstream = scoring.multilabel_metrics(Y, Yhat, S), None
        else:
            scores, downstream = _downstream(core, body, version, model, X, Y)
    except ValueError as exc:  # e.g. a model that produced non-finite scores on this data
        raise InvalidInput(
            f"cannot evaluate on '{dataset.id}': {unscorable(exc)}", loc=("body", "dataset_id")
        ) from None
    # a metric that no sample defines (e.g. ranking loss when every label set is empty) is null
    finite = {name: float(value) if math.isfinite(value) else None for name, value in scores.items()}
    with core.database.session() as session:
        notify_on_commit(session, core.store)  # the version's page shows its evaluations
        session.add(
            Evaluation(
                version_id=version.id,
                dataset_id=dataset.id,
                dataset_sha256=dataset.sha256,
                n_samples=dataset.n_samples,
                metrics=finite,
                options={"threshold": body.threshold, "downstream": downstream},
            )
        )
    return EvaluateResponse(
        model=ModelInfo(name=version.model_name, version=version.version, method=spec.id),
        dataset_id=dataset.id,
        n_samples=int(X.shape[0]),
        metrics=finite,
        downstream=downstream,
    )


def label_columns(dataset: Dataset, version: ModelVersion) -> np.ndarray:
    """Columns of the dataset's labels in the model's label order (names must match as sets)."""
    if sorted(dataset.label_names) != sorted(version.label_names):
        raise InvalidInput(
            f"labels {dataset.label_names[:5]}... do not match the model's {len(version.label_names)} labels",
            loc=("body", "dataset_id"),
        )
    position = {name: j for j, name in enumerate(dataset.label_names)}
    return np.array([position[name] for name in version.label_names], dtype=np.intp)


def _downstream(
    core: Core,
    body: EvaluateRequest,
    version: ModelVersion,
    selector: Any,
    X: np.ndarray,
    Y: np.ndarray,
) -> tuple[dict[str, float], dict[str, Any]]:
    """A selector's metrics: ML-kNN fitted on its selected features of the training dataset."""
    loc = ("body", "train_dataset_id")
    train_id = body.train_dataset_id or version.dataset_id
    if train_id is None:
        raise NotFound("the selector's training dataset is unknown; give train_dataset_id", loc=loc)
    try:
        with core.database.reading() as session:
            train = dataset_with_features(session, train_id, version.feature_names, loc=loc)
    except NotFound:
        raise NotFound(f"dataset '{train_id}' not found (was the selector's training data deleted?)", loc=loc) from None
    Xtr, Ytr = core.store.load_dataset(train.sha256)
    Ytr = Ytr[:, label_columns(train, version)]
    keep = top_features(selector, body.top_k, None if body.top_k else SELECTOR_DEFAULT_FRACTION)
    classifier = MLkNN(k=DOWNSTREAM_K).fit(Xtr[:, keep], Ytr)
    Xsel = X[:, keep]
    Yhat, S = classifier.predict(Xsel, threshold=body.threshold), classifier.decision_function(Xsel)
    downstream = {"method": "mlknn", "k": DOWNSTREAM_K, "top_k": int(keep.size), "train_dataset_id": train.id}
    return scoring.multilabel_metrics(Y, Yhat, S), downstream
