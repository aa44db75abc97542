"""TRANS-OVK: the method's invariants (docs/methods/trans-ovk.md) on generated data."""

from __future__ import annotations

import inspect
import pickle
import warnings
from itertools import combinations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from app.methods import ovk_kernels as ok
from app.methods import trans_ovk
from app.methods.trans_ovk import LITERAL_READING, SPEC, TransOVK, TransOVKParams
from app.scoring import average_precision


def _data(n=60, d=6, q=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d, q))
    Y = (X @ W + 0.5 * rng.normal(size=(n, q)) > 0.2).astype(int)
    return X, Y


def _scaled(X):
    lo, span = ok.minmax_fit(X)
    return (X - lo) / span


def _dense_kernels(Xs, sigma2):
    """All per-feature kernels (d, n, n): the naive object the solver never builds."""
    D = Xs.T[:, :, None] - Xs.T[:, None, :]
    return np.exp(-(D**2) / sigma2)


def _brute_qp(H, a):
    """Exact simplex-QP oracle for small d: best KKT-feasible face minimiser over all faces."""
    d = len(a)
    best, best_f = None, np.inf
    for k in range(1, d + 1):
        for S in combinations(range(d), k):
            S = list(S)
            K = np.block([[H[np.ix_(S, S)], np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            try:
                m = np.linalg.solve(K, np.r_[a[S], 1.0])[:k]
            except np.linalg.LinAlgError:
                continue
            if m.min() < -1e-12:
                continue
            mu = np.zeros(d)
            mu[S] = m
            f = 0.5 * mu @ H @ mu - a @ mu
            if f < best_f:
                best, best_f = mu, f
    return best


def _objective(H, a, mu):
    return 0.5 * mu @ H @ mu - a @ mu


# ---------------------------------------------------------------------------- kernels and G


def test_feature_kernels_and_alignment_stats_match_dense():
    X, Y = _data()
    Xs = _scaled(X)
    n, d = Xs.shape
    Ys = np.where(Y > 0, 1.0, -1.0)
    s2 = ok.median_sigma2(Xs)
    Ks = _dense_kernels(Xs, s2)
    # invariant 2: normalisation
    assert Xs.min() == 0.0 and np.allclose(Xs.max(0), 1.0)
    # invariant 3: per-feature kernels; the streamed rows equal the dense kernels
    E = ok.kernel_rows(Xs, np.arange(n), s2)
    assert np.allclose(E.transpose(2, 0, 1), Ks, atol=1e-15)
    for K in Ks:
        assert np.allclose(K, K.T) and np.allclose(np.diag(K), 1.0)
        assert K.min() > 0 and K.max() <= 1.0
        assert np.linalg.eigvalsh(K).min() >= -1e-10
    # invariant 4: G and a (returned scaled by 1/n^2)
    G, A = ok.alignment_stats(Xs, Ys, s2)
    G_dense = np.einsum("hij,tij->ht", Ks, Ks)
    A_dense = np.einsum("tij,ia,ja->ta", Ks, Ys, Ys)
    assert np.allclose(G * n**2, G_dense, rtol=1e-12)
    assert np.allclose(A * n**2, A_dense, rtol=1e-12, atol=1e-9)
    assert np.allclose(G, G.T) and np.linalg.eigvalsh(G).min() >= -1e-10
    assert G.max() <= 1.0 and (np.diag(G) * n**2 >= n - 1e-9).all()
    assert (A >= -1e-12).all() and (A <= 1.0).all()
    # threaded run is the same computation
    G2, A2 = ok.alignment_stats(Xs, Ys, s2, n_jobs=2)
    assert np.allclose(G, G2, rtol=1e-13) and np.allclose(A, A2, rtol=1e-13)


def test_constant_label_alignment_is_kernel_sum():
    X, _ = _data()
    Xs = _scaled(X)
    Ys = np.ones((Xs.shape[0], 1))
    s2 = ok.median_sigma2(Xs)
    _, A = ok.alignment_stats(Xs, Ys, s2)
    Ks = _dense_kernels(Xs, s2)
    assert np.allclose(A[:, 0] * Xs.shape[0] ** 2, Ks.sum(axis=(1, 2)))


# ------------------------------------------------------------------------------------- QPs


@pytest.mark.parametrize("seed", range(6))
def test_simplex_qp_matches_exact_oracle(seed):
    rng = np.random.default_rng(seed)
    d = 6
    B = rng.normal(size=(d, 3 + seed % 4))
    H = B @ B.T + 1e-3 * np.eye(d)
    a = rng.normal(size=d)
    mus, _ = ok.solve_global(H / 2.0, a[:, None], 1.0, 1e-12, 200)
    mu = mus[0]
    ref = _brute_qp(H, a)
    assert np.abs(mu - ref).max() < 1e-8
    assert mu.min() >= -1e-12 and abs(mu.sum() - 1) < 1e-9
    f = _objective(H, a, mu)
    assert f <= _objective(H, a, np.full(d, 1 / d)) + 1e-12
    assert all(f <= _objective(H, a, e) + 1e-12 for e in np.eye(d))
    g = H @ mu - a  # KKT: equal gradient on the support, not smaller off it
    S = mu > 0
    assert np.ptp(g[S]) < 1e-9 and (g[~S] >= g[S].mean() - 1e-9).all()


def test_lambda_a_limits():
    X, Y = _data(q=3)
    Xs = _scaled(X)
    Ys = np.where(Y > 0, 1.0, -1.0)
    G, A = ok.alignment_stats(Xs, Ys, ok.median_sigma2(Xs))
    small, _ = ok.solve_global(G, A, 1e-9, 1e-12, 1000)
    for al in range(3):
        assert small[al].argmax() == A[:, al].argmax() and small[al].max() > 1 - 1e-6
    large, _ = ok.solve_global(G, A, 1e9, 1e-14, 1000)
    assert np.abs(large - large[0]).max() < 1e-6


# ------------------------------------------------------------------------------- leave-one-out


def test_loo_corrections_and_distributions_equal_recomputation():
    X, Y = _data(n=40, d=5, q=3, seed=3)
    Xs = _scaled(X)
    n, d = Xs.shape
    Ys = np.where(Y > 0, 1.0, -1.0)
    s2 = ok.median_sigma2(Xs)
    lam = 0.5
    G, A = ok.alignment_stats(Xs, Ys, s2)
    Mu, _ = ok.solve_global(G, A, lam, 1e-12, 500)
    L, fails = ok.loo_distributions(Xs, Ys, s2, G, A, Mu, lam, 1e-12, 500)
    assert fails == 0 and L.shape == (n, 3, d)
    E = ok.kernel_rows(Xs, np.arange(n), s2)
    for i in (0, 7, 21, n - 1):
        keep = np.arange(n) != i
        G_i, A_i = ok.alignment_stats(Xs[keep], Ys[keep], s2)  # same sigma, recomputed
        dG, dA = ok.loo_corrections(E[i], Ys[i], Ys)
        assert np.allclose(G * n**2 + dG, G_i * (n - 1) ** 2, rtol=1e-9)
        assert np.allclose(A * n**2 + dA, A_i * (n - 1) ** 2, rtol=1e-9, atol=1e-9)
        Mu_i, _ = ok.solve_global(G_i, A_i, lam, 1e-12, 500)
        assert np.abs(L[i] - Mu_i).max() < 1e-8
    assert (L >= -1e-12).all() and np.allclose(L.sum(-1), 1.0, atol=1e-9)


def test_local_alignment_equals_alignment_on_the_neighbourhood():
    X, Y = _data(n=45, d=5, q=3, seed=8)
    Xs = _scaled(X)
    Ys = np.where(Y > 0, 1.0, -1.0)
    s2 = ok.median_sigma2(Xs)
    k = 12
    L, fails = ok.local_distributions(Xs, Ys, s2, k, 0.5, 1e-12, 500)
    assert fails == 0 and (L >= -1e-12).all() and np.allclose(L.sum(-1), 1.0)
    for i in (0, 17, 44):
        dist = ((Xs - Xs[i]) ** 2).sum(1)
        dist[i] = np.inf
        nb = np.argsort(dist, kind="stable")[:k]
        G_i, A_i = ok.alignment_stats(Xs[nb], Ys[nb], s2)
        Mu_i, _ = ok.solve_global(G_i, A_i, 0.5, 1e-12, 500)
        assert np.abs(L[i] - Mu_i).max() < 1e-8
    # O(1) moves, unlike leave-one-out; and the fitted model's scores depend on the input
    m = TransOVK(local_k=k, pca_centering="row").fit(X, Y)
    assert m.distribution_spread_ > 0.05 and m.n_qp_unconverged_ == 0
    assert np.ptp(m.decision_function(X), axis=0).max() > 0


# ------------------------------------------------------------------------ PCA and normaliser


def test_pca_and_normaliser_invariants():
    rng = np.random.default_rng(1)
    q, d, n = 3, 8, 5
    Mu = rng.dirichlet(np.ones(d), size=q)
    Mu[:, 0] = 0
    Mu /= Mu.sum(1, keepdims=True)
    L = np.clip(Mu[None] + 0.02 * rng.normal(size=(n, q, d)), 0, None)
    L /= L.sum(-1, keepdims=True)
    v, P = ok.pca_combine(Mu, L, "row")
    assert np.allclose(np.linalg.norm(P, axis=-1), 1.0)
    assert (P.sum(-1) >= 0).all()
    assert np.allclose(v.sum(-1), 0.0, atol=1e-14)
    # P is the leading eigenvector of C = B* B*^T
    B = np.stack([np.broadcast_to(Mu, L.shape), L], axis=-2) - 1.0 / d
    C = B @ B.transpose(0, 1, 3, 2)
    w, V = np.linalg.eigh(C)
    lead = V[..., -1]
    assert np.allclose(np.abs((lead * P).sum(-1)), 1.0)
    for mode in ("minmax_sum", "softmax"):
        N = ok.normalize(v, mode)
        assert (N >= 0).all() and np.allclose(N.sum(-1), 1.0)
    # identical rows: the sample-level distribution equals the global one (min mu = 0)
    v0, _ = ok.pca_combine(Mu, np.broadcast_to(Mu, L.shape).copy(), "row")
    assert np.allclose(ok.normalize(v0, "minmax_sum"), Mu[None], atol=1e-12)
    vc, Pc = ok.pca_combine(Mu, L, "column")
    assert np.allclose(vc, (Mu[None] - L) / np.sqrt(2))


# --------------------------------------------------------------------- kernel and KRR algebra


def _distributions(m, X, Y):
    """The sample-level distributions (n, q, d) of a fitted model, computed densely (the
    estimator itself never holds them: it folds them block by block into SampleStats)."""
    Xs = (X - m.x_min_) / m.x_span_
    Ys = np.where(Y > 0, 1.0, -1.0)
    G, A = ok.alignment_stats(Xs, Ys, m.sigma2_)
    Mu, _ = ok.solve_global(G, A, m.lambda_a, m.qp_tol, m.qp_max_iter)
    L, _ = ok.loo_distributions(
        Xs, Ys, m.sigma2_, G, A, Mu, m.lambda_a, m.qp_tol, m.qp_max_iter, exact=m.loo_solver == "exact"
    )
    return ok.normalize(ok.pca_combine(Mu, L, m.pca_centering)[0], m.normalizer)


def _fitted(n=30, d=5, q=3, **kw):
    X, Y = _data(n=n, d=d, q=q, seed=5)
    m = TransOVK(**kw).fit(X, Y)
    return m, X, np.where(Y > 0, 1.0, -1.0), _distributions(m, X, Y)


def test_label_correlation_and_operator_kernel_identities():
    m, X, Ys, M = _fitted(**LITERAL_READING)  # this invariant needs distributions (the min-max-then-sum normaliser)
    n, q, d = M.shape
    Kx = ok.label_correlation(M)
    for K in Kx:
        assert np.allclose(K, K.T) and K.min() >= 0
        assert np.linalg.eigvalsh(K).min() >= -1e-12
        assert np.linalg.matrix_rank(K) <= min(q, d)
        assert (np.diag(K) >= 1 / d - 1e-12).all() and (np.diag(K) <= 1 + 1e-12).all()
    i, j = 2, 9
    Kij = Kx[i].T @ Kx[j]
    assert np.allclose(Kij, (Kx[j].T @ Kx[i]).T)
    Mij = sum(np.outer(M[i, c], M[j, c]) for c in range(q))
    expansion = np.array([[M[i, a] @ Mij @ M[j, b] for b in range(q)] for a in range(q)])
    transform = Kx[i] @ Kx[j].T  # rows phi_h(x_i) . phi_l(x_j)
    trace = np.array([[np.trace(np.outer(M[j, b], M[i, a]) @ Mij) for b in range(q)] for a in range(q)])
    for other in (expansion, transform, trace):
        assert np.allclose(Kij, other, rtol=1e-12, atol=1e-15)
    # block matrix: symmetric PSD, rank <= q, equal to Phi^T Phi
    Kbig = np.block([[Kx[a] @ Kx[b] for b in range(n)] for a in range(n)])
    Phi = np.concatenate(list(Kx), axis=1)
    assert np.allclose(Kbig, Kbig.T) and np.allclose(Kbig, Phi.T @ Phi)
    ev = np.linalg.eigvalsh(Kbig)
    assert ev.min() >= -1e-10 * np.abs(ev).max()
    assert np.linalg.matrix_rank(Kbig, tol=1e-10 * ev.max()) <= q
    u = np.random.default_rng(0).normal(size=n * q)
    assert u @ Kbig @ u >= -1e-12


@pytest.mark.parametrize("k_order,self_factor", [("literal", True), ("standard", False)])
def test_rank_q_solve_equals_naive_solve(k_order, self_factor):
    m, X, Ys, M = _fitted(**{**LITERAL_READING, "k_order": k_order, "self_factor": self_factor, "lambda_k": 0.05})
    n, q, _ = M.shape
    Kx = ok.label_correlation(M)
    Kbig = np.block([[Kx[a] @ Kx[b] for b in range(n)] for a in range(n)])
    C_dense = np.linalg.solve(Kbig + n * 0.05 * np.eye(n * q), Ys.reshape(-1)).reshape(n, q)
    assert np.allclose(m.coef_, C_dense, rtol=1e-8, atol=1e-10 * np.abs(C_dense).max())
    # predictions equal the dense formula g = K(x,x)^T k_x^T C
    Xt = np.random.default_rng(9).normal(size=(4, X.shape[1]))
    Kt = ok.label_correlation(m.predict_distributions(Xt))
    for p in range(4):
        blocks = [Kx[i] @ Kt[p] if k_order == "literal" else Kt[p] @ Kx[i] for i in range(n)]
        h = np.concatenate(blocks, axis=1) @ C_dense.reshape(-1)
        g = Kt[p] @ Kt[p] @ h if self_factor else h
        assert np.allclose(m.decision_function(Xt[p : p + 1])[0], g, rtol=1e-8, atol=1e-14)


def test_ridge_map_matches_closed_form_both_forms():
    for n, d in ((30, 5), (12, 20)):  # primal (d <= n) and dual (d > n) storage
        X, Y = _data(n=n, d=d, q=2, seed=2)
        m = TransOVK(pca_centering="column", normalizer="minmax_sum", lambda_w=0.01).fit(X, Y)
        Xs = (X - m.x_min_) / m.x_span_
        M = _distributions(m, X, Y)
        Xt = np.random.default_rng(1).normal(size=(3, d))
        Xts = (Xt - m.x_min_) / m.x_span_
        F = Xs.T
        inv = np.linalg.inv(F @ F.T + n * m.lambda_w * np.eye(d))
        for al in range(2):
            W = M[:, al, :].T @ F.T @ inv
            ref = ok.normalize((Xts @ W.T)[:, None, :], "minmax_sum")[:, 0]
            assert np.allclose(m.predict_distributions(Xt)[:, al], ref, atol=1e-10)
        D = m.predict_distributions(Xt)
        assert (D >= 0).all() and np.allclose(D.sum(-1), 1.0)


def _dense_reference_scores(m, X, Y, Xt):
    """The pre-streaming pipeline: all (n, q, d) distributions held, ridge maps and K_x from
    them in one piece, the head solved naively, scores for all test rows at once."""
    Xs = (X - m.x_min_) / m.x_span_
    Ys = np.where(Y > 0, 1.0, -1.0)
    M = _distributions(m, X, Y)
    n, q, d = M.shape
    Z = M.reshape(n, q * d)
    Xts = (Xt - m.x_min_) / m.x_span_
    rho = n * m.lambda_w_

    def fit_map(rows):
        A, B = Xs[rows], Z[rows]
        return np.linalg.solve(A.T @ A + rho * np.eye(d), A.T @ B)

    def kx(V):
        return ok.label_correlation(ok.normalize(V.reshape(-1, q, d), m.normalizer))

    Kt = kx(Xts @ fit_map(np.arange(n)))
    if m.kernel_inputs == "mapped":
        Ktr = kx(Xs @ fit_map(np.arange(n)))
    else:
        Ktr = ok.label_correlation(M)
    if m.head == "trace":
        F, Ft = ok.trace_features(Ktr), ok.trace_features(Kt)
        mu, ym = F.mean(0), Ys.mean(0)
        sc = np.sqrt(((F - mu) ** 2).sum() / n)
        Fc = (F - mu) / sc
        W = np.linalg.solve(Fc.T @ Fc + n * m.lambda_k_ * np.eye(F.shape[1]), Fc.T @ (Ys - ym))
        h = ((Ft - mu) / sc) @ W + ym
    else:
        beta, _, T = ok.krr_reduced(Ktr, Ys, m.lambda_k_)
        h = np.einsum("abc,pbc->pa", T, Kt) if m.k_order == "literal" else Kt @ beta
        if m.self_factor:
            h = np.einsum("pab,pb->pa", Kt, np.einsum("pab,pb->pa", Kt, h))
    spread = (
        np.abs(
            M - ok.solve_global(*ok.alignment_stats(Xs, Ys, m.sigma2_), m.lambda_a, m.qp_tol, m.qp_max_iter)[0][None]
        )
        .sum(-1)
        .mean()
    )
    return h, spread


@pytest.mark.parametrize(
    "n,d,reading",
    [
        (80, 7, {}),
        (80, 7, LITERAL_READING),
        (80, 7, dict(normalizer="none", head="ovk", k_order="standard")),
        (80, 7, dict(pca_centering="column", normalizer="softmax", kernel_inputs="loo")),
        (25, 40, {}),
        (25, 40, dict(pca_centering="column", normalizer="minmax")),
    ],
)
def test_streamed_fit_equals_dense_pipeline(monkeypatch, n, d, reading):
    """Blockwise statistics (several LOO blocks, threads, chunked prediction) give the same
    scores as holding every distribution; a duplicated feature makes G singular (lstsq path)."""
    X, Y = _data(n=n, d=d, q=4, seed=13)
    X[:, -1] = X[:, 0]
    Xt = np.random.default_rng(6).normal(size=(23, d))
    monkeypatch.setattr(ok, "_LOO_BLOCK_BYTES", 8 * n * d * 6)  # 6 rows per LOO block
    monkeypatch.setattr(ok, "_BLOCK_BYTES", 8 * n * d * 5)
    monkeypatch.setattr(trans_ovk, "_PREDICT_BYTES", 8 * 4 * d * 5)  # 5 rows per chunk
    for n_jobs in (1, 2):
        m = TransOVK(n_jobs=n_jobs, **reading).fit(X, Y)
        ref, spread = _dense_reference_scores(m, X, Y, Xt)
        S = m.decision_function(Xt)
        assert np.allclose(S, ref, rtol=1e-8, atol=1e-10 * np.abs(ref).max())
        assert abs(m.distribution_spread_ - spread) <= 1e-12
        assert m.n_qp_unconverged_ == 0


# ------------------------------------------------------------------------- estimator contract


def test_outputs_depend_on_input_and_threshold_rule():
    X, Y = _data(n=120, d=8, q=4, seed=7)
    for reading in (LITERAL_READING, {}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", trans_ovk.EmptyLabelSetWarning)
            m = TransOVK(**reading).fit(X[:90], Y[:90])
        S = m.decision_function(X[90:])
        assert S.shape == (30, 4) and np.isfinite(S).all()
        assert np.ptp(S, axis=0).max() > 0  # scores vary with the input
        assert m.distribution_spread_ > 0
        Z = S > m.thresholds_
        if m.fill_empty_:
            empty = ~Z.any(1)
            Z[np.flatnonzero(empty), S[empty].argmax(1)] = True
        assert np.array_equal(m.predict(X[90:]), Z.astype(int))
        assert np.array_equal(m.predict(X[90:], threshold=-1e9), np.ones_like(S))
        assert m.n_qp_unconverged_ == 0
    assert np.array_equal(TransOVK(**LITERAL_READING).fit(X, Y).thresholds_, np.zeros(4))


def test_determinism_and_permutation_symmetry():
    X, Y = _data(n=50, d=6, q=3, seed=11)
    Xt = np.random.default_rng(2).normal(size=(10, 6))
    kw = dict(sigma=0.4, pca_centering="column", lambda_k=0.1)
    S = TransOVK(**kw).fit(X, Y).decision_function(Xt)
    assert np.array_equal(S, TransOVK(**kw).fit(X, Y).decision_function(Xt))
    perm = np.random.default_rng(3).permutation(50)
    assert np.allclose(TransOVK(**kw).fit(X[perm], Y[perm]).decision_function(Xt), S, rtol=1e-7, atol=1e-12)
    lp = np.array([2, 0, 1])
    assert np.allclose(TransOVK(**kw).fit(X, Y[:, lp]).decision_function(Xt), S[:, lp], rtol=1e-7, atol=1e-12)
    fp = np.random.default_rng(4).permutation(6)
    assert np.allclose(TransOVK(**kw).fit(X[:, fp], Y).decision_function(Xt[:, fp]), S, rtol=1e-7, atol=1e-12)


def test_pickle_roundtrip_and_params_contract():
    X, Y = _data()
    m = TransOVK(pca_centering="column").fit(X, Y)
    m2 = pickle.loads(pickle.dumps(m))
    assert np.array_equal(m.decision_function(X), m2.decision_function(X))
    ctor = set(inspect.signature(TransOVK.__init__).parameters) - {"self"}
    assert ctor == set(TransOVKParams.model_fields)
    assert SPEC.id == "trans-ovk" and SPEC.task == "multilabel"
    built = SPEC.build({"lambda_k": 0.5})
    assert built.get_params()["lambda_k"] == 0.5
    assert built.get_params() == {**TransOVKParams().model_dump(), "lambda_k": 0.5}


def test_progress_reports_every_stage_in_order():
    X, Y = _data()
    calls = []
    TransOVK(n_jobs=2).fit(X, Y, progress=lambda s, f: calls.append((s, f)))
    stages = [s for s, _ in calls]
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == list(SPEC.stages)
    fr = [f for _, f in calls]
    assert all(0 <= f <= 1 for f in fr) and fr == sorted(fr) and fr[-1] == 1.0


# ------------------------------------------------------------- default quality and warnings


def _skewed(n=240, d=6, q=4, seed=21):
    """Labels of very different frequencies driven by the input: a constant label-frequency
    ranking is a strong floor, and an input-dependent model can beat it."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    W = rng.normal(size=(d, q)) * 3
    logits = X @ W - (X @ W).mean(0) + np.array([1.5, 0.5, -0.5, -1.5])[:q]
    Y = (logits + 0.3 * rng.normal(size=(n, q)) > 0).astype(int)
    return X, Y


def test_default_beats_constant_ranking_and_predicts_label_sets():
    X, Y = _skewed()
    tr, te = slice(0, 160), slice(160, None)
    m = TransOVK().fit(X[tr], Y[tr])
    S, Z = m.decision_function(X[te]), m.predict(X[te])
    constant = np.tile(Y[tr].mean(0), (Y[te].shape[0], 1))
    assert average_precision(Y[te], S) > average_precision(Y[te], constant) + 0.02
    assert (Z.sum(1) > 0).mean() > 0.9  # nearly every true set is non-empty here
    assert m.lambda_w_ in trans_ovk.LAMBDA_W_GRID and m.lambda_k_ in trans_ovk.LAMBDA_K_GRID
    assert np.isfinite(m.thresholds_).all()


def test_trace_head_leave_one_out_and_f1_thresholds_are_exact():
    rng = np.random.default_rng(8)
    F = rng.normal(size=(25, 6))
    Ys = np.where(rng.uniform(size=(25, 3)) > 0.6, 1.0, -1.0)
    heads, loos = ok.trace_head_path(F, Ys, [1e-3, 0.1])
    for head, loo in zip(heads, loos):
        for i in (0, 7, 24):
            keep = np.delete(np.arange(25), i)
            # refit without sample i, with its own centring but the full-data scale (the
            # scale is part of the kernel, not of the fit), then predict sample i
            Fi, Yi = F[keep], Ys[keep]
            mu, ym = Fi.mean(0), Yi.mean(0)
            Fc = (Fi - mu) / head.scale
            W = np.linalg.solve(Fc.T @ Fc + 25 * head.lambda_k * np.eye(6), Fc.T @ (Yi - ym))
            assert np.allclose(loo[i], ((F[i] - mu) / head.scale) @ W + ym, atol=1e-10)
    S = rng.normal(size=(30, 2))
    Yb = rng.uniform(size=(30, 2)) > 0.5
    Yb[:, 1] = False
    t = ok.f1_thresholds(S, Yb)
    assert t[1] == np.inf
    best = max(2 * (Yb[:, 0] & (S[:, 0] > c)).sum() / ((S[:, 0] > c).sum() + Yb[:, 0].sum()) for c in S[:, 0])
    best = max(best, 2 * Yb[:, 0].sum() / (30 + Yb[:, 0].sum()))
    got = 2 * (Yb[:, 0] & (S[:, 0] > t[0])).sum() / ((S[:, 0] > t[0]).sum() + Yb[:, 0].sum())
    assert np.isclose(got, best)


def test_compact_normaliser_equals_full():
    rng = np.random.default_rng(4)
    VU, voff = rng.normal(size=(5, 3, 4)), rng.normal(size=(5, 3))
    full = np.concatenate([VU, np.repeat(voff[:, :, None], 6, axis=2)], axis=2)
    for mode in ("minmax_sum", "minmax", "softmax", "none"):
        W, wo = ok.normalize_compact(VU, voff, 6, mode)
        N = ok.normalize(full, mode)
        assert np.allclose(W, N[:, :, :4]) and np.allclose(wo, N[:, :, 4])
        assert np.allclose(ok.label_correlation_compact(W, wo, 6), ok.label_correlation(N))


def test_unconverged_qps_warn():
    X, Y = _data(n=40, d=8, q=3, seed=1)
    with pytest.warns(ConvergenceWarning, match="alignment QPs"):
        m = TransOVK(qp_max_iter=1).fit(X, Y)
    assert m.n_qp_unconverged_ > 0


def test_constant_ranking_and_empty_label_sets_warn():
    X, Y = _data(n=40, d=4, q=3, seed=3)
    with pytest.warns(trans_ovk.ConstantRankingWarning):
        TransOVK().fit(np.ones_like(X), Y)  # no input information: one ranking for everyone
    with pytest.warns(trans_ovk.EmptyLabelSetWarning):
        TransOVK(threshold=1e9).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TransOVK().fit(*_skewed(n=120))  # a healthy fit stays silent


def test_fixed_support_leave_one_out_equals_exact_where_the_support_holds():
    X, Y = _data(n=60, d=6, q=3, seed=4)
    Xs, Ys = _scaled(X), np.where(Y > 0, 1.0, -1.0)
    s2 = ok.median_sigma2(Xs)
    G, A = ok.alignment_stats(Xs, Ys, s2)
    Mu, _ = ok.solve_global(G, A, 1.0, 1e-10, 1000)
    exact, _ = ok.loo_distributions(Xs, Ys, s2, G, A, Mu, 1.0, 1e-10, 1000)
    fixed, fails = ok.loo_distributions(Xs, Ys, s2, G, A, Mu, 1.0, 1e-10, 1000, exact=False)
    assert fails == 0 and np.allclose(fixed.sum(-1), 1.0) and (fixed >= 0).all()
    same = ((exact > 0) == (Mu[None] > 0)).all(-1)
    assert same.any() and np.allclose(fixed[same], exact[same], atol=1e-12)
    assert ((fixed > 0) <= (Mu[None] > 0)).all()  # never leaves the global support


def test_alignment_rows_cap_is_order_free_and_used():
    X, Y = _data(n=80, d=5, q=3, seed=9)
    m = TransOVK(max_alignment_samples=30, sigma=0.4).fit(X, Y)  # the median heuristic samples by index
    assert m.alignment_rows_.size == 30
    perm = np.random.default_rng(1).permutation(80)
    m2 = TransOVK(max_alignment_samples=30, sigma=0.4).fit(X[perm], Y[perm])
    assert np.array_equal(np.sort(perm[m2.alignment_rows_]), m.alignment_rows_)
    Xt = np.random.default_rng(2).normal(size=(7, 5))
    assert np.allclose(m.decision_function(Xt), m2.decision_function(Xt), rtol=1e-7, atol=1e-12)
