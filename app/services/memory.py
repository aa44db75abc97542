"""Memory known before it is spent: the submit-time checks of a training's size.

Every method declares what its fit is expected to take (``MethodEstimator.memory_estimate``,
from the dataset's rows, features, labels and stored non-zeros, and the validated parameters).
A training whose estimated peak exceeds ``LABELSERVE_MAX_MODEL_MB`` is refused at submit with a
422 that names the estimate and what to change, rather than queued and killed by the operating
system in the worker (which the job could only report as "the worker process died"). A method
that needs dense features refuses a sparse dataset whose dense table would exceed the store's
densifying bound, naming the methods that take the data as it is. The rule itself is
``app.methods.memory_bounds`` (a selection job applies it to ``auto``'s candidates too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.config import Settings
from app.errors import InvalidInput
from app.methods.base import DataShape, MemoryEstimate, MethodSpec
from app.methods.memory_bounds import MemoryBudget, problem
from app.storage.orm import Dataset
from app.storage.store import DENSE_MAX_CELLS, Store


def budget_of(settings: Settings) -> MemoryBudget:
    """The memory budget a training is checked against: ``LABELSERVE_MAX_MODEL_MB`` and the
    store's densifying bound."""
    return MemoryBudget(settings.max_model_mb, DENSE_MAX_CELLS)


def dataset_shape(store: Store, dataset: Dataset) -> DataShape:
    """The dataset's sizes, its non-zeros read from the stored file's ``info`` member when it is
    stored sparse (a missing file, or a 0.1.x one, counts as dense)."""
    n, d, q = dataset.n_samples, dataset.n_features, dataset.n_labels
    storage = store.dataset_storage(dataset.sha256)
    if storage is None or storage.storage != "sparse" or storage.density is None:
        return DataShape(n, d, q)
    return DataShape(n, d, q, int(round(storage.density * n * d)))


def check(spec: MethodSpec, params: Mapping[str, Any], shape: DataShape, budget: MemoryBudget) -> MemoryEstimate:
    """The estimate of a training that fits ``budget``; a 422 at ``body.params`` otherwise."""
    reason = problem(spec, params, shape, budget)
    if reason is not None:
        raise InvalidInput(reason, loc=("body", "params"))
    return spec.estimator.memory_estimate(shape, params)
