"""Independent logistic regressions fitted side by side: BR's labels, ECC's chain links.

Each problem is one scikit-learn ``LogisticRegression`` (L-BFGS) on the first ``width`` columns
of a design matrix and one 0/1 target. The problems share nothing, so ``n_jobs`` threads fit
them at once; the results do not depend on ``n_jobs`` (L-BFGS is deterministic). Threads rather
than processes: the design matrix is shared without a copy, and the loss and gradient of
scikit-learn's L-BFGS run in compiled code without the GIL (BR on bibtex, two threads: see
``docs/scaling.md``).

Sparse input. The design matrix is a CSR copy of ``X`` when at most ``SPARSE_DENSITY`` of its
entries are non-zero: the same L-BFGS then costs matrix products over the non-zeros only. On
bibtex (1,836 binary features, 3.7% non-zero) 20 labels took 1.8 s instead of 13.9 s with
identical average precision; liblinear took 3.2-4.7 s (and penalises the intercept, a different
model), saga 90 s (benchmark in ``docs/scaling.md``).

BLAS runs with one thread (the reason is in ``app.methods.br``); ``progress`` is called from the
calling thread only, after each finished problem, so a ``JobCancelled`` it raises stops the fits
at a safe point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from joblib import Parallel, delayed
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from app.methods.numerics import effective_jobs

#: largest share of non-zero entries at which the fits run on a CSR copy of the features
SPARSE_DENSITY = 0.1

#: the features as the fits take them: dense, or CSR when sparse enough
Design: TypeAlias = np.ndarray | sparse.csr_matrix


def design_matrix(X: np.ndarray | sparse.spmatrix) -> Design:
    """``X`` as the fits take it: CSR input as it is, a dense array as a CSR copy when at most
    ``SPARSE_DENSITY`` of it is non-zero."""
    if sparse.issparse(X):
        return sparse.csr_matrix(X)
    if X.size and np.count_nonzero(X) <= SPARSE_DENSITY * X.size:
        return sparse.csr_matrix(X)
    return X


@dataclass(frozen=True)
class Problem:
    """One fit: the first ``width`` columns of ``design`` against the 0/1 ``target``."""

    design: Design
    width: int
    target: np.ndarray


@dataclass(frozen=True)
class Fitted:
    """One fitted logistic regression: weights over the problem's columns, intercept, iterations."""

    coef: np.ndarray
    intercept: float
    n_iter: int


def _fit_one(problem: Problem, C: float, max_iter: int, class_weight: Literal["balanced"] | None) -> Fitted:
    X = problem.design if problem.width == problem.design.shape[1] else problem.design[:, : problem.width]
    lr = LogisticRegression(C=C, max_iter=max_iter, class_weight=class_weight).fit(X, problem.target)
    return Fitted(np.asarray(lr.coef_[0]), float(lr.intercept_[0]), int(lr.n_iter_[0]))


def fit_logistic(
    problems: Sequence[Problem],
    *,
    C: float,
    max_iter: int,
    class_weight: Literal["balanced"] | None = None,
    n_jobs: int | None = None,
    report: Callable[[float], None],
) -> list[Fitted]:
    """Every problem fitted, in order; ``report(fraction done)`` after each one (calling thread)."""
    jobs = min(effective_jobs(n_jobs or 1), max(1, len(problems)))
    out: list[Fitted] = []
    with threadpool_limits(limits=1, user_api="blas"):
        if jobs == 1:
            for problem in problems:
                out.append(_fit_one(problem, C, max_iter, class_weight))
                report(len(out) / len(problems))
            return out
        with Parallel(n_jobs=jobs, prefer="threads", return_as="generator") as parallel:
            for fitted in parallel(delayed(_fit_one)(p, C, max_iter, class_weight) for p in problems):
                out.append(fitted)
                report(len(out) / len(problems))
    return out
