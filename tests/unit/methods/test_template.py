"""The template ``fit`` of ``MethodEstimator``: the order of its steps, the sparse declaration, and
artifacts pickled before it (their fitted attributes had other shapes) still predicting."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.utils import get_tags

from app.methods.base import InvalidParameterError, MethodEstimator, fit_input
from app.methods.baseline_support import Scaling
from app.methods.catalog import catalog
from app.methods.ecc import EnsembleClassifierChains
from app.methods.mlknn import MLkNN
from tests.helpers import make_distribution, make_multilabel


def _data(spec):  # type: ignore[no-untyped-def]
    if spec.dataset_kind == "distribution":
        return make_distribution(n=40)
    X, Y = make_multilabel(n=40, d=5, q=3, seed=3)
    return X * np.arange(1, 6), Y


def test_parameters_are_checked_before_the_data():
    """A bad parameter is named even when the data is bad too (the parameter check comes first)."""
    with pytest.raises(InvalidParameterError, match="k"):
        MLkNN(k=0).fit(np.zeros((3, 2, 2)), np.zeros(3))


def test_data_dependent_bounds_come_after_the_data_checks():
    X, Y = make_multilabel(n=6, d=3, q=2, seed=0)
    with pytest.raises(ValueError, match=r"\[1, 5\]"):
        MLkNN(k=6).fit(X, Y)


@pytest.mark.parametrize("spec", [s for s in catalog().values() if not s.estimator.accepts_sparse], ids=lambda s: s.id)
def test_dense_methods_reject_sparse_and_fit_input_densifies(spec):
    """A method that does not declare CSR input is tagged dense, rejects sparse X as scikit-learn
    requires, and ``fit_input`` gives it the dense copy it fits on exactly as on the array."""
    assert issubclass(spec.estimator, MethodEstimator)
    est = spec.build({})
    assert get_tags(est).input_tags.sparse is False
    X, Y = _data(spec)
    Xcsr = sparse.csr_matrix(X)
    with pytest.raises(TypeError, match="[Ss]parse"):
        spec.build({}).fit(Xcsr, Y)
    dense = fit_input(est, Xcsr)
    assert isinstance(dense, np.ndarray)
    np.testing.assert_array_equal(dense, X)
    assert fit_input(est, X) is X


def test_the_methods_that_take_csr():
    """The sparse-capable methods (tests/unit/methods/test_sparse_and_memory.py checks them)."""
    assert {s.id for s in catalog().values() if s.estimator.accepts_sparse} == {
        "br",
        "ecc",
        "rf",
        "gbm",
        "mi-filter",
        "mlknn",
        "dmknn",
    }


def test_fit_input_keeps_csr_for_a_method_that_declares_it():
    class Sparse(MethodEstimator):
        accepts_sparse = True

    X = sparse.random(5, 4, density=0.5, format="csc", random_state=0)
    kept = fit_input(Sparse, X)
    assert sparse.issparse(kept) and kept.format == "csr"


def _legacy(model: object) -> object:
    """The artifact as baselines pickled it before the template: ``scaling_`` wrapped in
    ``Scaling`` (called, not ``transform``-ed) and, for ECC, ``varying_`` instead of ``constant_``."""
    old = pickle.loads(pickle.dumps(model))
    wrapper = Scaling.__new__(Scaling)
    wrapper.scaling = old.scaling_
    old.scaling_ = wrapper
    if isinstance(old, EnsembleClassifierChains):
        old.varying_ = ~old.__dict__.pop("constant_")
    return old


@pytest.mark.parametrize("method", ["br", "ecc", "aa-knn", "sa-maxent"])
def test_artifacts_of_the_earlier_baselines_still_predict(method):
    spec = catalog()[method]
    X, Y = _data(spec)
    if spec.dataset_kind == "multilabel":
        Y = np.column_stack([Y, np.zeros(len(Y)), np.ones(len(Y))])  # constant labels too
    params = {"n_chains": 2} if method == "ecc" else {}
    model = spec.build(params).fit(X, Y)
    loaded = pickle.loads(pickle.dumps(_legacy(model)))
    if spec.dataset_kind == "distribution":
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    else:
        np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_build_does_not_validate_and_takes_the_validated_declaration():
    spec = catalog()["rf"]
    unchecked = spec.build({"n_estimators": 0})  # refused by fit, not by build
    with pytest.raises(InvalidParameterError, match="n_estimators"):
        unchecked.fit(*make_multilabel(n=20, d=3, q=2, seed=0))
    built = spec.build(spec.params.model_validate({"max_features": 1}))
    assert built.max_features == 1.0 and isinstance(built.max_features, float)  # the fraction, not one feature
    assert built.get_params() == spec.build(spec.params()).get_params() | {"max_features": 1.0}


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("mlknn", {"k": 40}, "k"),
        ("dmknn", {"k": 40}, "k"),
        ("aa-knn", {"k": 41}, "k"),
        ("elcfs", {"n_clusters": 41}, "n_clusters"),
    ],
)
def test_bounds_set_by_the_data_raise_the_parameter_error_too(method, params, name):
    spec = catalog()[method]
    with pytest.raises(InvalidParameterError) as raised:
        spec.build(params).fit(*_data(spec))
    assert raised.value.param == name and str(params[name]) in str(raised.value)
