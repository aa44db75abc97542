"""The parameter contract of every method: one declaration, the same verdict for library and API users."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from pydantic import ValidationError
from pydantic_core import PydanticUndefined

from app.methods.aa_knn import AAKNN
from app.methods.base import InvalidParameterError, MethodEstimator, MethodParams, checked_params
from app.methods.blend import Blend, BlendMember
from app.methods.br import BinaryRelevance
from app.methods.catalog import catalog, method_module_names
from app.methods.dmknn import DMKNN
from app.methods.ecc import EnsembleClassifierChains
from app.methods.elcfs import ELCFS
from app.methods.gbm import GradientBoosting
from app.methods.ghc_dr import GHCDR
from app.methods.ldlkm import LDLKM
from app.methods.mi_filter import MIFilter
from app.methods.mlknn import MLkNN
from app.methods.rf import RandomForest
from app.methods.sa_maxent import SAMaxEnt
from app.methods.trans_ovk import TransOVK

#: Every method of the catalog keeps the contract (the template fit of MethodEstimator).
ALL = list(catalog().values())
#: The six paper methods, whose first parameter is also positional.
SPECS = [s for s in ALL if s.id in {"dmknn", "elcfs", "ghc-dr", "ldlkm", "mlknn", "trans-ovk"}]


def test_catalog_holds_the_six_methods_and_walks_every_module():
    assert [s.id for s in SPECS] == ["dmknn", "elcfs", "ghc-dr", "ldlkm", "mlknn", "trans-ovk"]
    assert len(ALL) == 15 and all(issubclass(s.estimator, MethodEstimator) for s in ALL)
    names = method_module_names()
    assert "app.methods.base" in names and "app.methods.ghc_dr" in names
    assert {s.estimator.__module__ for s in SPECS} <= set(names)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_declaration_signature_and_defaults_agree(spec):
    assert spec.estimator._params_model is spec.params
    assert issubclass(spec.params, MethodParams)
    declared = {name: field.default for name, field in spec.params.model_fields.items()}
    assert PydanticUndefined not in declared.values(), "every hyperparameter needs a default"
    signature = inspect.signature(spec.estimator.__init__)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    assert {p.name: p.default for p in params} == declared
    kinds = [p.kind for p in params]
    assert kinds[0] is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(kind is inspect.Parameter.KEYWORD_ONLY for kind in kinds[1:])
    # the constructor stores every parameter unchanged, and building through the spec gives the defaults
    assert spec.build({}).get_params() == declared
    assert spec.estimator().get_params() == declared


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.id)
def test_every_method_declares_its_parameters_once(spec):
    """The estimator's class names the module's Params, whose fields and defaults are the constructor's."""
    assert spec.estimator._params_model is spec.params
    declared = {name: field.default for name, field in spec.params.model_fields.items()}
    signature = inspect.signature(spec.estimator.__init__)
    assert {p.name: p.default for p in signature.parameters.values() if p.name != "self"} == declared
    assert spec.build({}).get_params() == spec.estimator().get_params()


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.id)
def test_every_field_is_described(spec):
    schema = spec.params.model_json_schema()
    assert all(prop.get("description") for prop in schema["properties"].values())


def _fit_data(spec):
    rng = np.random.default_rng(0)
    X = rng.random((12, 3))
    if spec.dataset_kind == "distribution":
        D = rng.random((12, 2))
        return X, D / D.sum(axis=1, keepdims=True)
    return X, (rng.random((12, 2)) > 0.5).astype(int)


INVALID = [
    (TransOVK, {"lambda_k": 0}, "lambda_k"),
    (TransOVK, {"pca_centering": "diagonal"}, "pca_centering"),
    (GHCDR, {"omega": 5.0}, "omega"),
    (GHCDR, {"lam": 0}, "lam"),
    (GHCDR, {"n_bins": 1}, "n_bins"),
    (ELCFS, {"ratio": 7.0}, "ratio"),
    (ELCFS, {"lambda3": -1.0}, "lambda3"),
    (MLkNN, {"s": 0.0}, "s"),
    (MLkNN, {"k": 2.5}, "k"),
    (DMKNN, {"min_support": 1.5}, "min_support"),
    (DMKNN, {"beta_prior": (0.0, 1.0)}, "beta_prior"),
    (LDLKM, {"temperature": 0.0}, "temperature"),
    (LDLKM, {"p": 0.5}, "p"),
    (BinaryRelevance, {"C": 0.0}, "C"),
    (EnsembleClassifierChains, {"n_chains": 0}, "n_chains"),
    (RandomForest, {"max_features": 1.5}, "max_features"),
    (MIFilter, {"ratio": 0.0}, "ratio"),
    (AAKNN, {"k": 0}, "k"),
    (SAMaxEnt, {"tol": 0.0}, "tol"),
    (Blend, {"threshold": 1.0}, "threshold"),
]


