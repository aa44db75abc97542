"""Numerics of TRANS-OVK: streamed alignment statistics, simplex QPs, exact
leave-one-out corrections, the 2x2 PCA step and the reduced (rank-q) kernel ridge regression.

Kept apart from :mod:`app.methods.trans_ovk` so the estimator module reads as the algorithm
and this one as the linear algebra. Everything here is exact (equal to the naive computation
up to round-off); the tests check each trick against the naive computation.

Conventions: ``X`` is (n, d) already min-max scaled; ``Ys`` is (n, q) in {-1, +1}; ``G`` and
``A`` are the alignment statistics *scaled by 1/n^2* (the argmin of every QP is unchanged by a
common positive factor, and the scaled numbers are O(1), which keeps tolerances meaningful).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from app.methods.numerics import FeatureScaling, run_blocks

# Rows of per-feature kernel values held at once: block_rows * n * d floats ~ this many bytes.
_BLOCK_BYTES = 32 * 2**20
# The leave-one-out pass batches its samples, so it takes larger blocks (fewer Python steps).
_LOO_BLOCK_BYTES = 96 * 2**20


def minmax_fit(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature min and span of the shared min-max scaling with constant features kept: a
    constant feature gets span 1, so it maps to 0 on the training data and test values keep
    their deviation."""
    scaling = FeatureScaling.minmax(X, constant="keep")
    return scaling.offset, scaling.scale


def median_sigma2(X: np.ndarray, n_pairs: int = 20000, seed: int = 0) -> float:
    """Median of the non-zero squared per-feature differences over random sample pairs.

    Pooled over all features; the pair subsample uses a fixed seed so training stays
    deterministic. Falls back to 1.0 when every difference is 0.
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


def kernel_rows(X: np.ndarray, rows: np.ndarray, sigma2: float, cols: slice = slice(None)) -> np.ndarray:
    """Per-feature Gaussian kernel values ``E[r, j, t] = exp(-(x_rows[r]^t - x_j^t)^2 / sigma2)``.

    Shape (len(rows), n_cols, d). Computed in place to keep one temporary of that size.
    """
    E = X[rows][:, None, :] - X[cols][None, :, :]
    np.square(E, out=E)
    E *= -1.0 / sigma2
    np.exp(E, out=E)
    return E


def block_size(n: int, d: int, budget: int = _BLOCK_BYTES) -> int:
    return int(max(1, min(n, budget // max(1, 8 * n * d))))


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
    X: np.ndarray,
    Ys: np.ndarray,
    sigma2: float,
    n_jobs: int = 1,
    report: Callable[[float], None] = lambda f: None,
) -> tuple[np.ndarray, np.ndarray]:
    """``G[h, t] = <K_h, K_t>_F`` and ``A[t, alpha] = y_alpha^T K_t y_alpha``, both / n^2.

    Streams row blocks of the per-feature kernels (never the n x n x d tensor), folds each
    block's partial sums in as it arrives (never n / block partial d x d matrices: 3 GB on
    Business at n = 4000) and uses the symmetry of both sums.
    """
    n, d = X.shape
    G = np.zeros((d, d))
    A = np.zeros((d, Ys.shape[1]))

    def add(s: int, e: int, part: tuple[np.ndarray, np.ndarray]) -> None:
        G[...] += part[0]
        A[...] += part[1]

    run_blocks(lambda s, e: _stats_block(X, Ys, sigma2, s, e), n, block_size(n, d), n_jobs, report, add)
    G = 2.0 * G + n
    A = 2.0 * A + n
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


def _face_minimisers(H: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Minimisers of a batch of QPs on the affine hull of a face: for each item,
    ``[H 1; 1^T 0][m; nu] = [a; 1]``. ``H`` is (b, k, k), ``a`` (b, k); returns (b, k).

    One batched LAPACK solve for the whole batch (the same ``gesv`` per item as a single
    solve). An item whose system is singular (duplicate or linearly dependent kernels) is
    always consistent, because the objective is flat along H's null directions on the
    simplex; least squares then picks the minimum-norm minimiser deterministically.
    """
    nb, k = a.shape
    K = np.empty((nb, k + 1, k + 1))
    K[:, :k, :k] = H
    K[:, :k, k] = 1.0
    K[:, k, :k] = 1.0
    K[:, k, k] = 0.0
    rhs = np.empty((nb, k + 1, 1))
    rhs[:, :k, 0] = a
    rhs[:, k, 0] = 1.0
    try:
        sol = np.linalg.solve(K, rhs)
        resid = np.abs(np.matmul(K, sol) - rhs).max(axis=(1, 2))
        scale = np.abs(K).max(axis=(1, 2)) * np.abs(sol).max(axis=(1, 2)) + 1.0
        bad = ~(np.isfinite(resid) & (resid <= 1e-9 * scale))
    except np.linalg.LinAlgError:
        sol = np.empty_like(rhs)
        bad = np.ones(nb, dtype=bool)
    for r in np.flatnonzero(bad):
        try:
            sol[r] = np.linalg.solve(K[r], rhs[r])
            resid = np.abs(K[r] @ sol[r] - rhs[r]).max()
            if not np.isfinite(resid) or resid > 1e-9 * (np.abs(K[r]).max() * np.abs(sol[r]).max() + 1.0):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            sol[r] = np.linalg.lstsq(K[r], rhs[r], rcond=None)[0]
    return sol[:, :k, 0]


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
        m = _face_minimisers(hsub(S)[None], a[S][None])[0]
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

        def grad(S: np.ndarray, muS: np.ndarray, a: np.ndarray = a) -> np.ndarray:
            return H[:, S] @ muS - a

        res = simplex_qp(
            lambda S: H[np.ix_(S, S)],
            grad,
            a,
            np.array([k]),
            np.array([1.0]),
            tol,
            max_iter,
        )
        mus[al] = res.mu
        fails += not res.converged
    return mus, fails


