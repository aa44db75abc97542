"""Whether a training fits its memory bounds, from the methods' own declarations.

The rule behind ``LABELSERVE_MAX_MODEL_MB``: a method's ``memory_estimate`` (its fit's peak)
must be within the budget, and a method that needs dense features must not be handed a sparse
dataset whose dense table exceeds the densifying bound. The service applies it at submit
(``app.services.memory``); a selection job applies it to ``auto``'s candidates, leaving out
those that would not fit. Plain arithmetic on the declarations: nothing here knows the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.methods.base import MB, DataShape, MethodSpec
from app.methods.catalog import catalog

#: what to change, per method, when its estimate is too large (the others: another method)
ADVICE = {
    "rf": "fewer trees (n_estimators), a max_depth, or a larger min_samples_leaf",
    "ecc": "fewer chains (n_chains)",
    "gbm": "fewer rounds (n_estimators) or leaves (num_leaves)",
    "mi-filter": 'estimator="binned"',
}


@dataclass(frozen=True)
class MemoryBudget:
    """The bounds a training is checked against at submit: ``max_model_mb`` for the estimated
    peak (``LABELSERVE_MAX_MODEL_MB``), ``max_dense_cells`` for a sparse dataset densified for a
    method that needs dense features."""

    max_model_mb: float
    max_dense_cells: int


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


def fitting(candidates: Iterable[str], shape: DataShape, budget: MemoryBudget) -> tuple[list[str], dict[str, str]]:
    """Candidate methods (at their default parameters) split into those that fit ``budget`` and
    those left out (id -> reason)."""
    kept: list[str] = []
    left_out: dict[str, str] = {}
    methods = catalog()
    for method in candidates:
        spec = methods[method]
        reason = problem(spec, spec.params().model_dump(), shape, budget)
        if reason is None:
            kept.append(method)
        else:
            left_out[method] = reason
    return kept, left_out


def sparse_takers(spec: MethodSpec) -> list[str]:
    """The methods of ``spec``'s task and dataset kind that fit CSR features as they are."""
    return sorted(
        s.id
        for s in catalog().values()
        if s.estimator.accepts_sparse and s.task == spec.task and s.dataset_kind == spec.dataset_kind
    )
