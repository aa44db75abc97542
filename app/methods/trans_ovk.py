"""TRANS-OVK: transformable operator-valued kernel learned by kernel alignment.

WANG Zhenxin, CHEN Degang, CHE Xiaoya, "Transformable operator-valued kernels driven by
multi-label datasets", CAAI Trans. Intelligent Systems 21(2), 2026 (doi 10.11992/tis.202503021).
Training is the paper's stages: (A) per label, per-feature Gaussian kernels aligned to ``y y^T``
(a QP on the simplex); (B) the same QP with each training sample left out, by exact rank
corrections; (C) a 2x2 PCA and a normaliser per (sample, label), the sample-level distribution;
(D) ``K_x = M_x M_x^T`` and ``K(x, z) = K_x K_z``; (E) kernel ridge regression in rank-q form;
(F) a ridge map per label from x to its distribution, for unseen samples. docs/methods/trans-ovk.md
describes each stage, the readings chosen and the reproduction figures.

Read literally (``LITERAL_READING``) the method collapses: the KRR is fitted on training K_x
that come from the samples' own labels (B) while unseen samples' come from the ridge map. The
default keeps A-C and the maps and fixes the head: every K_x from the map
(``kernel_inputs='mapped'``), ridge regression on the scalar kernel ``tr K(x, z)``
(``head='trace'``), penalties and per-label thresholds by exact leave-one-out on the training
data. Stages A-C are approximated by default (``max_alignment_samples``, ``loo_solver``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field
from sklearn.exceptions import ConvergenceWarning

from app.methods import ovk_kernels as ok
from app.methods.base import (
    MAX_NEIGHBOURS,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    MultiLabelClassifierMixin,
    ProgressFn,
    check_features,
)
from app.scoring import average_precision, micro_f1

Centering = Literal["row", "column"]
Normalizer = Literal["minmax_sum", "minmax", "softmax", "none"]
KOrder = Literal["literal", "standard"]
KernelInputs = Literal["mapped", "loo"]
Head = Literal["trace", "ovk"]
LooSolver = Literal["exact", "fixed_support"]

#: The paper read literally (row centring, min-max-sum normaliser,
#: the operator-valued KRR in the printed order with the leading factor, training K_x from the
#: leave-one-out step, penalties 0.01, threshold 0); pass as ``TransOVK(**LITERAL_READING)``.
LITERAL_READING: dict[str, Any] = dict(
    pca_centering="row",
    normalizer="minmax_sum",
    kernel_inputs="loo",
    head="ovk",
    k_order="literal",
    self_factor=True,
    lambda_w=0.01,
    lambda_k=0.01,
    threshold=0.0,
    loo_solver="exact",
    max_alignment_samples=None,
)

#: Candidate ridge-map penalties when ``lambda_w=None``, and trace-head penalties when ``lambda_k=None``.
LAMBDA_W_GRID = (0.01, 0.1, 1.0, 10.0)
LAMBDA_K_GRID = tuple(10.0**e for e in range(-8, 1))
# The 'ovk' head's penalty when lambda_k is None (the paper states none; a small ridge).
_OVK_LAMBDA_K = 0.01

# Share of the whole fit spent in each stage, for progress fractions (measured on yeast and
# scene: the leave-one-out pass, n*q warm-started QPs, dominates).
_STAGES = (("alignment", 0.30), ("leave-one-out", 0.65), ("kernel", 0.03), ("solve", 0.02))
# Bytes of predicted (rows, q, d) distributions per prediction chunk.
_PREDICT_BYTES = 16 * 2**20


class TransOVKParams(MethodParams):
    """Hyperparameters of TRANS-OVK; the paper states none of their values."""

    sigma: float | None = Field(
        None,
        gt=0,
        description="Width of the per-feature Gaussian kernels exp(-d^2/sigma^2); "
        "None = median heuristic (median non-zero squared per-feature difference, fixed seed).",
    )
    lambda_a: float = Field(1.0, gt=0, description="Weight of ||K_mu||_F^2 in the alignment QP.")
    lambda_w: float | None = Field(
        None,
        gt=0,
        description="Ridge penalty of the x -> mu_alpha(x) maps; None = chosen from "
        f"{list(LAMBDA_W_GRID)} by the leave-one-out average precision of the training data.",
    )
    lambda_k: float | None = Field(
        None,
        gt=0,
        description="Kernel ridge penalty (kernel + n lambda_k I), relative to the kernel's scale for the "
        "'trace' head; None = chosen by exact leave-one-out average precision on the training data "
        "('trace' head) or 0.01 ('ovk' head).",
    )
    pca_centering: Centering = Field(
        "row",
        description="Centre each row of the 2 x d PCA matrix (the paper's text, default) or each "
        "column (gives the leave-one-out influence mu(X) - mu(X - x_i)).",
    )
    normalizer: Normalizer = Field(
        "minmax_sum",
        description="The paper's unstated 'normalise' of the PCA output "
        "(min-max then divide by the sum, a distribution); 'none' keeps the signed output.",
    )
    kernel_inputs: KernelInputs = Field(
        "mapped",
        description="Where the training samples' K_x come from: 'mapped' (default) = the fitted ridge map, "
        "as for unseen samples, so the kernel is one function of x for training and test samples; 'loo' = "
        "the stage-C distributions, which use the sample's own labels (the paper).",
    )
    head: Head = Field(
        "trace",
        description="'trace' (default) = kernel ridge regression with the scalar kernel tr K(x, z) = "
        "<K_x, K_z>_F and an intercept per label; 'ovk' = the paper's operator-valued KRR (k_order, "
        "self_factor apply).",
    )
    k_order: KOrder = Field("literal", description="('ovk' head): K(x_i, x) as printed or K(x, x_i).")
    self_factor: bool = Field(True, description="('ovk' head): keep the leading K(x, x)^T factor in g(x).")
    threshold: float | None = Field(
        None,
        description="Label set = scores above this value; None = per-label thresholds that maximise each "
        "label's F1 on leave-one-out training scores, plus the top label for a sample left empty when that "
        "raises the training micro-F1 (the literal rule is 0).",
    )
    local_k: int | None = Field(
        None,
        ge=2,
        le=MAX_NEIGHBOURS,
        description="None = the paper's X - x_i, leave-one-out alignment "
        "(default); k = alternative reading 'alignment at the point x_i': the alignment QP on "
        "the k nearest training neighbours of x_i (local kernel alignment, ref. [31]).",
    )
    loo_solver: LooSolver = Field(
        "fixed_support",
        description="Stage B: 'exact' = every leave-one-out QP solved to its KKT point (active-set repair "
        "when the support changes); 'fixed_support' (default, approximate) = each leave-one-out solution "
        "kept on its label's global support (face minimiser, negative weights clipped), which removes the "
        "one-at-a-time repairs that dominate the cost on sparse data.",
    )
    max_alignment_samples: int | None = Field(
        600,
        ge=2,
        le=50_000,
        description="Stages A-C (alignment, leave-one-out, PCA) and the ridge maps run on at most this many "
        "training samples (every (n/m)-th in lexicographic order of (x, y), so the choice does not depend "
        "on the row order); the kernel and the head use all of them. None = all (the paper).",
    )
    qp_tol: float = Field(1e-10, gt=0, description="KKT tolerance of the scaled alignment QPs.")
    qp_max_iter: int = Field(1000, ge=1, le=100_000, description="Active-set iterations per QP.")
    n_jobs: int = Field(1, ge=1, description="Threads for the streamed kernel passes.")


class ConstantRankingWarning(UserWarning):
    """Every training sample gets the same label ranking: the learned kernel does not depend on the
    input, so the model is no better than a fixed ranking."""


class EmptyLabelSetWarning(UserWarning):
    """The label-set rule predicts an empty set for every training sample."""


class TransOVK(MultiLabelClassifierMixin, MethodEstimator):
    """Multi-label classifier with a learned transformable operator-valued kernel.

    docs/methods/trans-ovk.md explains each reading and its default.

    Parameters
    ----------
    sigma : float or None, default=None
        Width of the per-feature Gaussian kernels exp(-d^2 / sigma^2); None = median heuristic.
    lambda_a : float, default=1.0
        Weight of ||K_mu||_F^2 in the alignment QP.
    lambda_w : float or None, default=None
        Ridge penalty of the x -> mu_alpha(x) maps; None = chosen from ``LAMBDA_W_GRID`` by the
        leave-one-out average precision of the training data.
    lambda_k : float or None, default=None
        Kernel ridge penalty; None = chosen by exact leave-one-out average precision on the
        training data ('trace' head) or 0.01 ('ovk' head).
    pca_centering : {"row", "column"}, default="row"
        Centre each row of the 2 x d PCA matrix (the paper's text) or each column (the
        leave-one-out influence mu(X) - mu(X - x_i)).
    normalizer : {"minmax_sum", "minmax", "softmax", "none"}, default="minmax_sum"
        The paper's unstated "normalise" of the PCA output.
    kernel_inputs : {"mapped", "loo"}, default="mapped"
        Where the training samples' K_x come from: the fitted ridge map (as for unseen samples)
        or the leave-one-out distributions (the paper).
    head : {"trace", "ovk"}, default="trace"
        Kernel ridge regression with the scalar kernel tr K(x, z) and an intercept per label, or
        the paper's operator-valued KRR.
    k_order : {"literal", "standard"}, default="literal"
        ('ovk' head) K(x_i, x) as printed, or K(x, x_i).
    self_factor : bool, default=True
        ('ovk' head) keep the leading K(x, x)^T factor of g(x).
    threshold : float or None, default=None
        Label set = scores above this value; None = per-label thresholds learned on the
        leave-one-out training scores.
    local_k : int or None, default=None
        None = the leave-one-out alignment X - x_i; k = alignment on the k nearest training
        neighbours of x_i (local kernel alignment).
    loo_solver : {"fixed_support", "exact"}, default="fixed_support"
        Leave-one-out QPs solved to their KKT points, or (approximate) kept on each label's
        global support, which removes the active-set repairs that dominate the cost.
    max_alignment_samples : int or None, default=600
        The alignment, leave-one-out and PCA stages and the ridge maps run on at most this many
        training samples (an order-free choice); the kernel and the head use all. None = all.
    qp_tol : float, default=1e-10
        KKT tolerance of the scaled alignment QPs.
    qp_max_iter : int, default=1000
        Active-set iterations per QP.
    n_jobs : int, default=1
        Threads for the streamed kernel passes.

    Attributes
    ----------
    classes_ : list of ndarray
        ``[array([0, 1])] * q``.
    x_min_, x_span_ : ndarray of shape (d,)
        Min-max scaling fitted on the training data (a constant feature is only shifted).
    sigma2_ : float
        The squared kernel width used.
    mu_global_ : ndarray of shape (q, d)
        Global feature-importance distribution of each label.
    distribution_spread_ : float
        Mean L1 distance between sample-level and global distributions; near 0 means the
        leave-one-out distributions hardly depend on the sample.
    n_qp_unconverged_ : int
        Alignment QPs that stopped at ``qp_max_iter``.
    map_support_, map_coef_ : ndarray
        The ridge map: features where the distributions can differ from one off-support value,
        and its coefficients (d, q (|U| + 1)).
    lambda_w_, lambda_k_ : float
        The penalties used.
    trace_head_ : object or None
        The 'trace' head; for the 'ovk' head ``beta_`` (q,), ``coef_`` (n, q) and ``T_``
        (q, q, q) instead.
    thresholds_ : ndarray of shape (q,)
        The label-set rule, with ``fill_empty_``.
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from app.methods.trans_ovk import TransOVK
    >>> X = np.c_[np.r_[np.linspace(0, 0.9, 10), np.linspace(2, 2.9, 10)], np.random.default_rng(0).random(20)]
    >>> Y = np.array([[1, 0]] * 10 + [[0, 1]] * 10)
    >>> model = TransOVK(sigma=0.5).fit(X, Y)
    >>> model.mu_global_.round(2)  # both labels rely on the informative first feature
    array([[1., 0.],
           [1., 0.]])
    >>> model.decision_function(X[:3]).shape
    (3, 2)
    """

    _params_model = TransOVKParams

    def __init__(
        self,
        sigma: float | None = None,
        *,
        lambda_a: float = 1.0,
        lambda_w: float | None = None,
        lambda_k: float | None = None,
        pca_centering: Centering = "row",
        normalizer: Normalizer = "minmax_sum",
        kernel_inputs: KernelInputs = "mapped",
        head: Head = "trace",
        k_order: KOrder = "literal",
        self_factor: bool = True,
        threshold: float | None = None,
        local_k: int | None = None,
        loo_solver: LooSolver = "fixed_support",
        max_alignment_samples: int | None = 600,
        qp_tol: float = 1e-10,
        qp_max_iter: int = 1000,
        n_jobs: int = 1,
    ) -> None:
        self.sigma = sigma
        self.lambda_a = lambda_a
        self.lambda_w = lambda_w
        self.lambda_k = lambda_k
        self.pca_centering = pca_centering
        self.normalizer = normalizer
        self.kernel_inputs = kernel_inputs
        self.head = head
        self.k_order = k_order
        self.self_factor = self_factor
        self.threshold = threshold
        self.local_k = local_k
        self.loo_solver = loo_solver
        self.max_alignment_samples = max_alignment_samples
        self.qp_tol = qp_tol
        self.qp_max_iter = qp_max_iter
        self.n_jobs = n_jobs

    # ----------------------------------------------------------------------------- training

    def _fit(self, X: np.ndarray, Y: np.ndarray, report: ProgressFn) -> None:
        # min-max with constant features kept, stored as ``x_min_`` / ``x_span_`` (what artifacts hold)
        self.x_min_, self.x_span_ = ok.minmax_fit(X)
        Xs = (X - self.x_min_) / self.x_span_
        Ys = np.where(Y > 0, 1.0, -1.0)
        self.n_labels_ = Y.shape[1]
        self.sigma2_ = self.sigma**2 if self.sigma is not None else ok.median_sigma2(Xs)
        self.alignment_rows_ = _alignment_rows(Xs, Ys, self.max_alignment_samples)
        rows = self.alignment_rows_
        (stats,) = self._distribution_stats(
            Xs[rows], Ys[rows], self.sigma2_, [(self.pca_centering, self.normalizer)], _staged(report)
        )
        self.distribution_spread_ = stats.spread_sum / (rows.size * Y.shape[1])
        if self.n_qp_unconverged_:
            warnings.warn(
                f"{self.n_qp_unconverged_} alignment QPs stopped at qp_max_iter={self.qp_max_iter} "
                f"without reaching the KKT tolerance {self.qp_tol:g}",
                ConvergenceWarning,
                stacklevel=3,
            )
        self._fit_head(Xs, Ys, stats, _staged(report), rows)
        self._check_degenerate()

    def _distribution_stats(self, Xs, Ys, sigma2, readings: Sequence[tuple[str, str]], report) -> list[ok.SampleStats]:
        """Stages A-C, the expensive part: global and leave-one-out distributions (A, B), each
        leave-one-out block turned into sample-level distributions (C) for every
        ``(pca_centering, normalizer)`` in ``readings`` and reduced to what the head needs, so
        no (n, q, d) array is ever held. Several readings can share one alignment pass (the
        stage-C statistics of each are folded in side by side)."""
        report("alignment", 0.0)
        G, A = ok.alignment_stats(Xs, Ys, sigma2, self.n_jobs, lambda f: report("alignment", f))
        Mu, fails = ok.solve_global(G, A, self.lambda_a, self.qp_tol, self.qp_max_iter)
        stats = [ok.SampleStats(Xs, Mu, c, nz) for c, nz in readings]

        def feed(s: int, e: int, Lb: np.ndarray) -> None:
            for st in stats:
                st.add(s, e, Lb)

        report("leave-one-out", 0.0)
        if self.local_k is None:
            _, loo_fails = ok.loo_distributions(
                Xs,
                Ys,
                sigma2,
                G,
                A,
                Mu,
                self.lambda_a,
                self.qp_tol,
                self.qp_max_iter,
                self.n_jobs,
                lambda f: report("leave-one-out", f),
                consume=feed,
                exact=self.loo_solver == "exact",
            )
        else:
            _, loo_fails = ok.local_distributions(
                Xs,
                Ys,
                sigma2,
                self.local_k,
                self.lambda_a,
                self.qp_tol,
                self.qp_max_iter,
                self.n_jobs,
                lambda f: report("leave-one-out", f),
                consume=feed,
            )
        for st in stats:
            st.compact()
        self.mu_global_ = Mu
        self.n_qp_unconverged_ = int(fails + loo_fails)
        return stats

    def _fit_head(self, Xs, Ys, stats: ok.SampleStats, report, rows: np.ndarray | None = None) -> None:
        """Stages D-G: ridge maps, K_x, kernel ridge regression, label-set rule. Cheap next to
        stages A-C.

        The operator-valued kernel must be one function of x for training and unseen samples
        alike. The stage-C distributions of a training sample use its own labels (through its
        leave-one-out problem), an unseen sample's come from the ridge map, so the paper's
        KRR fits on kernel values that never occur at prediction time. ``kernel_inputs=
        'mapped'`` evaluates the training samples' K_x through the same fitted ridge map.
        (Leave-one-out map predictions instead leak the sample's labels with the opposite
        sign: removing z_i shifts the prediction away from it, and a weakly penalised head
        learns that shift; measured on yeast, leave-one-out AP 0.87 against 0.73 on test.)"""
        d = Xs.shape[1]
        rows = np.arange(Xs.shape[0]) if rows is None else rows
        m = rows.size
        report("kernel", 0.0)
        self.map_support_ = stats.U
        n_off = d - stats.U.size
        targets = np.concatenate([stats.ZU.reshape(m, -1), stats.Zoff], axis=1)
        if self.kernel_inputs == "loo":  # the stage-C K_x exist for the alignment rows only
            Ys = Ys[rows]
        elif self.kernel_inputs != "mapped":
            raise ValueError(f"unknown kernel_inputs {self.kernel_inputs!r}")
        Yb = Ys > 0
        lw_grid = LAMBDA_W_GRID if self.lambda_w is None else (self.lambda_w,)
        best: tuple | None = None
        for lw in lw_grid:
            P = ok.ridge_map(Xs[rows], targets, m * lw)
            K = self._kx_from_outputs(Xs @ P, stats.U.size, n_off) if self.kernel_inputs == "mapped" else stats.Kx
            fit = self._fit_scores(K, Ys)
            score = average_precision(Yb, fit[1]) if len(lw_grid) > 1 else 0.0
            if best is None or score > best[0]:
                best = (score, lw, P, fit)
        assert best is not None
        _, self.lambda_w_, P, (head_state, train_scores, fitted) = best
        self.map_coef_ = np.ascontiguousarray(P)
        report("kernel", 1.0)
        report("solve", 0.0)
        self._set_head(head_state)
        self._fit_label_rule(train_scores, Yb)
        self._train_scores_ranking_count = _n_rankings(fitted)
        self._train_empty_rate = float((self._label_sets(train_scores).sum(axis=1) == 0).mean())
        report("solve", 1.0)

    def _fit_scores(self, K: np.ndarray, Ys: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        """Fit the head on training K_x; returns its state, scores of the training samples by
        fits that did not see them (trace head: exact leave-one-out; ovk head: in-sample, it
        has no cheap leave-one-out form) and the in-sample scores."""
        if self.head == "trace":
            F = ok.trace_features(K)
            lk_grid = LAMBDA_K_GRID if self.lambda_k is None else (self.lambda_k,)
            heads, loos = ok.trace_head_path(F, Ys, lk_grid)
            k = int(np.argmax([average_precision(Ys > 0, L) for L in loos])) if len(lk_grid) > 1 else 0
            return heads[k], loos[k], heads[k].scores(F)
        if self.head != "ovk":
            raise ValueError(f"unknown head {self.head!r}")
        lk = _OVK_LAMBDA_K if self.lambda_k is None else self.lambda_k
        beta, C, T = ok.krr_reduced(K, Ys, lk)
        fitted = self._ovk_scores(K, beta, T)
        return (lk, beta, C, T), fitted, fitted

    def _set_head(self, state: Any) -> None:
        if self.head == "trace":
            self.trace_head_ = state
            self.lambda_k_ = state.lambda_k
            self.beta_ = self.coef_ = self.T_ = None
        else:
            self.trace_head_ = None
            self.lambda_k_, self.beta_, self.coef_, self.T_ = state

    def _fit_label_rule(self, S: np.ndarray, Yb: np.ndarray) -> None:
        """The label-set rule: a fixed threshold, or (``threshold=None``) per-label F1 thresholds learned on the
        held-out training scores and the top label for empty sets when that helps there."""
        q = Yb.shape[1]
        if self.threshold is not None:
            self.thresholds_ = np.full(q, float(self.threshold))
            self.fill_empty_ = False
            return
        self.thresholds_ = ok.f1_thresholds(S, Yb)
        self.fill_empty_ = False
        plain = micro_f1(Yb, self._label_sets(S))
        self.fill_empty_ = True
        self.fill_empty_ = bool(micro_f1(Yb, self._label_sets(S)) >= plain)

    def _check_degenerate(self) -> None:
        if self._train_scores_ranking_count <= 1:
            warnings.warn(
                "every training sample gets the same label ranking: the learned kernel does not depend on the "
                "input (try pca_centering, kernel_inputs='mapped' or head='trace')",
                ConstantRankingWarning,
                stacklevel=4,
            )
        if self._train_empty_rate >= 1.0:
            warnings.warn(
                "the label-set rule predicts an empty set for every training sample "
                f"(thresholds {np.round(self.thresholds_, 6).tolist()[:5]}...; threshold=None learns them)",
                EmptyLabelSetWarning,
                stacklevel=4,
            )

    # ---------------------------------------------------------------------------- prediction

    def _kx_from_outputs(self, V: np.ndarray, u: int, n_off: int) -> np.ndarray:
        """K_x from ridge-map outputs laid out as ``[entries on U (q u) | off value (q)]``."""
        q = self.n_labels_
        VU = V[:, : q * u].reshape(-1, q, u)
        W, woff = ok.normalize_compact(VU, V[:, q * u :], n_off, self.normalizer)
        return ok.label_correlation_compact(W, woff, n_off)

    def predict_distributions(self, X: np.ndarray) -> np.ndarray:
        """Sample-level distributions of unseen samples, N(W_alpha x): (p, q, d)."""
        return self._predict_distributions(check_features(self, X))

    def _predict_distributions(self, X: np.ndarray) -> np.ndarray:
        Xs = (X - self.x_min_) / self.x_span_
        V = Xs @ self.map_coef_
        q, d, U = self.n_labels_, self.n_features_in_, self.map_support_
        W, woff = ok.normalize_compact(
            V[:, : q * U.size].reshape(-1, q, U.size), V[:, q * U.size :], d - U.size, self.normalizer
        )
        M = np.repeat(woff[:, :, None], d, axis=2)
        M[:, :, U] = W
        return M

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores g(x) (p, q); higher = more relevant. Rows go in chunks so the predicted
        distributions stay small whatever p is."""
        return self._decision_function(check_features(self, X))

    def _decision_function(self, X: np.ndarray) -> np.ndarray:
        width = self.n_labels_ * (self.map_support_.size + 1)
        step = max(1, _PREDICT_BYTES // (8 * width))
        return (
            np.concatenate([self._scores(X[s : s + step]) for s in range(0, X.shape[0], step)])
            if X.shape[0]
            else np.empty((0, self.n_labels_))
        )

    def _scores(self, X: np.ndarray) -> np.ndarray:
        Xs = (X - self.x_min_) / self.x_span_
        U = self.map_support_
        Kt = self._kx_from_outputs(Xs @ self.map_coef_, U.size, self.n_features_in_ - U.size)
        if self.trace_head_ is not None:
            return self.trace_head_.scores(ok.trace_features(Kt))
        beta, T = self.beta_, self.T_
        assert beta is not None and T is not None  # set by _set_head for the 'ovk' head
        return self._ovk_scores(Kt, beta, T)

    def _ovk_scores(self, Kt: np.ndarray, beta: np.ndarray, T: np.ndarray) -> np.ndarray:
        """The paper's g(x) = K(x, x)^T k_x^T C in its exact reduced forms."""
        if self.k_order == "literal":
            h = np.einsum("abc,pbc->pa", T, Kt)
        else:
            h = Kt @ beta
        if self.self_factor:
            h = np.einsum("pab,pb->pa", Kt, np.einsum("pab,pb->pa", Kt, h))
        return h

    def _label_sets(self, S: np.ndarray) -> np.ndarray:
        Z = S > self.thresholds_[None, :]
        if self.fill_empty_ and S.shape[1]:
            empty = ~Z.any(axis=1)
            Z[np.flatnonzero(empty), np.argmax(S[empty], axis=1)] = True
        return Z

    def predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        """Label sets: the learned rule (``thresholds_``, ``fill_empty_``), or every score above
        ``threshold`` when one is given."""
        return self._predict(check_features(self, X), threshold)

    def _predict(self, X: np.ndarray, threshold: float | None = None) -> np.ndarray:
        S = self._decision_function(X)
        if threshold is not None:
            return (S > threshold).astype(np.int64)
        return self._label_sets(S).astype(np.int64)


def _alignment_rows(Xs: np.ndarray, Ys: np.ndarray, cap: int | None) -> np.ndarray:
    """All rows, or ``cap`` rows evenly spaced in the lexicographic order of ``(x, y)``: a
    deterministic choice that does not depend on how the training rows are ordered."""
    n = Xs.shape[0]
    if cap is None or n <= cap:
        return np.arange(n)
    order = np.lexsort(np.concatenate([Xs, Ys], axis=1).T[::-1])
    return np.sort(order[np.linspace(0, n - 1, cap).round().astype(int)])


def _n_rankings(S: np.ndarray) -> int:
    """Number of distinct label rankings (ties broken by label index) among the rows of S."""
    if S.shape[0] == 0:
        return 0
    order = np.argsort(-S, axis=1, kind="stable")
    return int(np.unique(order, axis=0).shape[0])


def _staged(report: ProgressFn):
    """Map (stage, fraction within stage) to the whole-fit fraction the job API expects."""
    start = {}
    acc = 0.0
    for name, w in _STAGES:
        start[name] = (acc, w)
        acc += w

    def call(stage: str, f: float) -> None:
        s, w = start[stage]
        report(stage, min(1.0, s + w * f))

    return call


SPEC = MethodSpec(
    id="trans-ovk",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=TransOVKParams,
    estimator=TransOVK,
    summary="Operator-valued kernel from per-sample feature-importance distributions learned by "
    "kernel alignment (leave-one-out + 2x2 PCA), with rank-q kernel ridge regression.",
    paper="WANG Zhenxin, CHEN Degang, CHE Xiaoya. Transformable operator-valued kernels driven "
    "by multi-label datasets. CAAI Trans. Intelligent Systems 21(2):365-374, 2026. "
    "doi:10.11992/tis.202503021",
    stages=tuple(name for name, _ in _STAGES),
)