def loo_corrections(Ei: np.ndarray, yi: np.ndarray, Ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unscaled rank corrections: ``G^(-i) - G`` and ``A^(-i) - A`` for one left-out sample.

    ``Ei`` is (n, d) with ``Ei[j, t] = K_t(i, j)``. Used by the tests; the solver applies the
    same identities without forming the d x d correction.
    """
    dG = -2.0 * Ei.T @ Ei + 1.0
    dA = -2.0 * (Ei.T @ Ys) * yi[None, :] + 1.0
    return dG, dA


def _support_candidates(
    HUU: np.ndarray, A_loo: np.ndarray, supports: list[np.ndarray], pos: np.ndarray, Mu: np.ndarray, exact: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The fast path of ``_loo_block``: each label's face minimiser on its global support, all
    samples of the block at once. Returns the candidates over the union support ``U`` (nb, |U|,
    q) and whether each (sample, label) one is feasible (``exact=False``: clipped and
    renormalised, so always)."""
    nb, k = HUU.shape[:2]
    cand = np.zeros((nb, k, len(supports)))
    ok = np.empty((nb, len(supports)), dtype=bool)
    for al, S in enumerate(supports):
        sp = pos[S]
        m = _face_minimisers(HUU[:, sp[:, None], sp[None, :]], A_loo[:, S, al])
        ok[:, al] = m.min(axis=1) >= 0.0
        if not exact:
            m = np.maximum(m, 0.0)
            tot = m.sum(axis=1, keepdims=True)
            m = np.where(tot > 0, m / np.where(tot > 0, tot, 1.0), Mu[al, S][None])
            ok[:, al] = True
        cand[:, sp, al] = np.where(ok[:, al, None], m, 0.0)
    return cand, ok


def _loo_block(X, Ys, sigma2, G, A, Mu, lambda_a, tol, max_iter, exact, s, e):
    """Leave-one-out distributions of samples ``s..e-1``: (e - s, q, d) and #unconverged.

    Vectorised over the block's samples: the kernel rows, the corrected statistics, one
    batched face solve per label (each label keeps its global support, which is nearly always
    still optimal since removing one of n samples moves G and a by O(1/n)) and one batched
    gradient for the KKT check. Only the (sample, label) pairs whose support changes go
    through the active-set solver, one at a time.

    ``exact=False`` (approximate, a flagged option): every leave-one-out solution stays on its
    label's global support, the face minimiser there with negative weights clipped and the rest
    renormalised; no KKT check, no active-set repair. On sparse text-like data more than half
    of the supports change, and those one-at-a-time solves dominate the whole fit.
    """
    n, d = X.shape
    q = Ys.shape[1]
    nb = e - s
    scale = 1.0 / n**2
    c = 2.0 * lambda_a
    H = c * G
    tol = tol * max(1.0, c)  # as in solve_global
    supports = [np.flatnonzero(Mu[al] > 0) for al in range(q)]
    U = np.unique(np.concatenate(supports))
    pos = np.full(d, -1)
    pos[U] = np.arange(U.size)
    if exact:
        E = kernel_rows(X, np.arange(s, e), sigma2)  # (nb, n, d)
        Et = E.transpose(0, 2, 1)
        # Exact LOO statistics, scaled by the same 1/n^2 as G and A: (nb, d, q).
        A_loo = A[None] + scale * (1.0 - 2.0 * np.matmul(Et, Ys) * Ys[s:e, None, :])
        EU = np.ascontiguousarray(E[:, :, U])
    else:  # only the support features are ever used
        EU = kernel_rows(X[:, U], np.arange(s, e), sigma2)
        A_loo = np.zeros((nb, d, q))
        A_loo[:, U] = A[U][None] + scale * (1.0 - 2.0 * np.matmul(EU.transpose(0, 2, 1), Ys) * Ys[s:e, None, :])
    EUtEU = np.empty((nb, U.size, U.size))
    for r in range(nb):
        EUtEU[r] = EU[r].T @ EU[r]  # symmetric rank-k update, one BLAS call per sample
    HUU = c * (G[np.ix_(U, U)][None] + scale * (1.0 - 2.0 * EUtEU))
    cand, ok = _support_candidates(HUU, A_loo, supports, pos, Mu, exact)
    if not exact:
        out = np.zeros((nb, q, d))
        out[:, :, U] = cand.transpose(0, 2, 1)
        return out, 0
    Gm = (
        c
        * (np.matmul(G[:, U], cand) + scale * (cand.sum(axis=1)[:, None, :] - 2.0 * np.matmul(Et, np.matmul(EU, cand))))
        - A_loo
    )  # (nb, d, q) gradients at the candidates
    out = np.zeros((nb, q, d))
    fails = 0
    for al, S in enumerate(supports):
        g = Gm[:, :, al]
        z = g - g[:, S].mean(axis=1, keepdims=True)
        z[:, S] = np.inf
        accept = ok[:, al] & (z.min(axis=1) >= -tol)
        out[np.ix_(accept, [al], U)] = cand[accept, :, al][:, None, :]
        for r in np.flatnonzero(~accept):
            Ei = E[r]

            def hsub(S, Ei=Ei, HU=HUU[r]):
                p = pos[S]
                if p.min() >= 0:  # face inside U: the corrected Hessian is already there
                    return HU[np.ix_(p, p)]
                ES = Ei[:, S]
                return H[np.ix_(S, S)] + c * scale * (1.0 - 2.0 * ES.T @ ES)

            def grad(S, muS, Ei=Ei, a=A_loo[r, :, al]):
                return c * (G[:, S] @ muS + scale * (muS.sum() - 2.0 * Ei.T @ (Ei[:, S] @ muS))) - a

            res = simplex_qp(hsub, grad, A_loo[r, :, al], S, Mu[al, S], tol, max_iter)
            out[r, al] = res.mu
            fails += not res.converged
    return out, fails


def loo_distributions(
    X,
    Ys,
    sigma2,
    G,
    A,
    Mu,
    lambda_a,
    tol,
    max_iter,
    n_jobs=1,
    report: Callable[[float], None] = lambda f: None,
    consume: Callable[[int, int, np.ndarray], None] | None = None,
    exact: bool = True,
):
    """``mu_alpha(X - x_i)`` for every (i, alpha), plus the count of unconverged QPs.

    Uses the exact rank corrections ``G^(-i) = G - 2 E_i^T E_i + 11^T`` and
    ``a^(-i) = a - 2 y_i E_i^T y + 1`` and warm-starts from the global solution. With
    ``consume``, each block of rows ``(start, stop, L_block)`` is handed over as it is solved
    and the (n, q, d) array is never formed (returns ``None`` in its place); without it the
    whole array is returned (small problems, tests).
    """
    n, d = X.shape
    args = (X, Ys, sigma2, G, A, Mu, lambda_a, tol, max_iter, exact)
    # Large blocks cut Python steps, but every thread needs several (small n, e.g. emotions).
    b = min(block_size(n, d, _LOO_BLOCK_BYTES), max(1, -(-n // (4 * n_jobs))))
    return _distribution_blocks(lambda s, e: _loo_block(*args, s, e), (n, Ys.shape[1], d), b, n_jobs, report, consume)


def _distribution_blocks(fn, shape, b, n_jobs, report, consume):
    """Run ``fn(start, stop) -> (distributions of those rows, #unconverged)`` over row blocks;
    hand each block to ``consume`` or, without one, gather the whole ``shape`` array."""
    L = None
    if consume is None:
        L = np.empty(shape)

        def consume(s: int, e: int, Lb: np.ndarray) -> None:
            L[s:e] = Lb

    fails = 0

    def take(s: int, e: int, part: tuple[np.ndarray, int]) -> None:
        nonlocal fails
        consume(s, e, part[0])
        fails += part[1]

    run_blocks(fn, shape[0], b, n_jobs, report, take)
    return L, fails


def _local_block(X, Ys, sigma2, lambda_a, tol, max_iter, k, s, e):
    """Local alignment distributions of samples ``s..e-1``: the Stage A QP on the ``k``
    nearest training neighbours of each x_i (x_i itself excluded), (e - s, q, d). Started at
    the best vertex like the global QPs: local supports are small and far from the global
    ones, so a warm start from ``mu_alpha(X)`` takes more active-set steps, not fewer."""
    n, d = X.shape
    q = Ys.shape[1]
    D = (X[s:e] ** 2).sum(1)[:, None] - 2.0 * X[s:e] @ X.T + (X**2).sum(1)[None, :]
    D[np.arange(e - s), np.arange(s, e)] = np.inf
    # Stable order (distance, then index) so ties and the training-row order do not matter.
    nbrs = np.argsort(D, axis=1, kind="stable")[:, :k]
    out = np.empty((e - s, q, d))
    fails = 0
    for r in range(e - s):
        idx = np.sort(nbrs[r])
        E = kernel_rows(X[idx], np.arange(k), sigma2)  # (k, k, d): all pairs of the neighbourhood
        Ef = E.reshape(-1, d)
        Yn = Ys[idx]
        G = (Ef.T @ Ef) / k**2
        A = np.einsum("jlt,ja,la->ta", E, Yn, Yn) / k**2
        out[r], f = solve_global(G, A, lambda_a, tol, max_iter)
        fails += f
    return out, fails


def local_distributions(
    X,
    Ys,
    sigma2,
    k,
    lambda_a,
    tol,
    max_iter,
    n_jobs=1,
    report: Callable[[float], None] = lambda f: None,
    consume: Callable[[int, int, np.ndarray], None] | None = None,
):
    """Local-alignment alternative to :func:`loo_distributions` (same interface): for every
    (i, alpha) the alignment QP of Stage A solved on the ``k`` nearest training neighbours of
    x_i instead of on the training set without x_i. One reading of the seed's "measure the
    importance distribution *at* the missing point" (缺失点处) and of the local kernel
    alignment of its reference [31]; unlike leave-one-out, it moves the distribution by O(1),
    not O(1/n)."""
    n, d = X.shape
    kk = int(min(k, n - 1))
    return _distribution_blocks(
        lambda s, e: _local_block(X, Ys, sigma2, lambda_a, tol, max_iter, kk, s, e),
        (n, Ys.shape[1], d),
        64,
        n_jobs,
        report,
        consume,
    )


# ---------------------------------------------------------------------------------------------
# PCA step, normaliser, reduced KRR.
# ---------------------------------------------------------------------------------------------


def pca_combine(Mu: np.ndarray, L: np.ndarray, centering: str) -> tuple[np.ndarray, np.ndarray]:
    """First principal component of ``B(i) = [mu_alpha(X); mu_alpha(X - x_i)]`` projected back.

    ``Mu`` (q, d) global, ``L`` (n, q, d) leave-one-out. Returns ``v`` (n, q, d) and the unit
    leading direction ``P`` (n, q, 2). ``row``: literal row centring, closed-form 2x2 leading
    eigenvector with the sign making ``p1 + p2 >= 0``. ``column``: each column centred, which
    gives ``P = (1, -1)/sqrt(2)`` and ``v = (mu(X) - mu(X - x_i)) / sqrt(2)`` (docs/methods/trans-ovk.md).
    """
    n, q, d = L.shape
    g = np.broadcast_to(Mu - 1.0 / d, L.shape)
    lc = L - 1.0 / d
    if centering == "column":
        P = np.empty((n, q, 2))
        P[..., 0] = 1.0 / np.sqrt(2.0)
        P[..., 1] = -1.0 / np.sqrt(2.0)
        v = (L - Mu[None]) * (-1.0 / np.sqrt(2.0))
        return v, P
    if centering != "row":
        raise ValueError(f"unknown pca_centering {centering!r}")
    c11 = np.einsum("iad,iad->ia", g, g)
    c22 = np.einsum("iad,iad->ia", lc, lc)
    c12 = np.einsum("iad,iad->ia", g, lc)
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
    v = p1[..., None] * g + p2[..., None] * lc
    return v, np.stack([p1, p2], axis=-1)


def normalize(v: np.ndarray, mode: str) -> np.ndarray:
    """The paper's unstated "normalise" along the last axis.

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


class SampleStats:
    """What stages D-G need from the sample-level distributions, folded in block by block.

    Each leave-one-out block is turned into its distributions (PCA step + normaliser) and
    reduced at once, so nothing of size n q d is held (Business at n = 4000: 420 MB a copy).
    A distribution ``mu_alpha(x_i)`` is built from ``mu_alpha(X)`` and ``mu_alpha(X - x_i)``
    only, so off the union of their supports every one of its entries equals one value (the
    normaliser maps equal inputs to equal outputs). It is kept exactly as its entries on the
    union ``U`` of all supports plus that off-support value: ``n q (|U| + 1)`` numbers instead
    of ``n q d`` (simplex-QP solutions are sparse, so ``|U|`` is usually a small part of d).

    Fitted fields: ``Kx`` (n, q, q), the stage-C label-correlation matrices;
    ``spread_sum`` (sum over i, alpha of ``||mu_alpha(x_i) - mu_alpha(X)||_1``); after
    :meth:`compact`: ``U`` (sorted feature indices), ``ZU`` (n, q, |U|), ``Zoff`` (n, q).
    """

    def __init__(self, Xs: np.ndarray, Mu: np.ndarray, centering: str, normalizer: str) -> None:
        n, d = Xs.shape
        q = Mu.shape[0]
        self.n, self.d = n, d
        self.Mu = Mu
        self.centering, self.normalizer = centering, normalizer
        self.Kx = np.empty((n, q, q))
        self.spread_sum = 0.0
        self._blocks: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        self._mu_support = Mu.sum(axis=0) > 0

    def add(self, s: int, e: int, Lb: np.ndarray) -> None:
        """Fold in the leave-one-out distributions ``Lb`` (e - s, q, d) of samples s..e-1."""
        v, _ = pca_combine(self.Mu, Lb, self.centering)
        Mb = normalize(v, self.normalizer)
        self.spread_sum += float(np.abs(Mb - self.Mu[None]).sum())
        self.Kx[s:e] = label_correlation(Mb)
        cols = np.flatnonzero(self._mu_support | (Lb != 0).any(axis=(0, 1)))
        rest = np.setdiff1d(np.arange(self.d), cols)
        off = Mb[:, :, rest[0]] if rest.size else np.zeros(Mb.shape[:2])
        self._blocks.append((s, e, cols, np.ascontiguousarray(Mb[:, :, cols]), off))

    def compact(self) -> None:
        """Assemble ``U``, ``ZU`` and ``Zoff`` from the folded blocks (call once, after the pass)."""
        U = np.unique(np.concatenate([b[2] for b in self._blocks])) if self._blocks else np.arange(0)
        q = self.Mu.shape[0]
        ZU = np.empty((self.n, q, U.size))
        Zoff = np.empty((self.n, q))
        for s, e, cols, vals, off in self._blocks:
            ZU[s:e] = off[:, :, None]
            ZU[s:e][:, :, np.searchsorted(U, cols)] = vals
            Zoff[s:e] = off
        self.U, self.ZU, self.Zoff = U, ZU, Zoff
        self._blocks = []


def normalize_compact(VU: np.ndarray, voff: np.ndarray, n_off: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`normalize` of vectors held as their entries on ``U`` (``VU`` (..., |U|)) plus one
    value ``voff`` (...) repeated on the other ``n_off`` features; same result, same layout."""
    if n_off == 0:
        return normalize(VU, mode), np.zeros(VU.shape[:-1])
    d = VU.shape[-1] + n_off
    voff = voff[..., None]
    if mode == "none":
        return np.array(VU, dtype=float), np.array(voff[..., 0], dtype=float)
    if mode == "softmax":
        top = np.maximum(VU.max(axis=-1, keepdims=True), voff)
        zU, zo = np.exp(VU - top), np.exp(voff - top)
        tot = zU.sum(axis=-1, keepdims=True) + n_off * zo
        return zU / tot, (zo / tot)[..., 0]
    lo = np.minimum(VU.min(axis=-1, keepdims=True), voff)
    span = np.maximum(VU.max(axis=-1, keepdims=True), voff) - lo
    const = span <= 0
    safe = np.where(const, 1.0, span)
    wU, wo = (VU - lo) / safe, (voff - lo) / safe
    if mode == "minmax":
        return np.where(const, 1.0 / d, wU), np.where(const, 1.0 / d, wo)[..., 0]
    if mode != "minmax_sum":
        raise ValueError(f"unknown normalizer {mode!r}")
    tot = np.where(const, 1.0, wU.sum(axis=-1, keepdims=True) + n_off * wo)
    return np.where(const, 1.0 / d, wU / tot), np.where(const, 1.0 / d, wo / tot)[..., 0]


def label_correlation_compact(WU: np.ndarray, woff: np.ndarray, n_off: int) -> np.ndarray:
    """``K_x = M M^T`` of compact distributions (see :func:`normalize_compact`): (n, q, q)."""
    return np.matmul(WU, WU.transpose(0, 2, 1)) + n_off * woff[:, :, None] * woff[:, None, :]


def ridge_map(Xs: np.ndarray, T: np.ndarray, rho: float) -> np.ndarray:
    """Ridge map ``P = (F F^T + rho I)^{-1} F T`` (d, m), no intercept (the paper's ``W x``).

    Solved in the smaller of the primal (d x d) and dual (n x n) systems; both give the same
    P (push-through identity).
    """
    n, d = Xs.shape
    if d <= n:
        A = Xs.T @ Xs
        A[np.diag_indices(d)] += rho
        return _chol_solve(np.linalg.cholesky(A), Xs.T @ T)
    K = Xs @ Xs.T
    K[np.diag_indices(n)] += rho
    return Xs.T @ _chol_solve(np.linalg.cholesky(K), T)


def _chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    return solve_triangular(L.T, solve_triangular(L, B, lower=True), lower=False)


def trace_features(K: np.ndarray) -> np.ndarray:
    """The distinct entries of each symmetric ``K_x`` (n, q, q) -> (n, q (q + 1) / 2), off-diagonal
    ones weighted by sqrt(2), so that ``F(x) . F(z) = <K_x, K_z>_F = tr K(x, z)``."""
    q = K.shape[1]
    iu = np.triu_indices(q)
    return K[:, iu[0], iu[1]] * np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))


@dataclass
class TraceHead:
    """Kernel ridge regression with the scalar kernel ``tr K(x, z)`` and an intercept per label,
    in primal form on :func:`trace_features`. The features are centred on the training mean
    and divided by their root mean square norm, so the kernel's mean diagonal is 1 and
    ``lambda_k`` is relative to its scale."""

    mean: np.ndarray
    scale: float
    coef: np.ndarray
    intercept: np.ndarray
    lambda_k: float

    def scores(self, F: np.ndarray) -> np.ndarray:
        return ((F - self.mean) / self.scale) @ self.coef + self.intercept


def trace_head_path(F: np.ndarray, Ys: np.ndarray, lambdas) -> tuple[list[TraceHead], list[np.ndarray]]:
    """:class:`TraceHead` fits for every ``lambda_k`` in ``lambdas`` (penalty ``n lambda_k``, as
    the paper's ``n lambda I``) and their exact leave-one-out scores on the training rows, from
    one SVD of the centred features."""
    n = F.shape[0]
    mean = F.mean(axis=0)
    Fc = F - mean
    scale = float(np.sqrt((Fc**2).sum() / n))
    if not scale > 0:
        scale = 1.0
    Fc /= scale
    ym = Ys.mean(axis=0)
    Yc = Ys - ym
    Uf, s, Vt = np.linalg.svd(Fc, full_matrices=False)
    UtY = Uf.T @ Yc
    heads, loos = [], []
    for lam in lambdas:
        shrink = s**2 / (s**2 + n * lam)
        fit = Uf @ (shrink[:, None] * UtY)
        h = np.minimum((Uf**2) @ shrink + 1.0 / n, 1.0 - 1e-12)
        loos.append(Ys - (Yc - fit) / (1.0 - h)[:, None])
        coef = Vt.T @ ((s / (s**2 + n * lam))[:, None] * UtY)
        heads.append(TraceHead(mean, scale, coef, ym, float(lam)))
    return heads, loos


def f1_thresholds(S: np.ndarray, Yb: np.ndarray) -> np.ndarray:
    """Per label, the score threshold that maximises that label's F1 on ``(S, Yb)``: midway
    between the k-th and (k+1)-th highest score for the best k. A label with no positive
    example gets +inf (never predicted)."""
    n, q = S.shape
    out = np.full(q, np.inf)
    for a in range(q):
        pos = Yb[:, a].sum()
        if pos == 0:
            continue
        order = np.argsort(-S[:, a], kind="stable")
        s = S[order, a]
        tp = np.cumsum(Yb[order, a])
        k = np.arange(1, n + 1)
        f1 = 2.0 * tp / (k + pos)
        f1[:-1][s[1:] == s[:-1]] = -1.0  # a cut must fall between two different scores
        b = int(np.argmax(f1))
        out[a] = 0.5 * (s[b] + s[b + 1]) if b + 1 < n else s[b] - 1.0
    return out


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
