"""Numerics of TRANS-OVK (paper 000): streamed alignment statistics, simplex QPs, exact
leave-one-out corrections, the 2x2 PCA step and the reduced (rank-q) kernel ridge regression.

Kept apart from :mod:`app.methods.trans_ovk` so the estimator module reads as the algorithm
and this one as the linear algebra. Everything here is exact (equal to the naive computation
up to round-off); the spec's section 5 lists why each trick is exact.

Conventions: ``X`` is (n, d) already min-max scaled; ``Ys`` is (n, q) in {-1, +1}; ``G`` and
``A`` are the alignment statistics *scaled by 1/n^2* (the argmin of every QP is unchanged by a
common positive factor, and the scaled numbers are O(1), which keeps tolerances meaningful).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from joblib import Parallel, delayed

# Rows of per-feature kernel values held at once: block_rows * n * d floats ~ this many bytes.
_BLOCK_BYTES = 32 * 2**20


def minmax_fit(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature min and span; a constant feature gets span 1 so it maps to 0 (spec A12)."""
    lo = X.min(axis=0)
    span = X.max(axis=0) - lo
    span[span == 0] = 1.0
    return lo, span


def median_sigma2(X: np.ndarray, n_pairs: int = 20000, seed: int = 0) -> float:
    """Median of the non-zero squared per-feature differences over random sample pairs.

    Pooled over all features; the pair subsample uses a fixed seed so training stays
    deterministic (spec 3.0 and invariant 14). Falls back to 1.0 when every difference is 0.
    """
    n = X.shape[0]
    if n < 2:
        return 1.0
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = rng.integers(0, n, size=n_pairs)
    keep = i != j
    diff2 = (X[i[keep]] - X[j[keep]]) ** 2
    nz = diff2[diff2 > 0]
    return float(np.median(nz)) if nz.size else 1.0


def kernel_rows(
    X: np.ndarray, rows: np.ndarray, sigma2: float, cols: slice = slice(None)
) -> np.ndarray:
    """Per-feature Gaussian kernel values ``E[r, j, t] = exp(-(x_rows[r]^t - x_j^t)^2 / sigma2)``.

    Shape (len(rows), n_cols, d). Computed in place to keep one temporary of that size.
    """
    E = X[rows][:, None, :] - X[cols][None, :, :]
    np.square(E, out=E)
    E *= -1.0 / sigma2
    np.exp(E, out=E)
    return E


