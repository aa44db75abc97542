"""The contract every method module fulfils.

A method module (``app/methods/<name>.py``) defines a scikit-learn estimator and a module level
``SPEC: MethodSpec``. The catalog (``app.methods.catalog``) discovers every module that has a
``SPEC``, so adding a method means adding one module (and its ``docs/methods/<id>.md``).

Hyperparameters are declared once, by the pydantic ``*Params`` model of the module (type,
default, range, description; it is also the JSON schema ``GET /methods`` shows). The
estimator's ``__init__`` takes the same names with the same defaults, keyword-only after the
first, and stores them unchanged; ``fit`` checks ``get_params()`` against the model
(:meth:`ParamsContract._validated_params`) and raises :class:`InvalidParameterError` naming the
parameter, so a library user and an API user get the same verdict.

Estimator interface by task (all take dense float64 ``X`` of shape (n, d)):

* ``multilabel`` (classifiers, :class:`MultiLabelClassifierMixin`): ``fit(X, Y)`` with ``Y``
  0/1 (or -1/+1) of shape (n, q); ``decision_function(X) -> (n, q)`` scores, higher = more
  relevant (the ranking is score descending); ``predict(X, threshold=None) -> (n, q)`` 0/1 label
  sets (``threshold=None`` uses the method's own rule). A classifier may also define
  ``predict_details(X, threshold=None) -> tuple[ndarray, list[dict]]``: the label sets plus extra
  per-sample fields for the API response (label references given as column indices; the service
  maps them to names).
* ``distribution`` (label distribution learners, :class:`DistributionLearnerMixin`):
  ``fit(X, D)`` with ``D`` rows summing to 1; ``predict(X) -> (n, c)`` rows summing to 1.
* ``selection`` (feature selectors, :class:`RankedSelectorMixin`): ``fit(X, Y)``; fitted
  ``feature_scores_`` (d,) and ``ranking_`` (d,) (feature indices best first);
  scikit-learn's ``transform(X)`` / ``get_support()`` for the default number of features and
  ``top_features(k)`` for any other.

``fit`` accepts an optional keyword ``progress: ProgressCallback``. Call it as
``progress(stage, fraction)`` with ``fraction`` in [0, 1] over the whole fit; the job runner
stores it and may raise ``JobCancelled`` from inside it, so call it only at points where
stopping is safe. Never store the callback on the estimator (it must stay picklable).

Predict paths are hot (one request = one call). The public ``predict`` /
``decision_function`` / ``predict_details`` check that the estimator is fitted and validate
``X`` as scikit-learn does; each delegates to a private twin (``_predict``,
``_decision_function``, ``_predict_details``) that takes a float64 C-ordered array of the right
width and does no checking. The service validates requests at the API boundary and calls the
private twins (the ``KMeans.transform`` / ``_transform`` pattern).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import Tags
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

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


class InvalidParameterError(ValueError):
    """A hyperparameter outside its declared contract (the method's ``*Params`` model).

    ``param`` names the first offending parameter and ``errors`` is pydantic's list of errors
    (``loc``, ``msg``, ``type``), the same list the API answers with in its 422 body.
    """

    def __init__(self, estimator: str, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        self.param = ".".join(str(part) for part in errors[0]["loc"]) if errors else ""
        details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        super().__init__(f"invalid {estimator} parameter {details}")


def validate_params(model: type[MethodParams], values: dict[str, Any], estimator: str) -> MethodParams:
    """``values`` checked against ``model``; raises :class:`InvalidParameterError`."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = [{"loc": e["loc"], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        raise InvalidParameterError(estimator, errors) from None


class ParamsContract(BaseEstimator):
    """A scikit-learn estimator whose hyperparameters are declared by ``_params_model``."""

    _params_model: ClassVar[type[MethodParams]]

    def _validated_params(self) -> MethodParams:
        """The constructor parameters checked against the declaration (called first in ``fit``)."""
        return validate_params(self._params_model, self.get_params(deep=False), type(self).__name__)


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


# --------------------------------------------------------------------------- input validation
def check_multilabel(
    estimator: BaseEstimator, X: Any, Y: Any, *, class_vector: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``fit``'s input checks for multi-label learners: float64 C-ordered ``X``, 0/1 float64 ``Y``.

    Runs scikit-learn's ``validate_data`` (which sets ``n_features_in_`` and, for data frames,
    ``feature_names_in_``), then requires a 2-D label matrix. -1/+1 targets (Mulan, the Yahoo
    .mat files) are accepted, -1 meaning "absent", so that every estimator takes the same data
    as the service's parsers without a conversion step.

    ``class_vector=True`` (the feature selectors) also accepts a 1-D vector of class labels and
    learns from its one-hot label matrix: a multi-class problem is a multi-label problem with
    exactly one label per sample. A classifier cannot accept it, since its predictions would
    have to be 1-D as well.
    """
    X, Y = validate_data(estimator, X, Y, multi_output=True, dtype=np.float64, order="C", ensure_min_samples=2)
    Y = np.asarray(Y)
    kind = type_of_target(Y, input_name="Y")
    if kind.startswith("continuous"):
        raise ValueError(f"Unknown label type: {kind}. Y must be a 0/1 (or -1/+1) label matrix")
    if Y.ndim == 1 and class_vector:
        classes, codes = np.unique(Y, return_inverse=True)
        onehot = np.zeros((Y.shape[0], classes.size))
        onehot[np.arange(Y.shape[0]), codes] = 1.0
        return X, onehot
    if Y.ndim != 2:
        hint = "Only binary classification is supported, per label: " if kind == "multiclass" else ""
        raise ValueError(f"{hint}Y must be a 2-D (n_samples, n_labels) label matrix, got shape {Y.shape}")
    if Y.shape[1] < 1:
        raise ValueError("Y needs at least one label column")
    if not np.isin(Y, (-1, 0, 1)).all():
        raise ValueError("Y must be a 0/1 (or -1/+1) label matrix")
    return X, (Y > 0).astype(np.float64)


def check_features(estimator: BaseEstimator, X: Any) -> np.ndarray:
    """The public predict paths' checks: fitted, and ``X`` finite float64 of the training width.

    Zero rows are allowed (the answer is then empty), as on the service's fast path.
    """
    check_is_fitted(estimator)
    return validate_data(estimator, X, dtype=np.float64, order="C", reset=False, ensure_min_samples=0)


# --------------------------------------------------------------------------- task mixins
def _multi_output_only(tags: Tags) -> Tags:
    tags.target_tags.required = True
    tags.target_tags.multi_output = True
    tags.target_tags.single_output = False
    return tags


class MultiLabelClassifierMixin(ClassifierMixin):
    """Multi-label classifier: ``Y`` is an (n, q) label matrix, never a 1-D class vector.

    ``fit`` sets ``classes_`` to ``[array([0, 1])] * q`` (scikit-learn's convention for
    multi-label classifiers), and ``score`` is scikit-learn's subset accuracy.
    """

    classes_: list[np.ndarray]

    def __sklearn_tags__(self) -> Tags:
        tags = _multi_output_only(super().__sklearn_tags__())
        assert tags.classifier_tags is not None
        tags.classifier_tags.multi_label = True
        tags.classifier_tags.multi_class = False  # every label column is binary
        return tags

    def _set_classes(self, q: int) -> None:
        self.classes_ = [np.array([0, 1]) for _ in range(q)]


class DistributionLearnerMixin:
    """Label distribution learner: ``D`` is an (n, c) matrix of rows summing to 1."""

    def __sklearn_tags__(self) -> Tags:
        tags = _multi_output_only(super().__sklearn_tags__())  # type: ignore[misc]
        tags.target_tags.positive_only = True  # distributions are non-negative
        return tags


class RankedSelectorMixin(SelectorMixin):
    """scikit-learn's selector interface for methods that rank every feature (``ranking_``).

    ``get_support()`` and ``transform(X)`` keep the method's default number of features
    (``_default_count``: the papers differ on rounding ``ratio * d``); ``top_features(k)`` gives
    any other number, best first. Selectors learn from a label matrix (or a class vector), so
    ``Y`` is required.
    """

    n_features_in_: int
    ranking_: np.ndarray

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True  # a label matrix, or a class vector (see check_multilabel)
        return tags

    def _default_count(self, d: int) -> int:
        raise NotImplementedError

    def top_features(self, k: int | None = None) -> np.ndarray:
        """Indices of the best ``k`` features, best first (default: the method's ``ratio``)."""
        check_is_fitted(self)
        d = self.n_features_in_
        if k is None:
            k = self._default_count(d)
        elif not 1 <= k <= d:
            raise ValueError(f"k must be in [1, {d}], got {k}")
        return self.ranking_[: int(k)]

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self)
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.top_features()] = True
        return mask
