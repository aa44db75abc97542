"""The baseline methods (br, ecc, rf, gbm, mi-filter, aa-knn, sa-maxent) on generated data: agreement
with the scikit-learn / SciPy computation they wrap, constant labels, progress, cancellation."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.optimize import check_grad
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_selection import mutual_info_classif
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.multioutput import ClassifierChain
from sklearn.neighbors import KNeighborsRegressor, NearestNeighbors
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from app.methods.aa_knn import AAKNN
from app.methods.base import JobCancelled
from app.methods.br import BinaryRelevance
from app.methods.catalog import get_method
from app.methods.ecc import EnsembleClassifierChains
from app.methods.gbm import GradientBoosting
from app.methods.mi_filter import MIFilter
from app.methods.rf import RandomForest
from app.methods.sa_maxent import SAMaxEnt, objective
from benchmarks.baselines import mi_scores
from tests.helpers import make_distribution, make_multilabel

CLASSIFIERS = ["br", "ecc", "rf", "gbm"]
DISTRIBUTION = ["aa-knn", "sa-maxent"]


def _data(n: int = 120, d: int = 8, q: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, Y = make_multilabel(n=n + 40, d=d, q=q, seed=seed)
    X = X * np.arange(1, d + 1)  # features on different scales, so the scaling matters
    return X[:n], Y[:n], X[n:]


def _scaled(Xtr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scaler = MinMaxScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte)


# ------------------------------------------------------------------ agreement with what they wrap
def test_br_is_one_vs_rest_logistic_regression() -> None:
    X, Y, Xte = _data()
    ours = BinaryRelevance(C=0.5, threshold=0.5).fit(X, Y)
    Xs, Xtes = _scaled(X, Xte)
    ref = OneVsRestClassifier(LogisticRegression(C=0.5, max_iter=1000)).fit(Xs, Y)
    np.testing.assert_allclose(ours.decision_function(Xte), ref.predict_proba(Xtes), atol=1e-10)
    np.testing.assert_array_equal(ours.predict(Xte), ref.predict(Xtes))


def test_ecc_replays_scikit_learn_chains() -> None:
    X, Y, Xte = _data(q=5)
    ours = EnsembleClassifierChains(n_chains=3, random_state=7).fit(X, Y)
    Xs, Xtes = _scaled(X, Xte)
    chains = [
        ClassifierChain(LogisticRegression(max_iter=1000), order="random", random_state=7 + i).fit(Xs, Y)
        for i in range(3)
    ]
    expected = np.mean([c.predict_proba(Xtes) for c in chains], axis=0)
    np.testing.assert_allclose(ours.decision_function(Xte), expected, atol=1e-10)


def test_rf_batches_grow_the_trees_of_one_fit() -> None:
    X, Y, Xte = _data()
    ours = RandomForest(n_estimators=60, random_state=3).fit(X, Y)  # three warm-start batches
    ref = RandomForestClassifier(n_estimators=60, random_state=3).fit(X, Y)
    expected = np.stack([p[:, 1] for p in ref.predict_proba(Xte)], axis=1)
    np.testing.assert_allclose(ours.decision_function(Xte), expected, atol=1e-12)


def test_rf_flat_walk_of_a_few_rows_gives_predict_proba() -> None:
    X, Y, Xte = _data(n=300, d=6)
    Xte = np.vstack([Xte, np.random.default_rng(5).random((20, 6)) * 10])  # 60 rows: both paths
    ours = RandomForest(n_estimators=30, random_state=1).fit(X, Y)
    ref = RandomForestClassifier(n_estimators=30, random_state=1).fit(X, Y)
    expected = np.stack([p[:, 1] for p in ref.predict_proba(Xte)], axis=1)
    few = np.vstack([ours._predict_scores(Xte[i : i + 1]) for i in range(Xte.shape[0])])  # flat walk
    np.testing.assert_allclose(few, expected, atol=1e-12)
    np.testing.assert_allclose(ours._predict_scores(Xte), expected, atol=1e-12)  # per-tree calls
    assert b"_flat" not in pickle.dumps(ours)  # derived from the trees, never stored
    reloaded = pickle.loads(pickle.dumps(ours))
    np.testing.assert_allclose(reloaded._predict_scores(Xte[:3]), expected[:3], atol=1e-12)


def test_gbm_is_one_vs_rest_lightgbm() -> None:
    """Each label's booster is the LGBMClassifier a user fits on that column (same arguments),
    though the features are binned once for every label."""
    import lightgbm

    X, Y, Xte = _data(n=200)
    ours = GradientBoosting(n_estimators=30, num_leaves=5, min_child_samples=4, random_state=4).fit(X, Y)
    same = {"n_estimators": 30, "learning_rate": 0.05, "num_leaves": 5, "min_child_samples": 4}
    for j in range(Y.shape[1]):
        ref = lightgbm.LGBMClassifier(**same, colsample_bytree=0.5, random_state=4, n_jobs=1, verbose=-1)
        ref.fit(X, Y[:, j])
        np.testing.assert_allclose(ours.decision_function(Xte)[:, j], ref.predict_proba(Xte)[:, 1], atol=1e-12)


@pytest.mark.parametrize("method", ["br", "ecc", "gbm"])
def test_per_label_fits_do_not_depend_on_threads_or_sparsity(method: str) -> None:
    X, Y, Xte = _data(n=200, d=30)
    sparse_X = X * (np.random.default_rng(2).random(X.shape) < 0.05)  # under SPARSE_DENSITY: CSR fits
    spec = get_method(method)
    assert spec is not None
    for data in (X, sparse_X):
        one = spec.build({"n_jobs": 1}).fit(data, Y).decision_function(Xte)
        two = spec.build({"n_jobs": 2}).fit(data, Y).decision_function(Xte)
        np.testing.assert_array_equal(one, two)
    if method == "gbm":
        return
    dense = LogisticRegression(max_iter=1000).fit(MinMaxScaler().fit_transform(sparse_X), Y[:, 0])
    br = BinaryRelevance(n_jobs=2).fit(sparse_X, Y)
    np.testing.assert_allclose(br.coef_[0], dense.coef_[0], atol=1e-6)  # the same L-BFGS model on CSR


@pytest.mark.parametrize("estimator", ["knn", "binned"])
def test_mi_filter_sums_label_mutual_information(estimator: str) -> None:
    X, Y, _ = _data(d=10)
    selector = MIFilter(estimator=estimator, random_state=1).fit(X, Y)
    if estimator == "knn":
        expected = sum(mutual_info_classif(X, Y[:, j].astype(int), random_state=1) for j in range(Y.shape[1]))
    else:
        expected = mi_scores(X, Y, n_bins=5)  # the benchmarks' independent implementation
    np.testing.assert_allclose(selector.feature_scores_, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(selector.ranking_, np.argsort(-expected, kind="stable"))
    assert selector.get_support().sum() == 2  # ratio 0.2 of 10
    assert selector.transform(X).shape == (X.shape[0], 2)


def test_aa_knn_is_the_mean_of_the_nearest_distributions() -> None:
    X, D = make_distribution(n=100, d=5, c=4)
    X = X * np.arange(1, 6)
    model = AAKNN(k=4, weights="uniform", scale="minmax", shrinkage=0.0).fit(X[:80], D[:80])  # the literal method
    Xs, Xtes = _scaled(X[:80], X[80:])
    idx = NearestNeighbors(n_neighbors=4).fit(Xs).kneighbors(Xtes, return_distance=False)
    np.testing.assert_allclose(model.predict(X[80:]), D[:80][idx].mean(axis=1), atol=1e-12)


def test_aa_knn_distance_weights_shrink_towards_the_mean() -> None:
    """Distance weights on standardised features are KNeighborsRegressor's; the shrinkage mixes
    in the training mean; "loo" picks (k, shrinkage) by leave-one-out Chebyshev on the training rows."""
    X, D = make_distribution(n=120, d=5, c=4)
    X = X * np.arange(1, 6)
    Xtr, Dtr, Xte = X[:90], D[:90], X[90:]
    scaler = StandardScaler().fit(Xtr)
    ref = KNeighborsRegressor(n_neighbors=7, weights="distance").fit(scaler.transform(Xtr), Dtr)
    plain = AAKNN(k=7, scale="zscore", shrinkage=0.0).fit(Xtr, Dtr)
    np.testing.assert_allclose(plain.predict(Xte), ref.predict(scaler.transform(Xte)), atol=1e-10)
    scaler = MinMaxScaler().fit(Xtr)  # the default scaling from here on
    plain = AAKNN(k=7, shrinkage=0.0).fit(Xtr, Dtr)
    shrunk = AAKNN(k=7, shrinkage=0.3).fit(Xtr, Dtr)
    np.testing.assert_allclose(shrunk.predict(Xte), 0.7 * plain.predict(Xte) + 0.3 * Dtr.mean(axis=0), atol=1e-12)
    chosen = AAKNN().fit(Xtr, Dtr)
    assert chosen.k_ in (3, 5, 10, 20) and 0.0 <= chosen.shrinkage_ <= 1.0

    def loo_cheb(k: int, lam: float) -> float:
        Xs = scaler.transform(Xtr)
        P = np.empty_like(Dtr)
        for i in range(len(Xtr)):
            rest = np.delete(np.arange(len(Xtr)), i)
            knn = KNeighborsRegressor(n_neighbors=k, weights="distance").fit(Xs[rest], Dtr[rest])
            P[i] = (1 - lam) * knn.predict(Xs[i : i + 1])[0] + lam * Dtr.mean(axis=0)
        return float(np.abs(P - Dtr).max(axis=1).mean())

    best = loo_cheb(chosen.k_, chosen.shrinkage_)
    assert best <= loo_cheb(5, 0.0) + 1e-12 and best <= loo_cheb(20, 1.0) + 1e-12  # <= kNN alone, <= the mean


def test_sa_maxent_gradient_matches_finite_differences() -> None:
    X, D = make_distribution(n=30, d=4, c=3, seed=2)
    theta = np.random.default_rng(0).standard_normal(4 * 3 + 3)
    err = check_grad(lambda t: objective(t, X, D, 0.1)[0], lambda t: objective(t, X, D, 0.1)[1], theta)
    assert err < 1e-6 * max(1.0, np.linalg.norm(objective(theta, X, D, 0.1)[1]))


def test_sa_maxent_is_weighted_multinomial_logistic_regression() -> None:
    """Soft-target maximum entropy = multinomial LR on every (sample, label) pair weighted by d_il;
    scikit-learn's C * sum(loss) + ||W||^2 / 2 is our objective with C = 1 / (n alpha)."""
    X, D = make_distribution(n=60, d=4, c=3, seed=1)
    alpha = 0.01
    model = SAMaxEnt(alpha=alpha, scale="none").fit(X, D)
    n, c = D.shape
    lr = LogisticRegression(C=1.0 / (n * alpha), tol=1e-12, max_iter=10_000)
    lr.fit(np.repeat(X, c, axis=0), np.tile(np.arange(c), n), sample_weight=D.ravel())
    np.testing.assert_allclose(model.predict(X), lr.predict_proba(X), atol=1e-5)
    assert model.converged_


