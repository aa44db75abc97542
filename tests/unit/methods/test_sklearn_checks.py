"""scikit-learn's estimator checks over every method of the catalog.

Each estimator runs with small settings (the checks fit dozens of times on tiny data), the paper
methods and the baselines alike. The deliberate divergences are listed below with their reasons;
every other check must pass. They all come from one decision: a multi-label classifier learns
from, and predicts, a 0/1 (or -1/+1) label indicator matrix, never a 1-D vector of classes
(docs/methods/README.md), and its scores are one (n, q) array.
"""

from __future__ import annotations

import unittest
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from app.methods.catalog import catalog

#: Every method of the catalog: the paper methods and the baselines.
CONTRACT = catalog()

#: Settings that keep each check fast; the defaults are exercised by the method tests.
SMALL: dict[str, dict] = {
    "aa-knn": {"k": 3},
    "blend": {"members": [{"method": "br"}, {"method": "rf", "params": {"n_estimators": 5}, "weight": 2}]},
    "blend-ldl": {
        "members": [{"method": "aa-knn", "params": {"k": 3}}, {"method": "sa-maxent", "params": {"max_iter": 50}}]
    },
    "br": {},
    "dmknn": {"k": 3},
    "ecc": {"n_chains": 2},
    "elcfs": {"max_iter": 20, "kmeans_n_init": 1},
    "gbm": {"n_estimators": 10},
    "ghc-dr": {"nonconvex": "ignore"},
    "ldlkm": {"k": 2, "random_state": 0},
    "mi-filter": {},
    "mlknn": {"k": 3},
    "rf": {"n_estimators": 10},
    "sa-maxent": {"max_iter": 100},
    "trans-ovk": {"qp_max_iter": 50},
}

_NOT_INDICATOR = (
    "the check's binary targets are coded {1, 2}; Y must be a 0/1 (or -1/+1) label indicator matrix, "
    "since which of two arbitrary values means 'label present' is not defined"
)
_CLASS_VECTOR = (
    "the check fits a 1-D class vector and expects 1-D predictions; a multi-label classifier takes and "
    "returns an (n, q) label matrix"
)
CLASSIFIER_DIVERGENCES = {
    "check_estimators_dtypes": _NOT_INDICATOR,
    "check_classifier_data_not_an_array": _NOT_INDICATOR,
    "check_fit2d_1feature": _NOT_INDICATOR,
    "check_classifiers_one_label": _CLASS_VECTOR,
    "check_classifiers_classes": _CLASS_VECTOR,
    "check_classifiers_train": _CLASS_VECTOR,
    "check_decision_proba_consistency": _CLASS_VECTOR,
    "check_classifier_multioutput": "classes_ is one array([0, 1]) per label (the multi-output convention of "
    "MultiOutputClassifier and KNeighborsClassifier) and the check indexes it as a single array",
}


#: divergences of single baselines, on top of the classifier divergences above
BASELINE_DIVERGENCES = {
    # br's class_weight is declared as 'balanced' or None (the API's parameter schema); the
    # check sets a {class: weight} dict and fits it on a 1-D class vector
    "br": {"check_class_weight_classifiers": _CLASS_VECTOR},
    # a forest's probability is a vote fraction, exactly 0 or 1 where every tree agrees;
    # scikit-learn's own forest returns a list of (n, 2) arrays for multi-output targets, which
    # the check does not bound strictly, while a multi-label scorer here returns one (n, q) array
    "rf": {
        "check_classifiers_multilabel_output_format_predict_proba": "vote fractions of 0 and 1 in the (n, q) "
        "probability array; the check wants every value strictly inside (0, 1)"
    },
}


_SPARSE_PROBA = (
    "the check fits one label column on sparse X and wants predict_proba of shape (n, 2); a multi-label "
    "scorer returns one probability per label, (n, 1) (fitting and predicting on sparse X themselves pass: "
    "tests/unit/methods/test_sparse_and_memory.py)"
)
SPARSE_DIVERGENCES = {
    "check_estimator_sparse_array": _SPARSE_PROBA,
    "check_estimator_sparse_matrix": _SPARSE_PROBA,
}


