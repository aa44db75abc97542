"""The ``params`` of ``POST /train`` with ``"method": "auto"``, and their checks against a dataset."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.evaluation.pool import metric_names, task_of
from app.methods.blend import BLENDS
from app.methods.catalog import catalog, get_method
from app.suggest import did_you_mean


class AutoParams(BaseModel):
    """``params`` of ``POST /train`` with ``"method": "auto"`` (all optional)."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[str] | None = Field(
        None, min_length=1, description="Method ids to choose from; default: every method fitting the dataset."
    )
    metric: str | None = Field(
        None, description="Metric to rank by (any /evaluate metric); default average_precision or chebyshev."
    )
    cv: int | None = Field(
        None,
        ge=2,
        le=20,
        description="Folds of the inner cross-validation; default 10 under 1000 samples (repeated with fresh "
        "shuffles while a quarter of the budget allows), else 5.",
    )
    tune: bool = Field(False, description="Also search each candidate's documented grid.")
    budget_seconds: float | None = Field(
        None,
        gt=0,
        le=86_400,
        description="Wall seconds of this machine for choosing among the default candidates and fitting the "
        "winner (pilots, cross-validation, final fit; default 600 s): what its pilot predicts past it is left out.",
    )


def check_auto(params: AutoParams, kind: str) -> list[str]:
    """Problems with an auto request for a dataset of ``kind`` (empty when it is fine)."""
    task = task_of(kind)
    problems = []
    for i, method in enumerate(params.candidates or []):
        spec = get_method(method)
        if method in (params.candidates or [])[:i]:  # each candidate costs its cross-validation
            problems.append(f"candidates: '{method}' is listed twice")
        elif spec is None:
            problems.append(f"candidates: unknown method '{method}'{did_you_mean(method, catalog())}")
        elif method in BLENDS:
            problems.append(f"candidates: '{method}' is built by auto itself from the other candidates")
        elif spec.task != task or spec.dataset_kind != kind:
            problems.append(f"candidates: '{method}' does not fit a {kind} dataset")
    if params.metric is not None and params.metric not in metric_names(task):
        problems.append(f"metric: '{params.metric}' is not a {task} metric ({', '.join(metric_names(task))})")
    return problems