def block_size(n: int, d: int) -> int:
    return int(max(1, min(n, _BLOCK_BYTES // max(1, 8 * n * d))))


def run_blocks(
    fn: Callable, n: int, b: int, n_jobs: int, report: Callable[[float], None]
) -> list:
    """Apply ``fn(start, stop)`` to consecutive row blocks, ``n_jobs`` threads at a time.

    NumPy releases the GIL in exp and BLAS, so threads parallelise the heavy part without
    copying X. ``report(fraction_done)`` is called from the calling thread only, between
    rounds, so a progress callback may safely raise (job cancellation) or touch the database.
    """
    blocks = [(s, min(n, s + b)) for s in range(0, n, b)]
    out: list = []
    if n_jobs == 1 or len(blocks) == 1:
        for k, (s, e) in enumerate(blocks):
            out.append(fn(s, e))
            report((k + 1) / len(blocks))
        return out
    per_round = 4 * n_jobs
    with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        for r in range(0, len(blocks), per_round):
            group = blocks[r : r + per_round]
            out.extend(parallel(delayed(fn)(s, e) for s, e in group))
            report(min(1.0, (r + len(group)) / len(blocks)))
    return out


def _stats_block(X, Ys, sigma2, s, e):
    n, d = X.shape
    # Only pairs j > i: G and A are symmetric sums and the diagonal (K_t(i,i) = 1) is added
    # once at the end, so half of the n^2 d^2 work is skipped.
    E = kernel_rows(X, np.arange(s, e), sigma2, slice(s, n))
    for r in range(e - s):
        E[r, : r + 1, :] = 0.0
    Ef = E.reshape(-1, d)
    G = Ef.T @ Ef
    EtY = np.matmul(E.transpose(0, 2, 1), Ys[s:])  # (b, d, q)
    A = np.einsum("rdq,rq->dq", EtY, Ys[s:e])
    return G, A


def alignment_stats(
    X: np.ndarray, Ys: np.ndarray, sigma2: float, n_jobs: int = 1,
    report: Callable[[float], None] = lambda f: None,
) -> tuple[np.ndarray, np.ndarray]:
    """``G[h, t] = <K_h, K_t>_F`` and ``A[t, alpha] = y_alpha^T K_t y_alpha``, both / n^2.

    Streams row blocks of the per-feature kernels (never the n x n x d tensor) and uses the
    symmetry of both sums.
    """
    n, d = X.shape
    parts = run_blocks(
        lambda s, e: _stats_block(X, Ys, sigma2, s, e), n, block_size(n, d), n_jobs, report
    )
    G = 2.0 * sum(p[0] for p in parts) + n
    A = 2.0 * sum(p[1] for p in parts) + n
    G = 0.5 * (G + G.T)
    return G / n**2, A / n**2


# ---------------------------------------------------------------------------------------------
# Simplex QP: min_mu 0.5 mu^T H mu - a^T mu, mu >= 0, 1^T mu = 1, by a primal active-set method.
# ---------------------------------------------------------------------------------------------


@dataclass
class QPResult:
    mu: np.ndarray
    iterations: int
    converged: bool
    kkt: float


def _face_minimiser(H: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Minimiser of the QP on the affine hull of a face: ``[H 1; 1^T 0][m; nu] = [a; 1]``.

    A singular system (duplicate or linearly dependent kernels) is always consistent because
    the objective is flat along H's null directions on the simplex; least squares then picks
    the minimum-norm minimiser deterministically.
    """
    k = H.shape[0]
    K = np.empty((k + 1, k + 1))
    K[:k, :k] = H
    K[:k, k] = 1.0
    K[k, :k] = 1.0
    K[k, k] = 0.0
    rhs = np.empty(k + 1)
    rhs[:k] = a
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(K, rhs)
        resid = np.abs(K @ sol - rhs).max()
        if not np.isfinite(resid) or resid > 1e-9 * (np.abs(K).max() * np.abs(sol).max() + 1.0):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
    return sol[:k]


def simplex_qp(
    hsub: Callable[[np.ndarray], np.ndarray],
    grad: Callable[[np.ndarray, np.ndarray], np.ndarray],
    a: np.ndarray,
    S: np.ndarray,
    muS: np.ndarray,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> QPResult:
    """Primal active-set method on the probability simplex (finite, exact at termination).

    ``hsub(S)`` returns ``H[S][:, S]``; ``grad(S, mu_S)`` returns the full gradient
    ``H[:, S] mu_S - a``. ``(S, muS)`` is a feasible warm start (muS >= 0, sums to 1). Each
    iteration solves the equality-constrained problem on the current face; an infeasible face
    minimiser triggers a ratio-test step that drops the blocking index, a feasible one is
    checked against the KKT multipliers off the face (``g_t - g_S >= -tol``) and the most
    violating index is added. Stops on a KKT point with residual <= tol.
    """
    d = a.shape[0]
    S = np.asarray(S, dtype=np.intp)
    muS = np.asarray(muS, dtype=float)
    kkt = np.inf
    for it in range(1, max_iter + 1):
        m = _face_minimiser(hsub(S), a[S])
        if m.min() >= 0.0:
            muS = m
            g = grad(S, muS)
            nu = -g[S].mean()
            z = g + nu
            z[S] = np.inf
            t = int(np.argmin(z)) if S.size < d else -1
            viol = 0.0 if t < 0 else -z[t]
            kkt = max(viol, float(np.abs(g[S] + nu).max()))
            if viol <= tol:
                return QPResult(_scatter(d, S, muS), it, kkt <= max(tol, 1e-8), kkt)
            S = np.append(S, t)
            muS = np.append(muS, 0.0)
        else:
            p = m - muS
            neg = p < 0
            ratios = -muS[neg] / p[neg]
            step = min(1.0, float(ratios.min()))
            muS = muS + step * p
            drop = np.flatnonzero(neg)[np.argmin(ratios)]
            keep = np.ones(S.size, dtype=bool)
            keep[drop] = False
            keep &= muS > 0
            if not keep.any():
                keep[np.argmax(muS)] = True
            S, muS = S[keep], muS[keep]
            muS = muS / muS.sum()
    return QPResult(_scatter(d, S, muS), max_iter, False, kkt)


def _scatter(d: int, S: np.ndarray, muS: np.ndarray) -> np.ndarray:
    mu = np.zeros(d)
    mu[S] = np.maximum(muS, 0.0)
    return mu / mu.sum()


def solve_global(G: np.ndarray, A: np.ndarray, lambda_a: float, tol: float, max_iter: int):
    """One simplex QP per label on the full training set, started at the best vertex."""
    H = 2.0 * lambda_a * G
    d, q = A.shape
    tol = tol * max(1.0, 2.0 * lambda_a)  # KKT residual relative to the scale of H (G <= 1)
    mus = np.empty((q, d))
    fails = 0
    for al in range(q):
        a = A[:, al]
        k = int(np.argmin(0.5 * np.diag(H) - a))
        res = simplex_qp(
            lambda S: H[np.ix_(S, S)],
            lambda S, muS: H[:, S] @ muS - a,
            a, np.array([k]), np.array([1.0]), tol, max_iter,
        )
        mus[al] = res.mu
        fails += not res.converged
    return mus, fails


def loo_corrections(
    Ei: np.ndarray, yi: np.ndarray, Ys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Unscaled rank corrections: ``G^(-i) - G`` and ``A^(-i) - A`` for one left-out sample.

    ``Ei`` is (n, d) with ``Ei[j, t] = K_t(i, j)``. Used by the tests; the solver applies the
    same identities without forming the d x d correction.
    """
    dG = -2.0 * Ei.T @ Ei + 1.0
    dA = -2.0 * (Ei.T @ Ys) * yi[None, :] + 1.0
    return dG, dA


def _loo_block(X, Ys, sigma2, G, A, Mu, lambda_a, tol, max_iter, s, e):
    n, d = X.shape
    q = Ys.shape[1]
    scale = 1.0 / n**2
    H = 2.0 * lambda_a * G
    tol = tol * max(1.0, 2.0 * lambda_a)  # as in solve_global
    supports = [np.flatnonzero(Mu[al] > 0) for al in range(q)]
    U = np.unique(np.concatenate(supports))
    pos = np.full(d, -1)
    pos[U] = np.arange(U.size)
    supp_pos = [pos[sp] for sp in supports]
    out = np.empty((e - s, q, d))
    fails = 0
    E = kernel_rows(X, np.arange(s, e), sigma2)
    for r in range(e - s):
        i = s + r
        Ei = E[r]
        EU = Ei[:, U]
        EUtEU = EU.T @ EU
        yi = Ys[i]
        # Exact LOO statistics (spec 3.3), scaled by the same 1/n^2 as G and A.
        A_loo = A + scale * (1.0 - 2.0 * (Ei.T @ Ys) * yi[None, :])
        HUU = 2.0 * lambda_a * (G[np.ix_(U, U)] + scale * (1.0 - 2.0 * EUtEU))
        M = np.zeros((q, d))
        # Fast path: keep each label's global support; one face solve per label, then one
        # batched gradient for the KKT check of all labels.
        cand = np.zeros((U.size, q))
        ok = np.ones(q, dtype=bool)
        for al in range(q):
            sp = supp_pos[al]
            m = _face_minimiser(HUU[np.ix_(sp, sp)], A_loo[supports[al], al])
            if m.min() < 0.0:
                ok[al] = False
            else:
                cand[sp, al] = m
        Gm = 2.0 * lambda_a * (
            G[:, U] @ cand + scale * (cand.sum(0)[None, :] - 2.0 * Ei.T @ (EU @ cand))
        ) - A_loo
        for al in range(q):
            if ok[al]:
                S = supports[al]
                g = Gm[:, al]
                nu = -g[S].mean()
                z = g + nu
                z[S] = np.inf
                if z.min() >= -tol:
                    M[al, U] = cand[:, al]
                    continue

            def hsub(S, Ei=Ei):
                ES = Ei[:, S]
                return H[np.ix_(S, S)] + 2.0 * lambda_a * scale * (1.0 - 2.0 * ES.T @ ES)

            def grad(S, muS, Ei=Ei, al=al, A_loo=A_loo):
                return 2.0 * lambda_a * (
                    G[:, S] @ muS + scale * (muS.sum() - 2.0 * Ei.T @ (Ei[:, S] @ muS))
                ) - A_loo[:, al]

            S0 = supports[al]
            res = simplex_qp(hsub, grad, A_loo[:, al], S0, Mu[al, S0], tol, max_iter)
            M[al] = res.mu
            fails += not res.converged
        out[r] = M
    return out, fails


def loo_distributions(
    X, Ys, sigma2, G, A, Mu, lambda_a, tol, max_iter, n_jobs=1,
    report: Callable[[float], None] = lambda f: None,
):
    """``mu_alpha(X - x_i)`` for every (i, alpha): (n, q, d), plus the count of unconverged QPs.

    Uses the exact rank corrections ``G^(-i) = G - 2 E_i^T E_i + 11^T`` and
    ``a^(-i) = a - 2 y_i E_i^T y + 1`` and warm-starts from the global solution.
    """
    n, d = X.shape
    args = (X, Ys, sigma2, G, A, Mu, lambda_a, tol, max_iter)
    parts = run_blocks(lambda s, e: _loo_block(*args, s, e), n, block_size(n, d), n_jobs, report)
    L = np.concatenate([p[0] for p in parts], axis=0)
    return L, sum(p[1] for p in parts)


# ---------------------------------------------------------------------------------------------
# PCA step, normaliser, reduced KRR.
# ---------------------------------------------------------------------------------------------


def pca_combine(Mu: np.ndarray, L: np.ndarray, centering: str) -> tuple[np.ndarray, np.ndarray]:
    """First principal component of ``B(i) = [mu_alpha(X); mu_alpha(X - x_i)]`` projected back.

    ``Mu`` (q, d) global, ``L`` (n, q, d) leave-one-out. Returns ``v`` (n, q, d) and the unit
    leading direction ``P`` (n, q, 2). ``row``: literal row centring, closed-form 2x2 leading
    eigenvector with the sign making ``p1 + p2 >= 0``. ``column``: each column centred, which
    gives ``P = (1, -1)/sqrt(2)`` and ``v = (mu(X) - mu(X - x_i)) / sqrt(2)`` (spec A1).
    """
    n, q, d = L.shape
    g = np.broadcast_to(Mu - 1.0 / d, L.shape)
    l = L - 1.0 / d
    if centering == "column":
        P = np.empty((n, q, 2))
        P[..., 0] = 1.0 / np.sqrt(2.0)
        P[..., 1] = -1.0 / np.sqrt(2.0)
        v = (L - Mu[None]) * (-1.0 / np.sqrt(2.0))
        return v, P
    if centering != "row":
        raise ValueError(f"unknown pca_centering {centering!r}")
    c11 = np.einsum("iad,iad->ia", g, g)
    c22 = np.einsum("iad,iad->ia", l, l)
    c12 = np.einsum("iad,iad->ia", g, l)
    half = 0.5 * (c11 - c22)
    l1 = 0.5 * (c11 + c22) + np.sqrt(half**2 + c12**2)
    p1 = np.where(c12 != 0, c12, np.where(c11 >= c22, 1.0, 0.0))
    p2 = np.where(c12 != 0, l1 - c11, np.where(c11 >= c22, 0.0, 1.0))
    zero = (c11 == 0) & (c22 == 0) & (c12 == 0)
    p1 = np.where(zero, 1.0, p1)
    p2 = np.where(zero, 1.0, p2)
    norm = np.hypot(p1, p2)
    p1, p2 = p1 / norm, p2 / norm
    flip = (p1 + p2 < 0) | ((p1 + p2 == 0) & (p1 < 0))
    p1 = np.where(flip, -p1, p1)
    p2 = np.where(flip, -p2, p2)
    v = p1[..., None] * g + p2[..., None] * l
    return v, np.stack([p1, p2], axis=-1)


def normalize(v: np.ndarray, mode: str) -> np.ndarray:
    """The paper's unstated "normalise" (spec A2) along the last axis.

    ``minmax_sum`` (default): min-max to [0, 1], then divide by the sum (a distribution;
    constant vectors become uniform). ``minmax``: min-max only (constant -> uniform 1/d).
    ``softmax``. ``none``: the signed PCA output unchanged.
    """
    d = v.shape[-1]
    if mode == "none":
        return np.array(v, dtype=float)
    if mode == "softmax":
        z = np.exp(v - v.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)
    lo = v.min(axis=-1, keepdims=True)
    span = v.max(axis=-1, keepdims=True) - lo
    const = span <= 0
    w = (v - lo) / np.where(const, 1.0, span)
    if mode == "minmax":
        return np.where(const, 1.0 / d, w)
    if mode != "minmax_sum":
        raise ValueError(f"unknown normalizer {mode!r}")
    s = w.sum(axis=-1, keepdims=True)
    return np.where(const, 1.0 / d, w / np.where(const, 1.0, s))


def label_correlation(M: np.ndarray) -> np.ndarray:
    """``K_x = M M^T`` for every sample: (n, q, d) -> (n, q, q)."""
    return np.matmul(M, M.transpose(0, 2, 1))


def krr_reduced(Kx: np.ndarray, Ys: np.ndarray, lambda_k: float):
    """Exact rank-q solve of ``(bold K + n lambda_K I) C = bold Y`` with ``bold K = Phi^T Phi``.

    ``S = sum_i K_i^2``, ``b = sum_i K_i y_i``, ``beta = (S + rho I)^{-1} b``,
    ``c_i = (y_i - K_i beta) / rho`` (push-through / Woodbury, rho = n lambda_K) and the tensor
    ``T[a, b, c] = sum_i K_i[a, b] c_i[c]`` for literal-order predictions.
    """
    n, q, _ = Kx.shape
    rho = n * lambda_k
    S = np.einsum("iab,ibc->ac", Kx, Kx)
    b = np.einsum("iab,ib->a", Kx, Ys)
    beta = np.linalg.solve(S + rho * np.eye(q), b)
    C = (Ys - Kx @ beta) / rho
    T = np.einsum("iab,ic->abc", Kx, C)
    return beta, C, T
