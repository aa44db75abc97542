"""Memory known before it is spent: the submit-time checks of a training's size.

Every method declares what its fit is expected to take (``MethodEstimator.memory_estimate``,
from the dataset's rows, features, labels and stored non-zeros, and the validated parameters).
A training whose estimated peak exceeds ``LABELSERVE_MAX_MODEL_MB`` is refused at submit with a
422 that names the estimate and what to change, rather than queued and killed by the operating
system in the worker (which the job could only report as "the worker process died"). A method
that needs dense features refuses a sparse dataset whose dense table would exceed the store's
densifying bound, naming the methods that take the data as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.methods.base import MB, DataShape, MemoryEstimate, MethodSpec
from app.methods.catalog import catalog
from app.orm import Dataset
from app.store import DENSE_MAX_CELLS, Store

#: what to change, per method, when its estimate is too large (the others: another method)
ADVICE = {
    "rf": "fewer trees (n_estimators), a max_depth, or a larger min_samples_leaf",
    "ecc": "fewer chains (n_chains)",
    "mi-filter": 'estimator="binned"',
}


@dataclass(frozen=True)
class MemoryBudget:
    """The bounds a training is checked against at submit: ``max_model_mb`` for the estimated
    peak (``LABELSERVE_MAX_MODEL_MB``), ``max_dense_cells`` for a sparse dataset densified for a
    method that needs dense features."""

    max_model_mb: float
    max_dense_cells: int = DENSE_MAX_CELLS


def dataset_shape(store: Store, dataset: Dataset) -> DataShape:
    """The dataset's sizes, its non-zeros read from the stored file's ``info`` member when it is
    stored sparse (a missing or older file counts as dense)."""
    n, d, q = dataset.n_samples, dataset.n_features, dataset.n_labels
    storage = store.dataset_storage(dataset.sha256)
    if storage is None or storage.storage != "sparse" or storage.density is None:
        return DataShape(n, d, q)
    return DataShape(n, d, q, int(round(storage.density * n * d)))


def problem(spec: MethodSpec, params: Mapping[str, Any], shape: DataShape, budget: MemoryBudget) -> str | None:
    """Why ``spec`` with ``params`` cannot be trained on data of ``shape`` within ``budget``
    (None when it can): the densifying bound first, then the estimated peak."""
    if shape.nnz is not None and not spec.estimator.accepts_sparse and shape.n * shape.d > budget.max_dense_cells:
        takers = ", ".join(sparse_takers(spec)) or "none"
        return (
            f"method '{spec.id}' needs dense features: the dataset is stored sparse ({shape.nnz} non-zeros) and "
            f"its dense table would be {shape.n} x {shape.d} = {shape.n * shape.d} cells "
            f"({shape.dense_bytes / MB:.0f} MB), above the bound of {budget.max_dense_cells} cells; "
            f"methods that take it as it is: {takers}"
        )
    estimate = spec.estimator.memory_estimate(shape, params)
    if estimate.train_peak_mb <= budget.max_model_mb:
        return None
    advice = ADVICE.get(spec.id)
    change = f"{advice}, or another method" if advice else "another method"
    return (
        f"method '{spec.id}' on {shape.n} x {shape.d} with {shape.q} labels is estimated to need "
        f"{estimate.train_peak_mb:.0f} MB while training (model {estimate.model_mb:.0f} MB), more than "
        f"LABELSERVE_MAX_MODEL_MB = {budget.max_model_mb:g}; use {change}"
    )


def check(spec: MethodSpec, params: Mapping[str, Any], shape: DataShape, budget: MemoryBudget) -> MemoryEstimate:
    """The estimate of a training that fits ``budget``; a 422 at ``body.params`` otherwise."""
    reason = problem(spec, params, shape, budget)
    if reason is not None:
        raise InvalidInput(reason, loc=("body", "params"))
    return spec.estimator.memory_estimate(shape, params)


def sparse_takers(spec: MethodSpec) -> list[str]:
    """The methods of ``spec``'s task and dataset kind that fit CSR features as they are."""
    return sorted(
        s.id
        for s in catalog().values()
        if s.estimator.accepts_sparse and s.task == spec.task and s.dataset_kind == spec.dataset_kind
    )
