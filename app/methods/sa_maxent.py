"""SA-MaxEnt: a maximum-entropy (softmax) model fitted to label distributions.

Geng's SA-IIS / SA-BFGS family (Geng, TKDE 2016): p(y_l | x) = softmax(W x + b)_l, fitted by
minimising the mean Kullback-Leibler divergence from the training distributions plus an L2
penalty on W (not on the bias),

    J(W, b) = (1/n) sum_i KL(d_i || p(x_i)) + (alpha / 2) ||W||_F^2,

with SciPy's L-BFGS and the analytic gradient dJ/dW = (P - D)' X / n + alpha W,
dJ/db = (P - D)' 1 / n (tested against finite differences). J is convex, and strictly convex in
W for alpha > 0, so the fit does not depend on the start. PyLDL's ``SA_BFGS`` has no penalty
(alpha = 0) and overfits small sets such as SJAFFE; the default here is a small one. Features
are min-max scaled on the training set by default, so that one alpha suits every feature.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax

from app.methods.base import MAX_LBFGS_ITER, MethodEstimator, MethodParams, MethodSpec, ProgressFn
from app.methods.baseline_support import DistributionPredictorMixin, MinMaxOption


class SAMaxEntParams(MethodParams):
    alpha: float = Field(1e-3, ge=0, description="L2 penalty (alpha/2)||W||^2 on the weights (not the bias).")
    max_iter: int = Field(1000, ge=1, le=MAX_LBFGS_ITER, description="L-BFGS iteration cap.")
    tol: float = Field(1e-7, gt=0, description="L-BFGS stopping tolerance on the projected gradient.")
    scale: Literal["none", "minmax"] = Field(
        "minmax", description="Scale features to [0, 1] on the training set first (part of the model)."
    )


def objective(theta: np.ndarray, X: np.ndarray, D: np.ndarray, alpha: float) -> tuple[float, np.ndarray]:
    """J and its gradient at ``theta`` = [W (c, d) row-major, b (c)]; the entropy of D is included,
    so J is the mean KL divergence plus the penalty."""
    n, d = X.shape
    c = D.shape[1]
    W = theta[: c * d].reshape(c, d)
    b = theta[c * d :]
    Z = X @ W.T + b
    logP = log_softmax(Z, axis=1)
    pos = D > 0
    kl = float((D[pos] * (np.log(D[pos]) - logP[pos])).sum()) / n
    G = (np.exp(logP) - D) / n
    grad = np.concatenate([(G.T @ X + alpha * W).ravel(), G.sum(axis=0)])
    return kl + 0.5 * alpha * float((W * W).sum()), grad


class SAMaxEnt(DistributionPredictorMixin, MinMaxOption, MethodEstimator):
    """Softmax regression on soft targets; parameters as :class:`SAMaxEntParams`.

    Fitted attributes: ``n_features_in_``, ``scaling_``, ``coef_`` (c, d) and ``intercept_`` (c,)
    on the scaled features, ``objective_`` final J, ``n_iter_``, ``converged_``.
    """

    _params_model = SAMaxEntParams

    def __init__(
        self,
        *,
        alpha: float = 1e-3,
        max_iter: int = 1000,
        tol: float = 1e-7,
        scale: Literal["none", "minmax"] = "minmax",
    ) -> None:
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.scale = scale

    def _fit(self, Xs: np.ndarray, D: np.ndarray, progress: ProgressFn) -> None:
        d, c = Xs.shape[1], D.shape[1]
        iteration = [0]

        def report(_: np.ndarray) -> None:
            iteration[0] += 1
            progress("iterations", iteration[0] / self.max_iter)

        progress("iterations", 0.0)
        result = minimize(
            objective,
            np.zeros(c * d + c),
            args=(Xs, D, float(self.alpha)),
            jac=True,
            method="L-BFGS-B",
            callback=report,
            options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 1e-12},
        )
        progress("iterations", 1.0)
        self.coef_ = result.x[: c * d].reshape(c, d)
        self.intercept_ = result.x[c * d :]
        self.objective_ = float(result.fun)
        self.n_iter_ = int(result.nit)
        self.converged_ = bool(result.success)

    def _predict(self, X: np.ndarray) -> np.ndarray:
        """Distributions (n, c) for a float64 (n, d) array already validated."""
        return softmax(self.scaling_.transform(X) @ self.coef_.T + self.intercept_, axis=1)


SPEC = MethodSpec(
    id="sa-maxent",
    task="distribution",
    outputs=("distribution",),
    params=SAMaxEntParams,
    estimator=SAMaxEnt,
    summary="Maximum-entropy model (a baseline): softmax regression fitted to the training distributions "
    "(mean KL + L2 penalty alpha, L-BFGS).",
    paper="Baseline. Geng X. Label distribution learning. IEEE Transactions on Knowledge and Data "
    "Engineering 28(7):1734-1748, 2016 (SA-BFGS). doi:10.1109/TKDE.2016.2545658",
    dataset_kind="distribution",
    stages=("iterations",),
)
