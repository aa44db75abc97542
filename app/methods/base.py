"""The contract every method module fulfils, and the template ``fit`` every estimator inherits.

A method module (``app/methods/<name>.py``) defines a scikit-learn estimator and a module level
``SPEC: MethodSpec``. The catalog (``app.methods.catalog``) discovers every module that has a
``SPEC``, so adding a method means adding one module (and its ``docs/methods/<id>.md``).

Hyperparameters are declared once, by the pydantic ``*Params`` model of the module (type,
default, range, description; it is also the JSON schema ``GET /methods`` shows and the check
``POST /train`` makes at submit). The estimator's ``__init__`` takes the same names with the
same defaults, keyword-only after the first, and stores them unchanged.

Every estimator derives from :class:`MethodEstimator`, whose ``fit`` is a template (the idea
of scikit-learn's ``_fit_context`` and ``_parameter_constraints``): it checks ``get_params()``
against ``_params_model`` with :func:`checked_params`, the check ``POST /train`` makes (raising
:class:`InvalidParameterError`, the one exception for a bad hyperparameter, naming it, so a
library user and an API user get the same verdict), validates ``X`` and the targets as the task
requires (``_check_fit_data`` of the task mixin), checks the bounds the number of training
samples sets (``sample_bounds``, which the service checks at submit too) and the other bounds
that depend on the data (``_check_data_params``), fits the method's feature scaling
(``_fit_scaling``) and applies it, and hands the rest to the method's ``_fit``. A method module
therefore holds only what is specific to it: ``_fit``, its scores (``_predict_scores`` for the
probability baselines, the private prediction twins otherwise) and the hooks it overrides.

Estimator interface by task (all take dense float64 ``X`` of shape (n, d); a method declaring
``accepts_sparse`` also takes ``scipy.sparse`` CSR ``X`` as it is):

* ``multilabel`` (classifiers, :class:`MultiLabelClassifierMixin`): ``fit(X, Y)`` with ``Y``
  0/1 (or -1/+1) of shape (n, q); ``decision_function(X) -> (n, q)`` scores, higher = more
  relevant (the ranking is score descending); ``predict(X, threshold=None) -> (n, q)`` 0/1 label
  sets (``threshold=None`` uses the method's own rule). A classifier may also define
  ``predict_details(X, threshold=None) -> tuple[ndarray, list[dict]]``: the label sets plus extra
  per-sample fields for the API response (label references given as column indices; the service
  maps them to names). A classifier declaring ``predicts_constant_labels`` predicts a label that is
  never (always) present in the training data with the constant 0 (1): the template records
  ``constant_`` and ``constant_value_`` before ``_fit``.
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

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import Tags
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from app.methods.numerics import FeatureScaling

Task = Literal["multilabel", "distribution", "selection"]
Output = Literal["labels", "ranking", "distribution", "features"]
DatasetKind = Literal["multilabel", "distribution"]


class ProgressCallback(Protocol):
    def __call__(self, stage: str, fraction: float) -> None: ...


ProgressFn = Callable[[str, float], None]


def no_progress(stage: str, fraction: float) -> None:
    """Default progress callback: does nothing."""


class JobCancelled(Exception):
    """Raised from a progress callback when the job was cancelled."""


# Maxima of the count parameters the methods share, from their cost: generous for real use (10 to 100
# times the defaults and the papers' values), refusing absurd requests at submit (a 422 naming them).
#: neighbours (``k``): each training row keeps a list of them, and each is scored per label
MAX_NEIGHBOURS = 1000
#: L-BFGS iterations (``max_iter`` of br, ecc, sa-maxent): each one a pass over the data
MAX_LBFGS_ITER = 10_000


class MethodParams(BaseModel):
    """Base of every method's hyperparameter model: unknown keys are rejected (422)."""

    model_config = ConfigDict(extra="forbid")