# ------------------------------------------------------------------ contract shared by all six
@pytest.mark.parametrize("method", CLASSIFIERS)
def test_constant_labels_are_predicted_constant(method: str) -> None:
    X, Y, Xte = _data()
    Y = np.column_stack([Y, np.zeros(len(Y)), np.ones(len(Y))])
    model = get_method(method).build({}).fit(X, Y)
    S = model.decision_function(Xte)
    assert S.shape == (len(Xte), Y.shape[1])
    np.testing.assert_array_equal(S[:, -2], 0.0)
    np.testing.assert_array_equal(S[:, -1], 1.0)
    P = model.predict(Xte)
    assert set(np.unique(P)) <= {0, 1}
    np.testing.assert_array_equal(P[:, -2:], [[0, 1]] * len(Xte))


@pytest.mark.parametrize("method", CLASSIFIERS)
def test_classifier_only_constant_labels(method: str) -> None:
    X, _, Xte = _data()
    Y = np.column_stack([np.zeros(len(X)), np.ones(len(X))])
    model = get_method(method).build({}).fit(X, Y)
    np.testing.assert_array_equal(model.decision_function(Xte), [[0.0, 1.0]] * len(Xte))


def test_mi_filter_constant_label_scores_zero() -> None:
    X, Y, _ = _data()
    Y = np.column_stack([Y, np.ones(len(Y))])
    selector = MIFilter(estimator="binned").fit(X, Y)
    np.testing.assert_array_equal(selector.mutual_information_[:, -1], 0.0)


