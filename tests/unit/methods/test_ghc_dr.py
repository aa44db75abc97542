"""GHC-DR: the method's invariants (docs/methods/ghc-dr.md), exactness of the blocked/pruned computation,
a planted-signal test and the service contract. Generated data only, except one realdata check."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from scipy.linalg import solve_sylvester
from sklearn.metrics import mutual_info_score

from app.methods import ghc_dr
from app.methods.ghc_dr import (
    GHCDR,
    PAPER_READING,
    SPEC,
    GHCDRParams,
    NonConvexWarning,
    centred_unit_rows,
    equal_frequency_codes,
    feature_graph,
    feature_order,
    label_correlation,
    matlab_round,
    mutual_information_matrices,
    n_features_for_percent,
    similarity_rows,
    solve_symmetric_sylvester,
)
from app.methods.numerics import FeatureScaling

#: The paper's reading (the service defaults differ: convex redundancy, unweighted relevance).
PAPER = PAPER_READING


def make_data(n: int = 120, d: int = 12, q: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d) + rng.normal(size=d)
    Y = (rng.random((n, q)) < 0.3).astype(np.int64)
    Y[:, 0] = X[:, 0] > 0.2
    Y[:, 1] = X[:, 1] + X[:, 2] > 0
    return X, Y


def dense_similarity(Xs: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Reference: S = min over features of R_t, through the full n x n x d tensor (small data only)."""
    gap = np.abs(Xs[:, None, :] - Xs[None, :, :])
    Rt = np.where(gap <= xi, 1.0 - gap, 0.0)
    return Rt.min(axis=2)


