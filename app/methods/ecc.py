"""ECC: an ensemble of classifier chains over logistic regression.

Read, Pfahringer, Holmes and Frank's classifier chains: the labels are put in an order and label
j's logistic regression sees the features plus the labels before it in the chain (true labels
when fitting, the chain's own 0/1 predictions when predicting). The ensemble fits ``n_chains``
scikit-learn ``ClassifierChain``s in random orders (chain i seeded ``random_state + i``) and
averages their probabilities; the label set is every label with mean probability > 0.5.

scikit-learn's chain fails on a label that is constant in the training data (its logistic
regression sees one class). Such labels are left out of the chains, where they would be a
constant extra feature that moves nothing, and predicted with their constant.

Prediction replays the chains in NumPy from the fitted coefficients: one matrix product for the
feature part of every link, then a loop over the links for the label part. Fitting uses one BLAS thread, for the reason given
in ``app.methods.br``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import ClassifierChain
from threadpoolctl import threadpool_limits

from app.methods.base import DataShape, MemoryEstimate, MethodEstimator, MethodParams, MethodSpec, ProgressFn
from app.methods.baseline_support import MinMaxOption, ProbabilityClassifierMixin


class ECCParams(MethodParams):
    n_chains: int = Field(5, ge=1, description="Number of classifier chains, each in its own random label order.")
    C: float = Field(1.0, gt=0, description="Inverse L2 regularisation strength of every logistic regression.")
    max_iter: int = Field(1000, ge=1, description="L-BFGS iteration cap per link.")
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set first (part of the model)."
    )
    random_state: int | None = Field(0, description="Chain i's label order is seeded random_state + i.")


class _Chain:
    """One fitted chain as plain arrays: link t predicts label ``order[t]`` (among the varying labels)."""

    def __init__(self, chain: ClassifierChain, d: int) -> None:
        m = len(chain.estimators_)
        self.order = np.asarray(chain.order_, dtype=np.intp)
        self.Wx = np.vstack([est.coef_[0, :d] for est in chain.estimators_])  # (m, d)
        self.Wy = np.zeros((m, m))  # link t's weights on the predictions of links 0..t-1
        for t, est in enumerate(chain.estimators_):
            self.Wy[t, :t] = est.coef_[0, d:]
        self.b = np.array([est.intercept_[0] for est in chain.estimators_])

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


class EnsembleClassifierChains(ProbabilityClassifierMixin, MinMaxOption, MethodEstimator):
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
    ) -> None:
        self.n_chains = n_chains
        self.C = C
        self.max_iter = max_iter
        self.scale = scale
        self.random_state = random_state

    def _fit(self, Xs: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        seeds = (
            np.random.default_rng().integers(2**31 - 1, size=self.n_chains)
            if self.random_state is None
            else self.random_state + np.arange(self.n_chains)
        )
        self.chains_: list[_Chain] = []
        iterations = [0]
        varying = ~self.constant_
        if varying.any():
            Yv = Y[:, varying]
            with threadpool_limits(limits=1, user_api="blas"):
                for i, seed in enumerate(seeds):
                    progress("chains", i / self.n_chains)
                    chain = ClassifierChain(
                        LogisticRegression(C=self.C, max_iter=self.max_iter), order="random", random_state=int(seed)
                    )
                    chain.fit(Xs, Yv)
                    self.chains_.append(_Chain(chain, Xs.shape[1]))
                    iterations.extend(int(est.n_iter_[0]) for est in chain.estimators_)
        progress("chains", 1.0)
        self.n_iter_ = max(iterations)

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
        """Artifacts fitted before the template ``fit`` stored ``varying_`` instead of ``constant_``."""
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
    "in n_chains random label orders, probabilities averaged; labels with mean probability > 0.5.",
    paper="Baseline. Read J., Pfahringer B., Holmes G., Frank E. Classifier chains for multi-label "
    "classification. Machine Learning 85(3):333-359, 2011. doi:10.1007/s10994-011-5256-5",
    stages=("chains",),
)