def _fit(method: str, progress=None):  # type: ignore[no-untyped-def]
    spec = get_method(method)
    if spec.dataset_kind == "distribution":
        X, T = make_distribution(n=60)
    else:
        X, T, _ = _data(n=60)
    params = {"estimator": "binned"} if method == "mi-filter" else {}
    return spec.build(params).fit(X, T, progress=progress), X


@pytest.mark.parametrize("method", CLASSIFIERS + DISTRIBUTION + ["mi-filter"])
def test_progress_is_reported_and_cancels(method: str) -> None:
    seen: list[tuple[str, float]] = []
    _fit(method, progress=lambda stage, fraction: seen.append((stage, fraction)))
    spec = get_method(method)
    assert seen and all(stage in spec.stages and 0.0 <= f <= 1.0 for stage, f in seen)
    assert seen[-1][1] == 1.0

    def cancel(stage: str, fraction: float) -> None:
        raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        _fit(method, progress=cancel)


@pytest.mark.parametrize("method", CLASSIFIERS + DISTRIBUTION)
def test_fast_path_matches_public_path_and_pickles(method: str) -> None:
    model, X = _fit(method)
    row = X[:1]
    if get_method(method).task == "multilabel":
        np.testing.assert_array_equal(model._decision_function(row), model.decision_function(row))
        np.testing.assert_array_equal(model._predict(row, 0.3), model.predict(row, threshold=0.3))
        out = model.decision_function(X)
    else:
        out = model.predict(X)
        np.testing.assert_allclose(out.sum(axis=1), 1.0)
        np.testing.assert_allclose(model._predict(row), out[:1], rtol=1e-12)  # one row vs a batch: BLAS order
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).__class__, model.__class__)
    with pytest.raises(ValueError, match="features"):
        (model.decision_function if get_method(method).task == "multilabel" else model.predict)(X[:, :-1])


