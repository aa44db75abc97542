"""ECC: an ensemble of classifier chains over logistic regression.

Read, Pfahringer, Holmes and Frank's classifier chains: label j's logistic regression sees the
features plus the labels before it in the chain (true labels when fitting, the chain's own 0/1
predictions when predicting). ``n_chains`` chains in random orders (chain i seeded
``random_state + i``) are averaged; the label set is every label above one threshold learned on
inner out-of-fold scores (``threshold="cv"``, ``app.methods.thresholds``). A label constant in the
training data is left out of the chains (a constant feature moves nothing) and predicted with
its constant.

Fitting is scikit-learn's ``ClassifierChain`` (``cv=None``) unrolled, same orders and links: given
the true labels a chain's links are independent problems, fitted side by side by ``n_jobs``
worker processes (``app.methods.per_label``), one chain at a time. Prediction replays the chains
in NumPy from the fitted coefficients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy import sparse
from scipy.special import expit

from app.methods.base import (
    MAX_LBFGS_ITER,
    DataShape,
    MemoryEstimate,
    MethodEstimator,
    MethodParams,
    MethodSpec,
    ProgressFn,
    draw_seed,
)
from app.methods.baseline_support import MinMaxOption, ProbabilityClassifierMixin
from app.methods.per_label import Fitted, Problem, design_matrix, fit_logistic
from app.methods.thresholds import THRESHOLD_DOC, LearnedThresholdMixin, ThresholdParam


class ECCParams(MethodParams):
    n_chains: int = Field(
        5,
        ge=1,
        le=100,
        description="Number of classifier chains, each in its own random label order (each costs a binary relevance "
        "fit; papers use 10).",
    )
    C: float = Field(1.0, gt=0, description="Inverse L2 regularisation strength of every logistic regression.")
    max_iter: int = Field(1000, ge=1, le=MAX_LBFGS_ITER, description="L-BFGS iteration cap per link.")
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set first (part of the model)."
    )
    random_state: int | None = Field(0, description="Chain i's label order is seeded random_state + i.")
    n_jobs: int | None = Field(
        None,
        description="Worker processes fitting links side by side (None = 1, -1 = all cores); results do not depend on it.",
    )
    threshold: ThresholdParam = Field("cv", description=THRESHOLD_DOC)


class _Chain:
    """One fitted chain as plain arrays: link t predicts label ``order[t]`` (among the varying labels)."""

    def __init__(self, order: np.ndarray, links: Sequence[Fitted], d: int) -> None:
        m = len(links)
        self.order = np.asarray(order, dtype=np.intp)
        self.Wx = np.vstack([link.coef[:d] for link in links])  # (m, d)
        self.Wy = np.zeros((m, m))  # link t's weights on the predictions of links 0..t-1
        for t, link in enumerate(links):
            self.Wy[t, :t] = link.coef[d:]
        self.b = np.array([link.intercept for link in links])

    def proba(self, Xs: Any) -> np.ndarray:
        """Probabilities (n, m) of the varying labels, in label (not chain) order (``Xs`` dense or CSR)."""
        Z = np.asarray(Xs @ self.Wx.T) + self.b
        m = Z.shape[1]
        fed = np.zeros_like(Z)  # the chain's 0/1 predictions (LogisticRegression.predict: z > 0)
        for t in range(1, m):
            fed[:, t - 1] = Z[:, t - 1] > 0
            Z[:, t] += fed[:, :t] @ self.Wy[t, :t]
        out = np.empty_like(Z)
        out[:, self.order] = expit(Z)
        return out


class EnsembleClassifierChains(LearnedThresholdMixin, ProbabilityClassifierMixin, MinMaxOption, MethodEstimator):
    """Mean probability of ``n_chains`` random-order classifier chains; parameters as :class:`ECCParams`.

    Fitted attributes: ``n_features_in_``, ``scaling_``, ``chains_`` (the chains as arrays, over
    the labels that are not ``constant_``), ``constant_value_`` (q,), ``n_iter_`` the largest
    L-BFGS iteration count of any link.
    """

    _params_model = ECCParams
    predicts_constant_labels = True
    accepts_sparse = True  # ClassifierChain stacks CSR features with the labels as CSR

    def __init__(
        self,
        *,
        n_chains: int = 5,
        C: float = 1.0,
        max_iter: int = 1000,
        scale: Literal["none", "minmax"] = "minmax",
        random_state: int | None = 0,
        n_jobs: int | None = None,
        threshold: float | str = "cv",
    ) -> None:
        self.n_chains = n_chains
        self.C = C
        self.max_iter = max_iter
        self.scale = scale
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.threshold = threshold

    def _fit(self, Xs: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        seeds = (draw_seed() if self.random_state is None else self.random_state) + np.arange(self.n_chains)
        self.chains_: list[_Chain] = []
        self.n_iter_ = 0
        varying = ~self.constant_
        progress("chains", 0.0)
        if varying.any():
            Yv = Y[:, varying]
            m, d = Yv.shape[1], Xs.shape[1]
            design = design_matrix(Xs)
            for i, seed in enumerate(seeds):  # one chain's matrix at a time: n x (d + m) each
                order = np.random.RandomState(int(seed)).permutation(m)
                labels = Yv[:, order]
                chained = (
                    sparse.hstack([design, sparse.csr_matrix(labels)], format="csr")
                    if sparse.issparse(design)
                    else np.hstack([design, labels])
                )
                links = fit_logistic(  # link t: the features and the true labels order[:t]
                    [Problem(chained, d + t, labels[:, t]) for t in range(m)],
                    C=self.C,
                    max_iter=self.max_iter,
                    n_jobs=self.n_jobs,
                    report=partial(self._report_chain, progress, i),
                )
                self.chains_.append(_Chain(order, links, d))
                self.n_iter_ = max([self.n_iter_] + [link.n_iter for link in links])
        progress("chains", 1.0)
        self._learn_threshold(Xs, Y, progress, seed=int(seeds[0]) if len(seeds) else 0)

    def _report_chain(self, progress: ProgressFn, chain: int, fraction: float) -> None:
        progress("chains", (chain + fraction) / self.n_chains)

    @classmethod
    def memory_estimate(cls, shape: DataShape, params: Mapping[str, Any]) -> MemoryEstimate:
        """The model is each chain's (q, d) feature and (q, q) label weights; the fit holds the
        input, its scaled copy, the targets, the chain's features-plus-labels matrix and the
        column slice of it that one link's logistic regression is fitted on."""
        chains = int(params.get("n_chains", 5))
        model = 8 * chains * shape.q * (shape.d + shape.q + 2) + 8 * shape.d * 3
        x = shape.feature_bytes(True)
        augmented = x + (12 if shape.nnz is not None else 8) * shape.n * shape.q
        peak = 2 * x + shape.label_bytes + 2 * augmented + model + 8 * (8 * shape.n + 30 * (shape.d + shape.q))
        return MemoryEstimate(peak, model)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """0.1.x artifacts (fitted before the template ``fit``) hold ``varying_`` instead of ``constant_``."""
        if "varying_" in state:
            state["constant_"] = ~state.pop("varying_")
        super().__setstate__(state)

    # ----------------------------------------------------------------------- prediction
    def _predict_scores(self, X: Any) -> np.ndarray:
        """Mean chain probabilities (n, q) of a float64 (n, d) array (or CSR matrix) already validated (0 in the
        columns of constant labels, which the template then sets)."""
        P = np.zeros((X.shape[0], self.constant_.shape[0]))
        if self.chains_:
            Xs = self.scaling_.transform(X)
            P[:, ~self.constant_] = sum(chain.proba(Xs) for chain in self.chains_) / len(self.chains_)
        return P


SPEC = MethodSpec(
    id="ecc",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=ECCParams,
    estimator=EnsembleClassifierChains,
    summary="Ensemble of classifier chains (a baseline): scikit-learn ClassifierChain over LogisticRegression "
    "in n_chains random label orders, probabilities averaged; labels above one threshold learned on inner out-of-fold scores.",
    paper="Baseline. Read J., Pfahringer B., Holmes G., Frank E. Classifier chains for multi-label "
    "classification. Machine Learning 85(3):333-359, 2011. doi:10.1007/s10994-011-5256-5",
    stages=("chains", "threshold"),
)