def scaled(X: np.ndarray, lam: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    xi = Xs.std(axis=0, ddof=1) / lam
    return Xs, xi, feature_order(Xs, xi)


def objective(Z, target, G, R, alpha, beta) -> float:
    return float(np.sum((Z - target) ** 2) + alpha * np.trace(Z.T @ G @ Z) + beta * np.trace(R @ Z.T @ Z))


# --------------------------------------------------------------------------- fuzzy relations
@pytest.mark.parametrize("lam", [0.6, 1.0, 3.0])
def test_similarity_matches_dense_reference_and_is_a_fuzzy_similarity(lam):
    X, _ = make_data(n=80, d=6)
    Xs, xi, order = scaled(X, lam)
    ref = dense_similarity(Xs, xi)
    S = similarity_rows(Xs, xi, order, 0, len(Xs), chunk_elems=10**6).toarray()
    assert np.array_equal(S, ref)
    assert np.all(np.diag(S) == 1.0)
    assert np.array_equal(S, S.T)
    gap = np.abs(Xs[:, None, :] - Xs[None, :, :])
    assert np.all(S[..., None] <= np.where(gap <= xi, 1.0 - gap, 0.0) + 0.0)  # S <= R_t for every t


def test_similarity_blocks_and_pair_phase_are_exact():
    X, _ = make_data(n=90, d=8, seed=3)
    Xs, xi, order = scaled(X, 0.6)
    full = similarity_rows(Xs, xi, order, 0, 90, chunk_elems=10**6).toarray()
    for rows, chunk in [(7, 1), (13, 50), (90, 3)]:
        parts = [similarity_rows(Xs, xi, order, s, min(90, s + rows), chunk).toarray() for s in range(0, 90, rows)]
        assert np.array_equal(np.vstack(parts), full)
    # a different feature order gives the same minimum
    assert np.array_equal(similarity_rows(Xs, xi, order[::-1], 0, 90, 5).toarray(), full)


def test_adding_a_feature_never_increases_similarity():
    X, _ = make_data(n=60, d=7, seed=4)
    Xs, xi, _ = scaled(X)
    sub = np.arange(4)
    S_small = similarity_rows(Xs[:, sub], xi[sub], np.arange(4), 0, 60, 10**6).toarray()
    S_big = similarity_rows(Xs, xi, np.arange(7), 0, 60, 10**6).toarray()
    assert np.all(S_big <= S_small)


def test_fuzzy_memberships_are_convex_combinations_and_crisp_when_S_is_identity():
    X, Y = make_data(n=100, d=5, seed=5)
    m = GHCDR(**PAPER, lam=0.6).fit(X, Y)
    L = m.fuzzy_memberships_
    assert L.min() >= 0 and L.max() <= 1
    card = Y.sum(axis=1)
    assert np.all(L.sum(axis=1) >= card.min() - 1e-12) and np.all(L.sum(axis=1) <= card.max() + 1e-12)
    # a tiny radius makes every off-diagonal R_t zero for distinct values: S = I, L~ = Y
    crisp = GHCDR(**PAPER, lam=1e9).fit(X, Y)
    assert crisp.similarity_density_ == pytest.approx(1.0 / len(X))
    assert np.array_equal(crisp.fuzzy_memberships_, Y.astype(float))


def test_soft_heterogeneous_sets():
    X, Y = make_data(n=150, d=6, seed=6)
    m = GHCDR(**PAPER, lam=0.8, k_dt=9).fit(X, Y)
    DT = m.heterogeneous_sets_
    A = centred_unit_rows(m.fuzzy_memberships_)
    SIM = A @ A.T
    assert np.allclose(SIM, SIM.T) and SIM.min() >= -1 - 1e-12 and SIM.max() <= 1 + 1e-12
    nonconst = np.ptp(m.fuzzy_memberships_, axis=1) > 0
    assert np.allclose(np.diag(SIM)[nonconst], 1.0)
    for i in range(len(X)):
        row = DT[i]
        assert len(set(row.tolist())) == 9 and i not in row
        others = np.setdiff1d(np.arange(len(X)), np.append(row, i))
        assert SIM[i, row].max() <= SIM[i, others].min() + 1e-12


def test_soft_heterogeneous_ties_break_by_index():
    # crisp identical label rows: many exact SIM ties
    Y = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]] * 5)
    X = np.arange(len(Y), dtype=float)[:, None] * np.array([[1.0, 2.0]])
    m = GHCDR(**PAPER, lam=1e9, k_dt=3).fit(X, Y)
    # row 0 = (1,0,0): SIM is -0.5 with every other pattern; the 3 lowest such indices are 1, 2, 3
    assert m.heterogeneous_sets_[0].tolist() == [1, 2, 3]


def test_dependency_range_constant_and_duplicate_features():
    X, Y = make_data(n=100, d=6, seed=7)
    X = np.column_stack([X, np.full(100, 3.5), X[:, 2] * 4 + 1])  # constant, duplicate of column 2
    m = GHCDR(**PAPER).fit(X, Y)
    assert np.all((m.FD_ >= 0) & (m.FD_ <= 1))
    assert m.FD_[6] == 0.0
    assert m.FD_[7] == pytest.approx(m.FD_[2], abs=1e-12)
    assert np.allclose(m.C_[7], m.C_[2])
    assert m.w_.min() == 0.0 and m.w_.max() == 1.0


def test_dependency_is_non_decreasing_in_lambda_for_fixed_sets():
    X, Y = make_data(n=80, d=6, seed=8)
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    DT = GHCDR(**PAPER).fit(X, Y).heterogeneous_sets_
    prev = None
    for lam in (0.6, 0.8, 1.0, 1.2, 1.4):
        xi = Xs.std(axis=0, ddof=1) / lam
        fd = ghc_dr._positive_region_block(Xs, xi, DT, 0, len(Xs)).mean(axis=0)
        if prev is not None:
            assert np.all(fd >= prev - 1e-15)
        prev = fd


