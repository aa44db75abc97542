"""The parameter contract of every method: one declaration, the same verdict for library and API users."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from pydantic import ValidationError
from pydantic_core import PydanticUndefined

from app.methods.aa_knn import AAKNN
from app.methods.base import InvalidParameterError, MethodEstimator, MethodParams
from app.methods.blend import Blend
from app.methods.br import BinaryRelevance
from app.methods.catalog import catalog, method_module_names
from app.methods.dmknn import DMKNN
from app.methods.ecc import EnsembleClassifierChains
from app.methods.elcfs import ELCFS
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
        spec.params.model_validate(params)
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