@pytest.mark.parametrize(
    ("method", "params"),
    [("br", {"C": 0}), ("ecc", {"n_chains": 0}), ("rf", {"max_features": 1.5}), ("aa-knn", {"k": 0})],
)
def test_bad_parameters_fail_in_fit(method: str, params: dict) -> None:
    estimator = get_method(method).estimator(**params)  # constructing never validates
    X, Y, _ = _data(n=30)
    if get_method(method).dataset_kind == "distribution":
        X, Y = make_distribution(n=30)
    with pytest.raises(ValueError):
        estimator.fit(X, Y)


def test_aa_knn_k_larger_than_training_set() -> None:
    X, D = make_distribution(n=6)
    with pytest.raises(ValueError, match=r"\[1, 5\]"):  # the leave-one-out shrinkage leaves a row out
        AAKNN(k=7).fit(X, D)


@pytest.mark.parametrize("learner", [SAMaxEnt, AAKNN])
def test_distribution_rows_are_renormalised_and_must_be_distributions(learner) -> None:
    """Rows off 1 by rounding are renormalised (as ldlkm does); negative or all-zero rows fail."""
    X, D = make_distribution(n=20)
    np.testing.assert_allclose(learner().fit(X, D * 2).predict(X), learner().fit(X, D).predict(X), atol=1e-6)
    for bad in (D - 0.5, np.where(np.arange(20)[:, None] == 3, 0.0, D)):
        with pytest.raises(ValueError, match="distribution"):
            learner().fit(X, bad)


def test_mi_filter_auto_bins_when_knn_would_take_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """estimator="auto" (the default) keeps the knn estimate on small data and bins, with a
    warning naming the predicted cost, when that cost passes the bound."""
    import warnings

    from app.methods import mi_filter

    assert mi_filter.knn_seconds(2000, 462, 26) > mi_filter.KNN_MAX_SECONDS > mi_filter.knn_seconds(1211, 294, 6)
    X, Y, _ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mi_filter.SlowEstimatorWarning)
        small = MIFilter().fit(X, Y)
    assert small.estimator_ == "knn"
    np.testing.assert_array_equal(small.mutual_information_, MIFilter(estimator="knn").fit(X, Y).mutual_information_)
    monkeypatch.setattr(mi_filter, "KNN_MAX_SECONDS", 0.0)
    with pytest.warns(mi_filter.SlowEstimatorWarning, match="predicted to take"):
        binned = MIFilter().fit(X, Y)
    assert binned.estimator_ == "binned"
    np.testing.assert_array_equal(binned.ranking_, MIFilter(estimator="binned").fit(X, Y).ranking_)


def test_aa_knn_leave_one_out_on_a_sample_uses_the_same_neighbours() -> None:
    """Above LOO_MAX_ROWS the choice is made on a sample of rows, each without itself."""
    X, D = make_distribution(n=80, d=3, c=4)
    X = np.vstack([X, X[:5]])  # duplicates stay eligible as neighbours of their twins
    D = np.vstack([D, D[:5]])
    model = AAKNN(k=5, shrinkage=0.0).fit(X, D)
    Xs = model.scaling_.transform(X)
    rows = np.array([0, 3, 40, 81, 84])
    np.testing.assert_array_equal(model._others(Xs[rows], rows, 5), model.index_.kneighbors(None, 5)[rows])