@pytest.mark.parametrize(("cls", "params", "name"), INVALID, ids=lambda v: getattr(v, "__name__", str(v)))
def test_fit_rejects_what_the_api_rejects_with_the_same_errors(cls, params, name):
    spec = next(s for s in ALL if s.estimator is cls)
    with pytest.raises(ValidationError) as api:
        checked_params(spec.params, params)  # the check of POST /train
    with pytest.raises(InvalidParameterError) as lib:
        cls(**params).fit(*_fit_data(spec))
    assert lib.value.param.split(".")[0] == name
    assert name in str(lib.value)
    expected = [{"loc": e["loc"], "msg": e["msg"], "type": e["type"]} for e in api.value.errors()]
    assert lib.value.errors == expected
    assert isinstance(lib.value, ValueError)


def test_set_params_is_checked_at_the_next_fit():
    X, Y = _fit_data(catalog()["mlknn"])
    model = MLkNN(3).fit(X, Y)
    model.set_params(scale="log")
    with pytest.raises(InvalidParameterError, match="scale"):
        model.fit(X, Y)


#: Strict mode, the API's: a boolean or a numeric string is no number, for every method.
STRICT = [
    (MLkNN, {"k": "5"}, "k"),
    (MLkNN, {"k": True}, "k"),
    (MLkNN, {"s": "1.0"}, "s"),
    (DMKNN, {"k": False}, "k"),
    (DMKNN, {"beta_prior": (True, 1.0)}, "beta_prior"),
    (AAKNN, {"k": "5"}, "k"),
    (AAKNN, {"shrinkage": "0.5"}, "shrinkage"),
    (LDLKM, {"k": True}, "k"),
    (ELCFS, {"n_clusters": "3"}, "n_clusters"),
    (BinaryRelevance, {"C": "1"}, "C"),
    (EnsembleClassifierChains, {"random_state": True}, "random_state"),
    (RandomForest, {"max_features": "0.5"}, "max_features"),
    (SAMaxEnt, {"tol": True}, "tol"),
    (Blend, {"members": [{"method": "br", "params": {"C": "1"}}]}, "members"),
]


@pytest.mark.parametrize(("cls", "params", "name"), STRICT, ids=lambda v: getattr(v, "__name__", str(v)))
def test_fit_is_as_strict_as_the_api(cls, params, name):
    spec = next(s for s in ALL if s.estimator is cls)
    with pytest.raises(ValidationError) as api:
        checked_params(spec.params, params)
    with pytest.raises(InvalidParameterError) as lib:
        cls(**params).fit(*_fit_data(spec))
    assert lib.value.param.split(".")[0] == name
    assert lib.value.errors == [{"loc": e["loc"], "msg": e["msg"], "type": e["type"]} for e in api.value.errors()]
    assert isinstance(lib.value, ValueError) and isinstance(lib.value, TypeError)  # as scikit-learn's


def _numeric_fields(spec):
    for name, prop in spec.params.model_json_schema()["properties"].items():
        types = {prop.get("type")} | {branch.get("type") for branch in prop.get("anyOf", [])}
        if types & {"integer", "number"}:
            yield name


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.id)
def test_no_numeric_parameter_takes_a_boolean_or_a_string(spec):
    """Every integer and float parameter of every method, checked before the data (junk here)."""
    for name in _numeric_fields(spec):
        for value in (True, "5"):
            with pytest.raises(InvalidParameterError) as raised:
                spec.estimator(**{name: value}).fit(None, None)
            assert raised.value.param.split(".")[0] == name, (name, value)


