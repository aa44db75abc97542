"""Blend: a weighted mean of other methods' predictions (ensemble selection).

What ``"method": "auto"`` registers when a mix of its candidates beats every single one in the
inner cross-validation (Caruana et al., ICML 2004, as auto-sklearn's ensemble builder does it).
``app.evaluation.blending`` chooses the members and weights from the candidates' out-of-fold
predictions; this module is the fitted model: every member fitted on all the data, and
predictions that average theirs.

``blend`` (classifiers) averages the members' label scores, so only members whose scores are
probabilities on one [0, 1] scale may be mixed (``PROBABILITY_SCORES``); its label set is every
label above ``threshold``, with ``fill_empty`` for a row left empty (both chosen by ``auto`` on the
out-of-fold scores, the rule of ``app.methods.thresholds``). ``blend-ldl`` averages distributions.
Both are trainable by name; their default members exist only so that the estimators are
constructible without arguments, as scikit-learn requires. A blend is never a default candidate
of ``auto`` or ``/compare``, nor a member of a blend.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.methods.base import MethodEstimator, MethodParams, MethodSpec, ProgressFn, Task, checked_params
from app.methods.baseline_support import DistributionPredictorMixin, ProbabilityClassifierMixin
from app.methods.thresholds import label_sets

#: classifiers whose ``decision_function`` is a probability per label in [0, 1]
PROBABILITY_SCORES = frozenset({"br", "ecc", "rf", "gbm", "mlknn", "dmknn"})
#: the blends' own method ids (never members, never default candidates)
BLENDS = frozenset({"blend", "blend-ldl"})


def blendable(method: str, params: dict[str, Any], task: Task) -> bool:
    """Whether (method, params) may be a member of a blend of ``task``."""
    from app.methods.catalog import get_method  # the catalog imports this module

    spec = get_method(method)
    if spec is None or method in BLENDS or spec.task != task:
        return False
    if task == "multilabel":
        return method in PROBABILITY_SCORES and params.get("ranking", "posterior") == "posterior"
    return task == "distribution"


class BlendMember(BaseModel):
    """One member of a blend: a method of the catalog, its parameters and its weight."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="Method id of the member.")
    params: dict[str, Any] = Field(default_factory=dict, description="The member's parameters (its defaults if empty).")
    weight: float = Field(1.0, gt=0, description="Weight of the member; the weights are normalised to sum to 1.")


def _check_members(members: tuple[BlendMember, ...], task: Task) -> tuple[BlendMember, ...]:
    from app.methods.catalog import get_method  # the catalog imports this module

    for member in members:
        if not blendable(member.method, member.params, task):
            allowed = "a classifier with probability scores (br, ecc, rf, gbm, mlknn, dmknn)"
            what = allowed if task == "multilabel" else "a label distribution learner (not a blend)"
            raise ValueError(f"member '{member.method}' is not {what}")
        spec = get_method(member.method)
        assert spec is not None
        try:
            checked_params(spec.params, member.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"member '{member.method}' parameter {where}: {first['msg']}") from None
    return members


_DEFAULT_CLASSIFIERS: tuple[dict[str, Any], ...] = (
    {"method": "br", "params": {}, "weight": 1.0},
    {"method": "rf", "params": {}, "weight": 1.0},
)
_DEFAULT_LEARNERS: tuple[dict[str, Any], ...] = (
    {"method": "aa-knn", "params": {}, "weight": 1.0},
    {"method": "sa-maxent", "params": {}, "weight": 1.0},
)

_MEMBERS_DOC = "Members as {method, params, weight}; auto sets them by ensemble selection on out-of-fold predictions."
#: each member costs a fit and a prediction; auto's blends keep members of at least 5% of the weight (at most 20)
MAX_MEMBERS = 20


class BlendParams(MethodParams):
    members: tuple[BlendMember, ...] = Field(
        _DEFAULT_CLASSIFIERS,  # validated into BlendMember (validate_default)
        min_length=1,
        max_length=MAX_MEMBERS,
        validate_default=True,
        description=_MEMBERS_DOC + " Classifiers with probability scores: br, ecc, rf, gbm, mlknn, dmknn.",
    )
    threshold: float = Field(0.5, gt=0, lt=1, description="A label is in the set when its blended score is above this.")
    fill_empty: bool = Field(
        False,
        description="Give a row whose set would be empty its top-scored label (auto turns it on where that raised "
        "micro-F1 on the out-of-fold blended scores).",
    )

    @field_validator("members")
    @classmethod
    def _members_fit(cls, members: tuple[BlendMember, ...]) -> tuple[BlendMember, ...]:
        return _check_members(members, "multilabel")