def expected_failures(estimator) -> dict[str, str]:
    """The divergences that apply to ``estimator`` (classifiers only; the others pass every check)."""
    if get_tags(estimator).estimator_type != "classifier":
        return {}
    failures = dict(CLASSIFIER_DIVERGENCES)
    if not hasattr(estimator, "predict_proba"):
        failures.pop("check_decision_proba_consistency")  # only run for estimators with predict_proba
    spec = next(s for s in CONTRACT.values() if isinstance(estimator, s.estimator))
    if spec.estimator.accepts_sparse and hasattr(estimator, "predict_proba"):
        failures |= SPARSE_DIVERGENCES  # without predict_proba (dmknn) the sparse checks pass
    return failures | BASELINE_DIVERGENCES.get(spec.id, {})


#: The methods whose checks cost the most CPU time (mi-filter's k-NN mutual information, trans-ovk's
#: QP solver: 2 of the 14 methods, a third of the checks' time): their checks are ``slow``, run by
#: the full suite only. Every other method's checks stay in the quick subset, which so keeps a classifier
#: of each family (paper methods, baselines, blends), the distribution learners and a selector
#: (elcfs) under every check.
SLOW_CHECKS = ("mi-filter", "trans-ovk")

ESTIMATORS = {spec.id: spec.build(SMALL[spec.id]) for spec in CONTRACT.values()}


def test_every_method_has_small_settings():
    assert set(SMALL) == set(CONTRACT)
    assert set(SLOW_CHECKS) <= set(CONTRACT)


def _check(estimator, check) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence / non-convexity warnings on the checks' random data
        try:
            check(estimator)
        except unittest.SkipTest as skip:  # a check that does not apply (no predict_proba): a skip on every pytest
            pytest.skip(str(skip))


@parametrize_with_checks(
    [est for name, est in ESTIMATORS.items() if name not in SLOW_CHECKS], expected_failed_checks=expected_failures
)
def test_sklearn_compatible(estimator, check):
    _check(estimator, check)


@pytest.mark.slow
@parametrize_with_checks([ESTIMATORS[name] for name in SLOW_CHECKS], expected_failed_checks=expected_failures)
def test_sklearn_compatible_costly(estimator, check):
    _check(estimator, check)


def _data(spec, n=24, d=4, q=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    if spec.dataset_kind == "distribution":
        D = rng.random((n, q))
        return X, D / D.sum(axis=1, keepdims=True)
    return X, (rng.random((n, q)) > 0.5).astype(int)


PUBLIC = ("predict", "decision_function", "predict_proba", "predict_details", "transform", "scores")


@pytest.mark.parametrize("spec", list(CONTRACT.values()), ids=lambda s: s.id)
def test_unfitted_estimators_raise_not_fitted(spec):
    X, _ = _data(spec)
    est = spec.build(SMALL[spec.id])
    methods = [m for m in PUBLIC if hasattr(est, m)]
    assert methods
    for name in methods:
        with pytest.raises(NotFittedError):
            getattr(est, name)(X)


@pytest.mark.parametrize("spec", [s for s in CONTRACT.values() if s.task != "selection"], ids=lambda s: s.id)
def test_public_and_fast_paths_agree_and_public_validates(spec):
    X, Y = _data(spec)
    est = spec.build(SMALL[spec.id]).fit(X, Y)
    Xq = np.ascontiguousarray(X[:5])
    np.testing.assert_array_equal(est.predict(Xq.tolist()), est._predict(Xq))
    if spec.task == "multilabel":
        np.testing.assert_array_equal(est.decision_function(Xq), est._decision_function(Xq))
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:5, :-1])
    bad = Xq.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.predict(bad)


@pytest.mark.parametrize("spec", [s for s in CONTRACT.values() if s.task == "selection"], ids=lambda s: s.id)
def test_selectors_work_in_a_pipeline_and_accept_a_class_vector(spec):
    X, Y = _data(spec, n=40, d=6)
    selector = spec.build(SMALL[spec.id])
    out = make_pipeline(selector).fit(X, Y).transform(X)
    assert out.shape == (40, selector.get_support().sum())
    classes = np.argmax(Y, axis=1)
    onehot = np.eye(Y.shape[1])[classes]
    one = spec.build(SMALL[spec.id]).fit(X, classes)
    two = spec.build(SMALL[spec.id]).fit(X, onehot)
    np.testing.assert_array_equal(one.ranking_, two.ranking_)
