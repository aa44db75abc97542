"""Tests for ELCFS: the method's invariants (docs/methods/elcfs.md) on generated data."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest

from app.methods.elcfs import ELCFS, SPEC, ELCFSParams


def _data(n: int = 60, d: int = 8, q: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 5, size=d) + rng.normal(size=d)
    Y = (rng.uniform(size=(n, q)) < 0.35).astype(int)
    Y[:, 0] = X[:, 1] > np.median(X[:, 1])
    return X, Y


def _planted(seed: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(300, 30))
    Y = np.stack([X[:, 3] > 0.5, X[:, 11] > 0.6, X[:, 20] > 0.4, (X[:, 3] + X[:, 20]) > 1.0], axis=1).astype(int)
    return X, Y, [3, 11, 20]


def _direct_objective(est: ELCFS, Xs, Y, H, T, W, Z) -> float:
    """J_mon written term by term from the spec (section 3.5), independent of the Gram form."""
    fro = lambda A: float((A * A).sum())  # noqa: E731
    l1, l2, l3, l4 = est.lambda1, est.lambda2, est.lambda3, est.lambda4
    J = fro(Xs @ W - Y @ Z) + l1 * fro(H @ W - T @ Z) + l2 * (fro(Y @ Z - Y) + fro(T @ Z - T))
    J += 2 * l3 * np.sqrt((Z * Z).sum(1) + est.eps).sum() + 2 * l4 * np.sqrt((W * W).sum(1) + est.eps).sum()
    return float(J)


def _setup(seed: int = 0, **params):
    """A fitted estimator plus scaled data, centres, Grams and a random positive (W, Z)."""
    X, Y = _data(seed=seed)
    est = ELCFS(max_iter=2, **params).fit(X, Y)
    Xs = est.scaling_.transform(X)
    H, T = est.cluster_centers_, est.cluster_labels_
    g = est._grams(Xs, Y.astype(float), H, T)
    rng = np.random.default_rng(seed + 100)
    W = rng.uniform(size=(X.shape[1], Y.shape[1]))
    Z = rng.uniform(size=(Y.shape[1], Y.shape[1]))
    return est, Xs, Y.astype(float), H, T, g, W, Z


def test_shapes_and_attributes() -> None:
    X, Y = _data()
    est = ELCFS(n_clusters=5).fit(X, Y)
    d, q = X.shape[1], Y.shape[1]
    assert est.W_.shape == (d, q) and est.Z_.shape == (q, q)
    assert est.cluster_centers_.shape == (5, d) and est.cluster_labels_.shape == (5, q)
    assert est.feature_scores_.shape == (d,)
    assert sorted(est.ranking_) == list(range(d))
    assert est.objective_.shape == (est.n_iter_ + 1,)
    assert ELCFS().fit(X, Y).cluster_centers_.shape[0] == q  # default n_clusters = q


def test_cluster_centres_are_member_means() -> None:
    X, Y = _data()
    est = ELCFS().fit(X, Y)
    Xs = est.scaling_.transform(X)
    a = est.cluster_assignment_
    assert set(a) == set(range(est.cluster_centers_.shape[0]))
    for i in range(est.cluster_centers_.shape[0]):
        np.testing.assert_allclose(est.cluster_centers_[i], Xs[a == i].mean(0), atol=1e-12)
        np.testing.assert_allclose(est.cluster_labels_[i], Y[a == i].mean(0), atol=1e-12)
    assert est.cluster_labels_.min() >= 0 and est.cluster_labels_.max() <= 1


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"lambda1": 1.0, "lambda2": 0.01, "lambda3": 0.9, "lambda4": 0.5},
        {"zero_diag_z": True},
        {"cluster_terms": False},
    ],
)
def test_objective_never_increases_and_factors_stay_nonnegative(params: dict) -> None:
    X, Y = _data(seed=1)
    est = ELCFS(max_iter=200, tol=0, **params).fit(X, Y)
    obj = est.objective_
    assert np.all(np.diff(obj) <= 1e-9 * np.abs(obj[1:]))
    assert obj[-1] < obj[0]
    assert np.isfinite(est.W_).all() and np.isfinite(est.Z_).all()
    assert est.W_.min() >= 0 and est.Z_.min() >= 0


def test_objective_decreases_after_each_half_step() -> None:
    est, Xs, Y, H, T, g, W, Z = _setup(seed=2, lambda1=0.7, lambda3=0.3, lambda4=0.9)
    J = _direct_objective(est, Xs, Y, H, T, W, Z)
    for _ in range(30):
        W = est._update_w(W, g["GX"] @ W, g["B"] @ Z)
        Jw = _direct_objective(est, Xs, Y, H, T, W, Z)
        Z = est._update_z(g, W, Z)
        Jz = _direct_objective(est, Xs, Y, H, T, W, Z)
        assert Jw <= J * (1 + 1e-9) and Jz <= Jw * (1 + 1e-9)
        assert W.min() >= 0 and Z.min() >= 0
        J = Jz


def test_gram_objective_equals_direct_objective() -> None:
    est, Xs, Y, H, T, g, W, Z = _setup(seed=3, lambda1=0.3, lambda2=0.7)
    assert est._objective(g, W, Z)[0] == pytest.approx(_direct_objective(est, Xs, Y, H, T, W, Z), rel=1e-10)


def test_updates_match_printed_formulas() -> None:
    """Eq. (16) and (21) computed directly from X, Y, H, T (spec invariant 12)."""
    est, Xs, Y, H, T, g, W, Z = _setup(seed=4, lambda1=0.5, lambda2=0.3, lambda3=0.7, lambda4=0.9)
    l1, l2, l3, l4 = est.lambda1, est.lambda2, est.lambda3, est.lambda4
    U = np.diag(1 / (2 * np.sqrt((W * W).sum(1) + est.eps)))
    W_ref = W * (Xs.T @ Y @ Z + l1 * H.T @ T @ Z) / (Xs.T @ Xs @ W + l1 * H.T @ H @ W + 2 * l4 * U @ W)
    W_new = est._update_w(W, g["GX"] @ W, g["B"] @ Z)
    np.testing.assert_allclose(W_new, W_ref, rtol=1e-9)
    V = np.diag(1 / (2 * np.sqrt((Z * Z).sum(1) + est.eps)))
    num = Y.T @ Xs @ W_new + l1 * T.T @ H @ W_new + l2 * Y.T @ Y + l2 * T.T @ T
    den = (1 + l2) * Y.T @ Y @ Z + (l1 + l2) * T.T @ T @ Z + 2 * l3 * V @ Z
    np.testing.assert_allclose(est._update_z(g, W_new, Z), Z * num / den, rtol=1e-9)


def test_update_terms_are_the_split_gradient() -> None:
    """W <- W * grad- / grad+: 2 (grad+ - grad-) must be the finite-difference gradient of J_mon."""
    est, Xs, Y, H, T, g, W, Z = _setup(seed=5, lambda1=0.5, lambda2=0.3, lambda3=0.7, lambda4=0.9)
    h = 1e-6

    def fd(M: np.ndarray, f) -> np.ndarray:
        G = np.zeros_like(M)
        for idx in np.ndindex(M.shape):
            P, N = M.copy(), M.copy()
            P[idx] += h
            N[idx] -= h
            G[idx] = (f(P) - f(N)) / (2 * h)
        return G

    num, den = est._w_terms(W, g["GX"] @ W, g["B"] @ Z)
    gW = fd(W, lambda M: _direct_objective(est, Xs, Y, H, T, M, Z))
    np.testing.assert_allclose(2 * (den - num), gW, rtol=1e-5, atol=1e-5)
    num, den = est._z_terms(g, W, Z)
    gZ = fd(Z, lambda M: _direct_objective(est, Xs, Y, H, T, W, M))
    np.testing.assert_allclose(2 * (den - num), gZ, rtol=1e-5, atol=1e-5)


def test_approximate_kkt_at_convergence() -> None:
    X, Y = _data(seed=6)
    est = ELCFS(max_iter=3000, tol=1e-12).fit(X, Y)
    Xs = est.scaling_.transform(X)
    g = est._grams(Xs, Y.astype(float), est.cluster_centers_, est.cluster_labels_)
    W, Z = est.W_, est.Z_
    num, den = est._w_terms(W, g["GX"] @ W, g["B"] @ Z)
    scale = est.objective_[-1]
    assert np.abs(W * (den - num)).max() < 1e-3 * scale
    num, den = est._z_terms(g, W, Z)
    assert np.abs(Z * (den - num)).max() < 1e-3 * scale


def test_determinism_with_seed() -> None:
    X, Y = _data()
    a, b = ELCFS(random_state=7).fit(X, Y), ELCFS(random_state=7).fit(X, Y)
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_array_equal(a.Z_, b.Z_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.ranking_, b.ranking_)
    assert not np.array_equal(a.W_, ELCFS(random_state=8).fit(X, Y).W_)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_signal_features_rank_first(seed: int) -> None:
    X, Y, signal = _planted(seed)
    est = ELCFS(random_state=seed).fit(X, Y)
    assert set(est.ranking_[:3]) == set(signal)


def test_scores_ranking_and_selection() -> None:
    X, Y = _data(d=12)
    est = ELCFS(ratio=0.25).fit(X, Y)
    s = est.feature_scores_
    np.testing.assert_allclose(s, np.linalg.norm(est.W_, axis=1))
    assert np.all(np.diff(s[est.ranking_]) <= 0)
    assert est.get_support().sum() == 3
    np.testing.assert_array_equal(est.get_support(indices=True), np.sort(est.ranking_[:3]))
    np.testing.assert_array_equal(est.transform(X), X[:, est.get_support()])
    np.testing.assert_array_equal(est.top_features(5), est.ranking_[:5])
    assert set(est.top_features(3)) <= set(est.top_features(6))
    with pytest.raises(ValueError):
        est.top_features(13)


def test_constant_feature_and_absent_label() -> None:
    X, Y = _data(d=6, q=4)
    X[:, 2] = 3.0
    Y[:, 3] = 0
    est = ELCFS(max_iter=20).fit(X, Y)
    assert est.feature_scores_[2] == 0 and est.ranking_[-1] == 2
    assert np.all(est.Z_[3] == 0)


def test_zero_diag_z_keeps_diagonal_zero() -> None:
    X, Y = _data()
    est = ELCFS(zero_diag_z=True).fit(X, Y)
    assert np.all(np.diag(est.Z_) == 0) and est.Z_.sum() > 0


def test_ablation_ignores_clusters() -> None:
    X, Y = _data()
    a = ELCFS(cluster_terms=False, n_clusters=2).fit(X, Y)
    b = ELCFS(cluster_terms=False, n_clusters=9).fit(X, Y)
    np.testing.assert_allclose(a.W_, b.W_, rtol=1e-12, atol=1e-15)


def test_positive_affine_feature_maps_do_not_change_the_result() -> None:
    X, Y = _data()
    a = ELCFS().fit(X, Y)
    b = ELCFS().fit(X * np.linspace(0.5, 40, X.shape[1]) - 7.0, Y)
    np.testing.assert_allclose(a.W_, b.W_, rtol=1e-6, atol=1e-10)
    np.testing.assert_array_equal(a.ranking_, b.ranking_)


def test_input_validation() -> None:
    X, Y = _data()
    with pytest.raises(ValueError):
        ELCFS(n_clusters=1000).fit(X, Y)
    with pytest.raises(ValueError):
        ELCFS().fit(X, Y * 2)
    with pytest.raises(ValueError):
        ELCFS(scale=False).fit(X - X.min() - 1, Y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError):
        ELCFS().fit(Xn, Y)
    with pytest.raises(ValueError):
        ELCFS(lambda3=-1).fit(X, Y)


def test_progress_reports_iterations() -> None:
    X, Y = _data()
    seen: list[tuple[str, float]] = []
    est = ELCFS(max_iter=15, tol=0).fit(X, Y, progress=lambda s, f: seen.append((s, f)))
    fracs = [f for s, f in seen if s == "iterations"]
    assert len(fracs) == est.n_iter_ + 2 and fracs[-1] == 1.0 and np.all(np.diff(fracs) >= 0)


def test_pickle_roundtrip() -> None:
    X, Y = _data()
    est = ELCFS().fit(X, Y)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.ranking_, est.ranking_)
    np.testing.assert_array_equal(back.transform(X), est.transform(X))


def test_spec_matches_constructor() -> None:
    ctor = set(inspect.signature(ELCFS.__init__).parameters) - {"self"}
    assert ctor == set(ELCFSParams.model_fields)
    est = SPEC.build({})
    defaults = ELCFSParams().model_dump()
    assert est.get_params() == defaults
    assert SPEC.id == "elcfs" and SPEC.task == "selection" and SPEC.outputs == ("features",)


@pytest.mark.realdata
def test_emotions_fit_is_monotone() -> None:
    datasets = pytest.importorskip("benchmarks.datasets")
    if datasets.data_dir() is None:
        pytest.skip("no data dir")
    ds = datasets.load_mulan("emotions", "train")
    est = ELCFS().fit(ds.X, ds.Y)
    assert np.all(np.diff(est.objective_) <= 1e-9 * np.abs(est.objective_[1:]))
    assert est.feature_scores_.max() > 0