# --------------------------------------------------------------------------- MI, R and graph
@pytest.mark.parametrize("n_bins", [2, 3])
def test_mutual_information_matches_plug_in_reference(n_bins):
    X, Y = make_data(n=97, d=7, seed=9)
    codes = equal_frequency_codes(FeatureScaling.minmax(X, constant="zero").transform(X), n_bins)
    C, G = mutual_information_matrices(codes, Y.astype(float), n_bins)
    for i in range(7):
        for u in range(Y.shape[1]):
            assert C[i, u] == pytest.approx(mutual_info_score(codes[:, i], Y[:, u]) / np.log(2), abs=1e-12)
        for j in range(7):
            assert G[i, j] == pytest.approx(mutual_info_score(codes[:, i], codes[:, j]) / np.log(2), abs=1e-12)
    assert np.array_equal(G, G.T) and C.min() >= 0 and G.min() >= 0
    diag = np.diag(G)
    assert np.all(G <= np.minimum.outer(diag, diag) + 1e-12)
    if n_bins == 2:
        assert G.max() <= 1 + 1e-12 and C.max() <= 1 + 1e-12
    _, G_one = mutual_information_matrices(codes, Y.astype(float), n_bins, mi_diag="one")
    assert np.all(np.diag(G_one) == 1.0)


def test_median_split_uses_matlab_rounding():
    x = np.arange(1.0, 8.0)[:, None]  # n = 7: round(3.5) = 4 (Python's round gives 4 too); n = 5 below
    assert equal_frequency_codes(x, 2)[:, 0].tolist() == [0, 0, 0, 0, 1, 1, 1]
    x5 = np.arange(1.0, 6.0)[:, None]  # round(2.5) = 3 in MATLAB, 2 in Python
    assert equal_frequency_codes(x5, 2)[:, 0].tolist() == [0, 0, 0, 1, 1]
    assert matlab_round(2.5) == 3 and matlab_round(0.5) == 1 and matlab_round(0.49) == 0


def test_label_correlation():
    rng = np.random.default_rng(10)
    Y = (rng.random((50, 5)) < 0.4).astype(float)
    Y[:, 3] = Y[:, 1]
    Y[:, 4] = 0.0
    R = label_correlation(Y)
    assert np.array_equal(R, R.T) and R.min() >= 0 and R.max() <= 1
    assert np.all(np.diag(R) == 0) and R[1, 3] == pytest.approx(0.0, abs=1e-12)
    assert np.all(R[4] == 0) and np.all(R[:, 4] == 0)


def test_feature_graph():
    X, _ = make_data(n=60, d=20, seed=11)
    Xs = FeatureScaling.minmax(X, constant="zero").transform(X)
    Xs[:, 5] = Xs[:, 4]
    FF = feature_graph(Xs, 3)
    assert np.array_equal(FF, FF.T) and np.all(np.diag(FF) == 0)
    nz = FF[FF > 0]
    assert nz.min() >= np.exp(-0.5) - 1e-12 and nz.max() <= 1.0
    assert np.all((FF > 0).sum(axis=1) >= 3)
    assert FF[4, 5] == 1.0  # zero-distance neighbours


# --------------------------------------------------------------------------- solver and scoring
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.1), (10.0, 1.0), (0.01, 100.0)])
def test_sylvester_residual_and_library_solver(alpha, beta):
    rng = np.random.default_rng(12)
    G = rng.random((9, 9))
    G = (G + G.T) / 2
    R = label_correlation((rng.random((40, 4)) < 0.5).astype(float))
    C = rng.random((9, 4))
    Z, D = solve_symmetric_sylvester(G, R, C, alpha, beta)
    resid = (np.eye(9) + alpha * G) @ Z + beta * Z @ R - C
    assert np.linalg.norm(resid) <= 1e-8 * max(1.0, np.linalg.norm(C))
    assert np.allclose(Z, solve_sylvester(np.eye(9) + alpha * G, beta * R, C), atol=1e-9)