P = TypeVar("P", bound=MethodParams)


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter outside its declared contract (the method's ``*Params`` model); a
    ``ValueError`` and a ``TypeError``, as scikit-learn's ``InvalidParameterError`` is.

    ``param`` names the first offending parameter and ``errors`` is pydantic's list of errors
    (``loc``, ``msg``, ``type``), the same list the API answers with in its 422 body.
    """

    def __init__(self, estimator: str, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        self.param = ".".join(str(part) for part in errors[0]["loc"]) if errors else ""
        details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        super().__init__(f"invalid {estimator} parameter {details}")

    @classmethod
    def bound(cls, estimator: type, name: str, message: str) -> InvalidParameterError:
        """``name`` outside a bound that only the training data sets (``k`` at most n - 1), which
        the declaration cannot state."""
        return cls(estimator.__name__, [{"loc": (name,), "msg": message, "type": "data_bound"}])


M = TypeVar("M", bound=BaseModel)


def checked_params(declared: type[M], params: Mapping[str, Any]) -> M:
    """``params`` validated against their declaration in pydantic's strict mode, as JSON: lax mode
    would make ``{"k": true}`` a ``k`` of 1 and ``"5"`` a 5, and strict mode on the Python values
    would refuse a list for a tuple parameter (``dmknn``'s ``beta_prior``). The one check of the
    API's submit and of the template ``fit``; raises pydantic's ``ValidationError``, or
    ``TypeError`` for a value with no JSON form (NumPy scalars and arrays have one)."""
    return declared.model_validate_json(json.dumps(params, default=_json_value), strict=True)


def _json_value(value: object) -> Any:
    """The JSON form of what ``json`` does not encode itself: NumPy scalars and arrays (a grid
    search's ``np.arange``), pydantic models (a blend's ``BlendMember``)."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, BaseModel):
        return value.model_dump()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def validate_params(model: type[P], values: Mapping[str, Any], estimator: str) -> P:
    """``values`` checked against ``model`` (:func:`checked_params`); raises :class:`InvalidParameterError`."""
    errors: list[dict[str, Any]] = [
        {"loc": (name,), "msg": f"Input should be a JSON value, not {type(value).__name__}", "type": "json_type"}
        for name, value in values.items()
        if not _has_json_form(value)
    ]
    if not errors:
        try:
            return checked_params(model, values)
        except ValidationError as exc:
            errors = [{"loc": e["loc"], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    raise InvalidParameterError(estimator, errors)


def _has_json_form(value: object) -> bool:
    try:
        json.dumps(value, default=_json_value)
    except TypeError:
        return False
    return True


def draw_seed() -> int:
    """A fresh random seed in [0, 2**31): the one place a seed is drawn when none was given
    (the service's submit, a job's older rows, the methods' own fallbacks), so every drawn seed
    is valid for NumPy, scikit-learn and LightGBM alike."""
    return secrets.randbelow(2**31)


_Estimator = TypeVar("_Estimator", bound="MethodEstimator")

MB = 1 << 20


@dataclass(frozen=True)
class DataShape:
    """The sizes a memory estimate is made from: ``n`` rows, ``d`` features, ``q`` labels (or
    distribution columns), and ``nnz`` stored feature values when the features are sparse
    (``None``: dense)."""

    n: int
    d: int
    q: int
    nnz: int | None = None

    @property
    def dense_bytes(self) -> int:
        """Bytes of the features as a dense float64 (n, d) array."""
        return 8 * self.n * self.d

    def feature_bytes(self, sparse_ok: bool) -> int:
        """Bytes of the features as a method receives them: CSR (float64 values, int32 indices)
        when they are sparse and the method takes them so, else the dense array."""
        if self.nnz is None or not sparse_ok:
            return self.dense_bytes
        return 12 * self.nnz + 8 * (self.n + 1)

    @property
    def label_bytes(self) -> int:
        """Bytes of the float64 (n, q) target matrix the template ``fit`` hands to ``_fit``."""
        return 8 * self.n * self.q


@dataclass(frozen=True)
class MemoryEstimate:
    """What a fit is expected to take: its peak bytes (input, copies, model and temporaries)
    and the bytes of the fitted model (about its artifact's size)."""

    train_peak_bytes: int
    model_bytes: int

    @property
    def train_peak_mb(self) -> float:
        return self.train_peak_bytes / MB

    @property
    def model_mb(self) -> float:
        return self.model_bytes / MB


class MethodEstimator(BaseEstimator):
    """Base of every method's estimator: the template ``fit`` (see the module docstring).

    Subclasses set ``_params_model`` and implement ``_fit``; the task mixin (listed before this
    class in the bases) supplies ``_check_fit_data``. The class attributes below are the
    per-method declarations the template reads.
    """

    _params_model: ClassVar[type[MethodParams]]
    #: ``fit`` takes ``scipy.sparse`` CSR ``X`` as it is (tagged ``input_tags.sparse``). The
    #: other methods reject sparse ``X``, as scikit-learn's checks require of a dense estimator;
    #: code holding sparse data (the job's dataset loader) gets what a method takes from
    #: :func:`fit_input`, the one place that densifies.
    accepts_sparse: ClassVar[bool] = False
    #: Fitted attributes the registered version records (``fit_details``, under the name
    #: without its trailing underscore): what the fit measured that a user should see, such as
    #: the recall of an approximate neighbour index. JSON values (floats, strings, None).
    recorded_attributes: ClassVar[tuple[str, ...]] = ()

    def fit(self: _Estimator, X: Any, Y: Any, progress: ProgressFn | None = None) -> _Estimator:
        """Check the parameters, the data and the bounds the data sets, fit the scaling (and
        record the constant labels, for a classifier that ``predicts_constant_labels``), then
        call ``_fit`` on the scaled features; returns self."""
        params = self._validated_params().model_dump()
        X, Y = self._check_fit_data(X, Y)
        self.check_sample_counts(params, X.shape[0])
        self._check_data_params(X, Y)
        scaling = self._fit_scaling(X)
        if scaling is not None:
            self.scaling_ = scaling
            X = scaling.transform(X)
        self._fit(X, Y, progress or no_progress)
        return self

    def _validated_params(self) -> MethodParams:
        """The constructor parameters checked against the declaration (the template's first step)."""
        return validate_params(self._params_model, self.get_params(deep=False), type(self).__name__)

    def _check_fit_data(self, X: Any, Y: Any) -> tuple[Any, np.ndarray]:
        """``X`` and the targets validated for the task (the task mixins implement it)."""
        raise NotImplementedError

    @classmethod
    def sample_bounds(cls, params: Mapping[str, Any]) -> dict[str, int]:
        """The parameters (of these validated ``params``) that count training samples, each with
        how many of the n training rows it must leave: 1 for ``k`` neighbours of a training row,
        which is never its own neighbour (``k <= n - 1``); 0 for clusters, or neighbours of rows
        that are not training rows (``<= n``). None by default. The one declaration of these
        bounds: ``fit`` and the service's submit both check it (:meth:`check_sample_counts`)."""
        return {}

    @classmethod
    def check_sample_counts(cls, params: Mapping[str, Any], n_samples: int) -> None:
        """Raise :meth:`InvalidParameterError.bound` for the first parameter of ``params``
        (validated) above its :meth:`sample_bounds` with ``n_samples`` training rows."""
        for name, left in cls.sample_bounds(params).items():
            value, most = params[name], n_samples - left
            if value > most:
                reading = f"n_samples - {left}" if left else "n_samples"
                message = f"must be an integer in [1, {reading}] = [1, {most}] (n_samples = {n_samples}), got {value}"
                raise InvalidParameterError.bound(cls, name, message)

    def _check_data_params(self, X: Any, Y: np.ndarray) -> None:
        """Parameter bounds that depend on the data beyond its number of rows (distinct rows,
        ...), raised as :meth:`InvalidParameterError.bound`; none by default."""

    def _fit_scaling(self, X: Any) -> FeatureScaling | None:
        """The feature scaling fitted on the training rows, kept as ``scaling_`` and applied to
        ``X`` before ``_fit``; ``None`` (the default) for a method that does not scale."""
        return None

    def _fit(self, X: Any, Y: np.ndarray, progress: ProgressFn) -> None:
        """The method itself, on validated (and scaled) ``X`` and validated targets."""
        raise NotImplementedError

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The fit's expected peak and model bytes for data of ``shape`` and these (validated)
        ``params``, known before any of it is spent (the service refuses a training above
        ``LABELSERVE_MAX_MODEL_MB`` at submit).

        This default suits a method that keeps its (scaled) training set in the model, as the
        instance-based methods do: the model is the dense features and targets; the peak is the
        input, its validated and scaled copies, the model and as much again in temporaries.
        Methods whose model is of another size override it.
        """
        model = shape.dense_bytes + shape.label_bytes
        peak = shape.feature_bytes(cls.accepts_sparse) + 2 * shape.dense_bytes + 2 * model
        return MemoryEstimate(peak, model)

    def derived_nbytes(self) -> int:
        """Bytes this loaded model holds beyond what its pickle holds: arrays derived from the
        fitted attributes when it loads and never stored (none, unless a method says so). The
        model cache counts a model as its artifact's size plus these."""
        return 0

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.accepts_sparse
        return tags


def fit_input(estimator: MethodEstimator | type[MethodEstimator], X: Any) -> Any:
    """``X`` as ``estimator``'s ``fit`` takes it: CSR kept for a method that ``accepts_sparse``,
    a dense copy for the others. The one place that densifies features for a method, by its own
    declaration; a loader of sparse datasets calls it instead of deciding per method."""
    if not sparse.issparse(X):
        return X
    return X.tocsr() if estimator.accepts_sparse else X.toarray()


def data_shape(X: Any, Y: Any) -> DataShape:
    """The :class:`DataShape` of features ``X`` (dense or sparse) and targets ``Y``."""
    q = Y.shape[1] if np.ndim(Y) == 2 else 1
    return DataShape(X.shape[0], X.shape[1], q, int(X.nnz) if sparse.issparse(X) else None)


@dataclass(frozen=True)
class MethodSpec:
    """What the catalog, ``GET /methods``, ``POST /train`` and ``POST /predict`` need to know.

    ``params`` is a pydantic model (subclass of ``MethodParams``) whose fields are exactly the
    estimator's constructor arguments; its JSON schema is what ``GET /methods`` shows.
    ``estimator`` is the class (a :class:`MethodEstimator`), built as ``estimator(**params)``.
    """

    id: str
    task: Task
    outputs: tuple[Output, ...]
    params: type[MethodParams]
    estimator: type[MethodEstimator]
    summary: str
    paper: str = ""
    dataset_kind: DatasetKind = "multilabel"
    stages: tuple[str, ...] = field(default_factory=tuple)

    @property
    def default_output(self) -> Output:
        return self.outputs[0]

    def build(self, params: MethodParams | Mapping[str, Any]) -> Any:
        """An unfitted estimator with these constructor arguments (the others at their defaults).

        Nothing is validated here: the caller checked the parameters against ``self.params``
        once (at submit) and ``fit`` checks them again, as scikit-learn's contract asks. Pass
        the validated declaration (or its ``model_dump``), so that the estimator gets the
        coerced values (``max_features=1`` is the fraction 1.0, not one feature); a plain
        mapping is taken as given.
        """
        values = params.model_dump() if isinstance(params, MethodParams) else params
        return self.estimator(**values)


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
    X, Y = validate_data(
        estimator,
        X,
        Y,
        multi_output=True,
        dtype=np.float64,
        order="C",
        ensure_min_samples=2,
        accept_sparse=_sparse_format(estimator),
    )
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


def check_distributions(estimator: BaseEstimator, X: Any, D: Any) -> tuple[np.ndarray, np.ndarray]:
    """``fit``'s input checks for label distribution learners: finite X (n, d), D (n, c) non-negative.

    Runs scikit-learn's ``validate_data`` (which sets ``n_features_in_``). A row of D that does
    not sum to 1 (rounding in a data file) is renormalised; a row summing to 0 has no
    distribution and is an error.
    """
    X, D = validate_data(
        estimator, X, D, multi_output=True, dtype=np.float64, order="C", y_numeric=True, ensure_min_samples=2
    )
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[1] < 1:
        raise ValueError(f"D must be a 2-D (n, c) matrix of label distributions, got shape {D.shape}")
    if (D < 0).any():
        raise ValueError("every row of D must be a distribution: D has negative entries")
    sums = D.sum(axis=1, keepdims=True)
    if (sums <= 0).any():
        raise ValueError("every row of D must be a distribution: some rows sum to 0")
    return X, D / sums


def constant_labels(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(varying, value)``: which label columns take both values in ``Y``, and the 0/1 value of the others."""
    frac = Y.mean(axis=0)
    varying = (frac > 0) & (frac < 1)
    return varying, (frac >= 1).astype(np.float64)


def check_features(estimator: BaseEstimator, X: Any) -> np.ndarray:
    """The public predict paths' checks: fitted, and ``X`` finite float64 of the training width.

    Zero rows are allowed (the answer is then empty), as on the service's fast path.
    """
    check_is_fitted(estimator)
    return validate_data(
        estimator,
        X,
        dtype=np.float64,
        order="C",
        reset=False,
        ensure_min_samples=0,
        accept_sparse=_sparse_format(estimator),
    )


def _sparse_format(estimator: object) -> str | bool:
    """What ``validate_data`` takes for ``estimator``: CSR for a method that ``accepts_sparse``
    (other sparse formats converted to it), nothing sparse for the others."""
    return "csr" if getattr(estimator, "accepts_sparse", False) else False


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
    constant_: np.ndarray
    constant_value_: np.ndarray
    #: a label never (always) present in the training data is predicted with the constant 0 (1):
    #: the template records ``constant_`` (q,) bool and ``constant_value_`` (q,) before ``_fit``
    predicts_constant_labels: ClassVar[bool] = False

    def _check_fit_data(self, X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
        X, Y = check_multilabel(self, X, Y)
        self._set_classes(Y.shape[1])
        if self.predicts_constant_labels:
            varying, self.constant_value_ = constant_labels(Y)
            self.constant_ = ~varying
        return X, Y

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

    def _check_fit_data(self, X: Any, D: Any) -> tuple[np.ndarray, np.ndarray]:
        return check_distributions(self, X, D)

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

    def _check_fit_data(self, X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
        return check_multilabel(self, X, Y, class_vector=True)

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
