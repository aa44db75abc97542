"""Whether a training fits its memory bounds, from the methods' own declarations.

The rule behind ``LABELSERVE_MAX_MODEL_MB``: a method's ``memory_estimate`` (its fit's peak)
must be within the budget, and a method that needs dense features must not be handed a sparse
dataset whose dense table exceeds the densifying bound. The service applies it at submit
(``app.services.memory``), naming the largest sizes (``SIZES``) that fit; a selection job
applies it to ``auto``'s candidates, training one that fits only smaller at the largest size
that fits and leaving out the others. Plain arithmetic on the declarations: nothing here knows
the store.
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
#: the integer parameters whose smaller values shrink a method's estimate: a refusal names the
#: largest value of each that fits (the other parameters as given), and ``auto`` trains a
#: candidate that fits only smaller at the first one's
SIZES: dict[str, tuple[str, ...]] = {
    "rf": ("n_estimators", "max_depth"),
    "ecc": ("n_chains",),
    "gbm": ("n_estimators",),
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
    sizes = {name: largest_fitting(spec, params, shape, budget, name) for name in SIZES.get(spec.id, ())}
    fits = " or ".join(
        f"{name}={value} ({_mb(spec.estimator.memory_estimate(shape, {**params, name: value}).train_peak_mb)} MB)"
        for name, value in sizes.items()
        if value is not None
    )
    return (
        f"method '{spec.id}' on {shape.n} x {shape.d} with {shape.q} labels is estimated to need "
        f"{_mb(estimate.train_peak_mb)} MB while training (model {_mb(estimate.model_mb)} MB), more than "
        f"LABELSERVE_MAX_MODEL_MB = {budget.max_model_mb:g}; "
        + (f"the largest that fit (each alone, the others as given): {fits}; " if fits else "")
        + f"use {change}"
    )


def _mb(value: float) -> str:
    """Megabytes as a refusal shows them: whole ones, three significant digits below 100."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def largest_fitting(
    spec: MethodSpec, params: Mapping[str, Any], shape: DataShape, budget: MemoryBudget, name: str
) -> int | None:
    """The largest value of the integer parameter ``name``, below its value in ``params``, at
    which ``spec``'s estimated peak fits ``budget``: a bisection on the method's own
    ``memory_estimate``, which grows with each parameter of ``SIZES``. None when not even 1 fits,
    or when the value is None (an unbounded ``max_depth``) and even n fits: no tree on n rows is
    that deep, so such a bound would be none (bibtex's sparse trees: depth 130-141 unbounded, and
    the depth-capped node count is below the grown-out one at any depth)."""
    given = params.get(name)
    high = shape.n if given is None else int(given) - 1

    def fits(value: int) -> bool:
        return spec.estimator.memory_estimate(shape, {**params, name: value}).train_peak_mb <= budget.max_model_mb

    if high < 1 or not fits(1) or (given is None and fits(high)):
        return None
    low = 1  # fits
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class Fitting:
    """``auto``'s candidates against a budget: ``kept`` (in the order given) fit, some of them
    only at a smaller size (``resized``: method -> parameters); ``reasons`` says why each method
    that does not fit at its defaults does not (the resized ones and those left out)."""

    kept: list[str]
    resized: dict[str, dict[str, int]]
    reasons: dict[str, str]

    @property
    def left_out(self) -> dict[str, str]:
        """The methods that do not fit at any size, with why."""
        return {method: reason for method, reason in self.reasons.items() if method not in self.resized}


def fitting(candidates: Iterable[str], shape: DataShape, budget: MemoryBudget, n_jobs: int | None = None) -> Fitting:
    """Candidate methods, at their default parameters (with ``n_jobs``, the selection's, where
    they declare it), split by ``budget``: a method that does not fit is kept at the largest
    value of its first ``SIZES`` parameter that fits, and left out when none does."""
    kept: list[str] = []
    resized: dict[str, dict[str, int]] = {}
    reasons: dict[str, str] = {}
    methods = catalog()
    for method in candidates:
        spec = methods[method]
        params = spec.params().model_dump()
        if n_jobs is not None and "n_jobs" in params and params["n_jobs"] is None:
            params["n_jobs"] = n_jobs
        reason = problem(spec, params, shape, budget)
        if reason is None:
            kept.append(method)
            continue
        reasons[method] = reason
        name = SIZES.get(method, (None,))[0]
        value = None if name is None else largest_fitting(spec, params, shape, budget, name)
        if name is not None and value is not None and problem(spec, {**params, name: value}, shape, budget) is None:
            kept.append(method)
            resized[method] = {name: value}
    return Fitting(kept, resized, reasons)


def sparse_takers(spec: MethodSpec) -> list[str]:
    """The methods of ``spec``'s task and dataset kind that fit CSR features as they are."""
    return sorted(
        s.id
        for s in catalog().values()
        if s.estimator.accepts_sparse and s.task == spec.task and s.dataset_kind == spec.dataset_kind
    )