class BlendLDLParams(MethodParams):
    members: tuple[BlendMember, ...] = Field(
        _DEFAULT_LEARNERS,
        min_length=1,
        max_length=MAX_MEMBERS,
        validate_default=True,
        description=_MEMBERS_DOC + " Label distribution learners.",
    )

    @field_validator("members")
    @classmethod
    def _members_fit(cls, members: tuple[BlendMember, ...]) -> tuple[BlendMember, ...]:
        return _check_members(members, "distribution")


class _Members:
    """Fitting the members: the ``_fit`` of both blends."""

    members: Any
    _task: ClassVar[Task]

    def _fit(self, X: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        from app.methods.catalog import get_method

        declared = [BlendMember.model_validate(m) for m in self.members]
        fitted = []
        for i, member in enumerate(declared):
            spec = get_method(member.method)
            assert spec is not None  # checked by the parameter declaration

            def inner(stage: str, fraction: float, i: int = i, method: str = member.method) -> None:
                progress(
                    f"member {i + 1}/{len(declared)} {method}: {stage}",
                    (i + min(max(fraction, 0.0), 1.0)) / len(declared),
                )

            progress(f"member {i + 1}/{len(declared)} {member.method}", i / len(declared))
            fitted.append(spec.build(checked_params(spec.params, member.params)).fit(X, Y, progress=inner))
        progress("members", 1.0)
        weights = np.array([m.weight for m in declared], dtype=np.float64)
        self.members_ = fitted
        self.methods_ = [m.method for m in declared]
        self.weights_ = weights / weights.sum()

    def derived_nbytes(self) -> int:
        """What the members derive on load (a forest member's flat node arrays)."""
        return sum(member.derived_nbytes() for member in self.members_)


class Blend(_Members, ProbabilityClassifierMixin, MethodEstimator):
    """Weighted mean of the members' label probabilities; parameters as :class:`BlendParams`.

    Fitted attributes: ``n_features_in_``, ``members_`` (the fitted member estimators),
    ``methods_`` (their method ids), ``weights_`` (normalised weights, summing to 1).
    """

    _task: ClassVar[Task] = "multilabel"
    _params_model = BlendParams

    def __init__(
        self, members: Any = _DEFAULT_CLASSIFIERS, *, threshold: float = 0.5, fill_empty: bool = False
    ) -> None:
        self.members = members
        self.threshold = threshold
        self.fill_empty = fill_empty

    def _predict_scores(self, X: np.ndarray) -> np.ndarray:
        """Weighted mean of the members' scores (n, q) for a float64 (n, d) array already validated."""
        S = np.zeros((X.shape[0], len(self.classes_)))
        for weight, member in zip(self.weights_, self.members_):
            S += weight * member._decision_function(X)
        return S

    def _default_threshold(self) -> float:
        return float(self.threshold)

    def _predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        """Label sets: the blend's rule (``threshold``, ``fill_empty``), or every score above the
        caller's ``threshold`` (the plain rule, as for every probability classifier)."""
        if threshold is not None:
            return super()._predict(X, threshold)
        return label_sets(self._decision_function(X), float(self.threshold), bool(self.fill_empty))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """0.1.x artifacts predate ``fill_empty``: the plain threshold rule."""
        super().__setstate__({"fill_empty": False, **state})


class BlendLDL(_Members, DistributionPredictorMixin, MethodEstimator):
    """Weighted mean of the members' label distributions; parameters as :class:`BlendLDLParams`.

    Fitted attributes: ``n_features_in_``, ``members_``, ``methods_``, ``weights_`` (as :class:`Blend`).
    """

    _task: ClassVar[Task] = "distribution"
    _params_model = BlendLDLParams

    def __init__(self, members: Any = _DEFAULT_LEARNERS) -> None:
        self.members = members

    def _predict(self, X: np.ndarray) -> np.ndarray:
        """Weighted mean of the members' distributions (n, c) for a float64 (n, d) array already validated."""
        P = sum(weight * member._predict(X) for weight, member in zip(self.weights_, self.members_))
        return np.asarray(P, dtype=np.float64)


SPEC = MethodSpec(
    id="blend",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=BlendParams,
    estimator=Blend,
    summary="Blend (what auto registers when a mix beats every single candidate): the weighted mean of its "
    "members' label probabilities; labels with blended score > threshold (with fill_empty, an empty set gets its "
    "top label).",
    paper="Ensemble selection. Caruana R., Niculescu-Mizil A., Crew G., Ksikes A. Ensemble selection from "
    "libraries of models. ICML 2004. doi:10.1145/1015330.1015432",
    stages=("members",),
)