def test_what_strict_mode_still_takes():
    """As the API: an integer for a float, a list for a tuple; and, from Python, NumPy scalars
    (a grid search's ``np.arange``) and a blend's members as ``BlendMember`` objects."""
    X, Y = _fit_data(catalog()["mlknn"])
    MLkNN(k=np.int64(3), s=1).fit(X, Y)
    MLkNN(k=3, s=np.float32(0.5)).fit(X, Y)
    DMKNN(k=3, beta_prior=[1, 2]).fit(X, Y)
    Blend(members=[BlendMember(method="br"), BlendMember(method="mlknn", params={"k": np.int64(3)})]).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="k: Input should be a JSON value, not object") as raised:
        MLkNN(k=object()).fit(X, Y)
    assert raised.value.param == "k"


@pytest.mark.parametrize(("shrinkage", "most"), [(0.2, 12), ("loo", 11)])
def test_aa_knn_takes_k_up_to_n_unless_its_shrinkage_leaves_a_row_out(shrinkage, most):
    """A query is no training row, so all n training rows may be its neighbours; the leave-one-out
    choice of the shrinkage predicts each training row from the others, at most n - 1."""
    X, D = _fit_data(catalog()["aa-knn"])
    assert AAKNN(k=most, shrinkage=shrinkage).fit(X, D).k_ == most
    with pytest.raises(InvalidParameterError, match=rf"\[1, {most}\]") as raised:
        AAKNN(k=most + 1, shrinkage=shrinkage).fit(X, D)
    assert raised.value.param == "k"


@pytest.mark.parametrize("cls", [RandomForest, GradientBoosting, EnsembleClassifierChains], ids=lambda c: c.__name__)
def test_an_unseeded_fit_draws_its_seed_where_the_service_does(cls, monkeypatch):
    """``draw_seed`` is the one place a seed is drawn: an unseeded fit is the fit with its seed."""
    drawn = []
    monkeypatch.setattr("app.methods.base.secrets.randbelow", lambda bound: drawn.append(bound) or 7)
    X, Y = _fit_data(catalog()["br"])
    small = {"n_chains": 2} if cls is EnsembleClassifierChains else {"n_estimators": 5}
    unseeded = cls(**small, random_state=None).fit(X, Y)
    assert drawn and set(drawn) == {2**31}  # (the inner folds of threshold="cv" draw too)
    np.testing.assert_array_equal(
        unseeded.decision_function(X), cls(**small, random_state=7).fit(X, Y).decision_function(X)
    )


#: integer parameters with no maximum, and why: a seed is no count, ``n_jobs`` is clamped to the
#: machine's CPUs by the job, and a larger minimum makes a fit cheaper, never dearer
UNBOUNDED_INTS = {"random_state", "n_jobs", "min_samples_leaf", "min_child_samples", "min_itemset_size"}


def _integer_bounds(annotation: object, metadata: list) -> list[list]:
    """The metadata of each ``int`` member of a (possibly annotated, optional or union) annotation."""
    import typing

    if annotation is int:
        return [metadata]
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found = [m for x in extra for m in getattr(x, "metadata", [x])]
        return _integer_bounds(inner, metadata + found)
    return [b for member in typing.get_args(annotation) for b in _integer_bounds(member, metadata)]


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.id)
def test_every_count_parameter_has_a_maximum(spec):
    """A job's cost is bounded by default: ``ecc`` with ``n_chains: 100000`` had been accepted."""
    import annotated_types

    for name, field in spec.params.model_fields.items():
        if name in UNBOUNDED_INTS:
            continue
        for bounds in _integer_bounds(field.annotation, list(field.metadata)):
            assert any(isinstance(b, annotated_types.Le | annotated_types.Lt) for b in bounds), (spec.id, name)


@pytest.mark.parametrize(
    ("method", "params", "maximum"),
    [
        ("ecc", {"n_chains": 100_000}, 100),
        ("rf", {"n_estimators": 100_000}, 10_000),
        ("mlknn", {"k": 5_000}, 1_000),
        ("br", {"max_iter": 10**6}, 10_000),
        ("elcfs", {"max_iter": 10**7}, 1_000_000),
        ("blend", {"members": [{"method": "br"}] * 21}, 20),
    ],
)
def test_an_absurd_count_is_refused_naming_the_maximum(method, params, maximum):
    with pytest.raises(ValidationError) as info:
        catalog()[method].params.model_validate(params)
    assert f"less than or equal to {maximum}" in str(info.value) or f"at most {maximum}" in str(info.value), info.value