def test_fitted_solution_is_a_minimiser_when_convex_and_limits_hold():
    X, Y = make_data(n=100, d=10, seed=13)
    m = GHCDR(**PAPER, alpha=0.5, beta=0.1).fit(X, Y)
    assert m.convex_ and m.sylvester_residual_ < 1e-8
    G = 0.8 * m.G_ + 0.2 * m.FF_graph_
    target = m.w_[:, None] * m.C_
    J0 = objective(m.Z_, target, G, m.R_, 0.5, 0.1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert J0 <= objective(m.Z_ + 1e-3 * rng.normal(size=m.Z_.shape), target, G, m.R_, 0.5, 0.1)
    z0 = GHCDR(**PAPER, alpha=0.0, beta=0.0).fit(X, Y)
    assert np.allclose(z0.Z_, target)
    assert np.allclose(z0.feature_scores_, z0.w_ * z0.C_.sum(axis=1))
    l2 = GHCDR(**PAPER, alpha=0.0, beta=0.0, feature_score="l2").fit(X, Y)
    assert np.allclose(l2.feature_scores_, l2.w_ * np.linalg.norm(l2.C_, axis=1))
    b0 = GHCDR(**PAPER, alpha=2.0, beta=0.0).fit(X, Y)
    assert np.allclose(b0.Z_, np.linalg.solve(np.eye(10) + 2.0 * G, target))
    a0 = GHCDR(**PAPER, alpha=0.0, beta=0.3).fit(X, Y)
    assert np.allclose(a0.Z_, target @ np.linalg.inv(np.eye(Y.shape[1]) + 0.3 * m.R_))
    omega0 = GHCDR(**PAPER, omega=0.0, alpha=2.0, beta=0.0).fit(X, Y)
    assert np.allclose(omega0.Z_, np.linalg.solve(np.eye(10) + 2.0 * m.G_, target))


def test_nonconvex_case_is_reported_not_hidden():
    X, Y = make_data(n=100, d=10, seed=14)
    with pytest.warns(NonConvexWarning):
        m = GHCDR(**PAPER, beta=100.0).fit(X, Y)
    assert not m.convex_ and m.min_D_ < 0
    with pytest.raises(ValueError, match="not strictly convex"):
        GHCDR(**PAPER, beta=100.0, nonconvex="error").fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not GHCDR(**PAPER, beta=100.0, nonconvex="ignore").fit(X, Y).convex_


def test_ranking_permutation_determinism_and_nested_subsets():
    X, Y = make_data(n=90, d=15, seed=15)
    a, b = GHCDR(**PAPER).fit(X, Y), GHCDR(**PAPER).fit(X, Y)
    assert sorted(a.ranking_.tolist()) == list(range(15))
    assert np.array_equal(a.ranking_, b.ranking_) and np.array_equal(a.feature_scores_, b.feature_scores_)
    for m in range(1, 15):
        assert set(a.top_features(m)) <= set(a.top_features(m + 1))
        assert len(a.top_features(m)) == m
    assert a.transform(X).shape == (90, 8)  # ratio 0.5 of 15 features, rounded up
    assert n_features_for_percent(1, 19) == 1 and n_features_for_percent(50, 19) == 10
    assert n_features_for_percent(10, 100) == 10


# --------------------------------------------------------------------------- invariance
def test_positive_affine_feature_changes_change_nothing():
    X, Y = make_data(n=100, d=8, seed=16)
    a = GHCDR(**PAPER).fit(X, Y)
    b = GHCDR(**PAPER).fit(X * np.linspace(0.5, 4.0, 8) + np.arange(8), Y)
    assert np.array_equal(a.ranking_, b.ranking_)
    assert np.allclose(a.FD_, b.FD_) and np.allclose(a.Z_, b.Z_) and np.allclose(a.C_, b.C_)


def test_label_permutation_keeps_scores():
    X, Y = make_data(n=100, d=8, seed=17)
    perm = [2, 0, 3, 1]
    for score in ("sum", "l2"):
        a, b = GHCDR(**PAPER, feature_score=score).fit(X, Y), GHCDR(**PAPER, feature_score=score).fit(X, Y[:, perm])
        assert np.allclose(a.feature_scores_, b.feature_scores_)
        assert np.allclose(a.Z_[:, perm], b.Z_)


def test_blocked_parallel_fit_equals_single_block_fit():
    X, Y = make_data(n=160, d=14, seed=18)
    for lam in (0.6, 0.8):
        one = GHCDR(**PAPER, lam=lam, memory_budget_mb=1024).fit(X, Y)
        many = GHCDR(**PAPER, lam=lam, memory_budget_mb=0.02, n_jobs=2).fit(X, Y)
        assert one.similarity_density_ > 1.0 / 160  # S is not the identity: the test exercises pruning
        for attr in ("fuzzy_memberships_", "heterogeneous_sets_", "FD_", "Z_", "ranking_"):
            assert np.array_equal(getattr(one, attr), getattr(many, attr)), attr


# --------------------------------------------------------------------------- planted signal
def test_planted_signal_features_rank_first():
    rng = np.random.default_rng(19)
    n, d = 400, 30
    X = rng.normal(size=(n, d))
    Y = np.column_stack([X[:, 0] > 0, X[:, 1] > 0.3, X[:, 2] + 0.3 * rng.normal(size=n) > -0.2]).astype(int)
    m = GHCDR(**PAPER).fit(X, Y)
    assert set(m.ranking_[:3].tolist()) == {0, 1, 2}
    assert m.convex_


# --------------------------------------------------------------------------- service contract
def test_spec_params_progress_and_pickle():
    params = set(GHCDRParams.model_fields)
    assert params == set(GHCDR(**PAPER).get_params())
    assert SPEC.id == "ghc-dr" and SPEC.task == "selection" and SPEC.outputs == ("features",)
    est = SPEC.build({"alpha": 0.1, "lam": 0.8, **PAPER})  # every stage runs under the paper reading
    X, Y = make_data(n=80, d=9, seed=20)
    seen: list[tuple[str, float]] = []
    est.fit(X, Y, progress=lambda s, f: seen.append((s, f)))
    stages = [s for s, _ in seen]
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == list(SPEC.stages)
    fr = [f for _, f in seen]
    assert fr == sorted(fr) and 0 <= fr[0] and fr[-1] == 1.0
    clone = pickle.loads(pickle.dumps(est))
    assert np.array_equal(clone.ranking_, est.ranking_)
    assert np.array_equal(clone.transform(X), est.transform(X))


def test_catalog_lists_ghc_dr():
    from app.methods.catalog import get_method

    assert get_method("ghc-dr") is SPEC


@pytest.mark.realdata
def test_flags_real_data_fit():
    datasets = pytest.importorskip("benchmarks.datasets")
    if datasets.data_dir() is None:
        pytest.skip("no ../shared/data")
    ds = datasets.load_mulan("flags", "train")
    m = GHCDR(**PAPER).fit(ds.X, ds.Y)
    assert sorted(m.ranking_.tolist()) == list(range(ds.X.shape[1]))
    assert m.sylvester_residual_ < 1e-8 and np.all((m.FD_ >= 0) & (m.FD_ <= 1))


def test_train_and_features_output_through_the_api(client, multilabel_dataset):
    from tests.helpers import train

    job = train(client, "ghc-dr", multilabel_dataset["id"], "ghc", alpha=0.1, lam=0.8)
    assert job["progress"] == 1.0
    body = client.post("/predict", json={"model": "ghc", "top_k": 3}).json()
    assert body["model"]["method"] == "ghc-dr" and body["output"] == "features"
    assert len(body["features"]) == 3
    scores = [f["score"] for f in body["features"]]
    assert scores == sorted(scores, reverse=True)
    bad = client.post(
        "/train?wait=true",
        json={"method": "ghc-dr", "dataset_id": multilabel_dataset["id"], "model_name": "x", "params": {"lambda": 1.0}},
    )
    assert bad.status_code == 422
