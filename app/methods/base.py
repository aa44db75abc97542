"""The contract every method module fulfils.

A method module (``app/methods/<name>.py``) defines a scikit-learn-style estimator and a module
level ``SPEC: MethodSpec``. The catalog (``app.methods.catalog``) discovers every module that has
a ``SPEC``, so adding a method means adding one module and nothing else.

Estimator interface by task (all take dense float64 ``X`` of shape (n, d)):

* ``multilabel`` (classifiers): ``fit(X, Y)`` with ``Y`` 0/1 of shape (n, q);
  ``decision_function(X) -> (n, q)`` scores, higher = more relevant (the ranking is score
  descending); ``predict(X, threshold=None) -> (n, q)`` 0/1 label sets (``threshold=None`` uses
  the method's own rule). A classifier may also define
  ``predict_details(X, threshold=None) -> tuple[ndarray, list[dict]]``: the label sets plus extra
  per-sample fields for the API response (label references given as column indices; the router
  maps them to names).
* ``distribution`` (label distribution learners): ``fit(X, D)`` with ``D`` rows summing to 1;
  ``predict(X) -> (n, c)`` rows summing to 1.
* ``selection`` (feature selectors): ``fit(X, Y)``; fitted ``feature_scores_`` (d,) and
  ``ranking_`` (d,) (feature indices best first); ``transform(X)``; ``get_support(k)``.

``fit`` accepts an optional keyword ``progress: ProgressCallback``. Call it as
``progress(stage, fraction)`` with ``fraction`` in [0, 1] over the whole fit; the job runner
stores it and may raise ``JobCancelled`` from inside it, so call it only at points where
stopping is safe. Never store the callback on the estimator (it must stay picklable).

Predict paths are hot (one request = one call): validate shapes at the API boundary and keep
per-call scikit-learn input validation out of ``predict``/``decision_function``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

Task = Literal["multilabel", "distribution", "selection"]
Output = Literal["labels", "ranking", "distribution", "features"]
DatasetKind = Literal["multilabel", "distribution"]


class ProgressCallback(Protocol):
    def __call__(self, stage: str, fraction: float) -> None: ...


def no_progress(stage: str, fraction: float) -> None:
    """Default progress callback: does nothing."""


class JobCancelled(Exception):
    """Raised from a progress callback when the job was cancelled."""


class MethodParams(BaseModel):
    """Base of every method's hyperparameter model: unknown keys are rejected (422)."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class MethodSpec:
    """What the catalog, ``GET /methods``, ``POST /train`` and ``POST /predict`` need to know.

    ``params`` is a pydantic model (subclass of ``MethodParams``) whose fields are exactly the
    estimator's constructor arguments; its JSON schema is what ``GET /methods`` shows.
    ``estimator`` is the class, built as ``estimator(**params.model_dump())``.
    """

    id: str
    task: Task
    outputs: tuple[Output, ...]
    params: type[MethodParams]
    estimator: type
    summary: str
    paper: str = ""
    dataset_kind: DatasetKind = "multilabel"
    stages: tuple[str, ...] = field(default_factory=tuple)

    @property
    def default_output(self) -> Output:
        return self.outputs[0]

    def build(self, params: dict[str, Any]) -> Any:
        """Validate ``params`` (raises pydantic.ValidationError) and build an unfitted estimator."""
        return self.estimator(**self.params.model_validate(params).model_dump())


ProgressFn = Callable[[str, float], None]


def check_multilabel(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fit``'s input checks for multi-label learners: float64 ``X`` and 0/1 float64 ``Y``.

    -1/+1 targets (Mulan, the Yahoo .mat files) are accepted, -1 meaning "absent", so that the
    estimators take the same data as the service's parsers without a conversion step.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y)
    if X.ndim != 2 or Y.ndim != 2:
        raise ValueError("X and Y must be 2-D")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
    if X.shape[0] < 2 or X.shape[1] < 1 or Y.shape[1] < 1:
        raise ValueError("need at least 2 samples, 1 feature and 1 label")
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinite values")
    if not np.isin(Y, (-1, 0, 1)).all():
        raise ValueError("Y must be a 0/1 (or -1/+1) label matrix")
    return X, (Y > 0).astype(np.float64)


class RankedSelectorMixin:
    """``get_support`` and ``transform`` for selectors that rank every feature (``ranking_``).

    Subclasses say how many features are kept by default (``_default_count``); the papers
    differ on rounding.
    """

    n_features_in_: int
    ranking_: np.ndarray

    def _default_count(self, d: int) -> int:
        raise NotImplementedError

    def _n_selected(self, k: int | None) -> int:
        d = self.n_features_in_
        if k is None:
            return self._default_count(d)
        if not 1 <= k <= d:
            raise ValueError(f"k must be in [1, {d}], got {k}")
        return int(k)

    def get_support(self, k: int | None = None, indices: bool = False) -> np.ndarray:
        """Top-``k`` features (default: the method's ``ratio``): a boolean mask, or the indices
        best first when ``indices=True``."""
        top = self.ranking_[: self._n_selected(k)]
        if indices:
            return top
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[top] = True
        return mask

    def transform(self, X: np.ndarray, k: int | None = None) -> np.ndarray:
        """Columns of ``X`` for the top-``k`` features, in original column order (as scikit-learn)."""
        return np.asarray(X)[:, self.get_support(k)]
