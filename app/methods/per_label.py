"""Independent logistic regressions fitted side by side: BR's labels, ECC's chain links.

Each problem is one scikit-learn ``LogisticRegression`` (L-BFGS) on the first ``width`` columns
of a design matrix and one 0/1 target. The problems share nothing, so with ``n_jobs`` > 1 they
are fitted in ``n_jobs`` forked worker processes (results independent of ``n_jobs``, tested):
processes because each fit is short and mostly Python-level code holding the GIL, so threads
take turns; forked, so they start at once and read the design matrix copy-on-write. Small work
(``PROCESS_MIN_WORK``), or a process that cannot fork, runs the fits in threads instead. The
design matrix is a CSR copy of ``X`` when at most ``SPARSE_DENSITY`` of it is non-zero (the same
L-BFGS over the non-zeros only). Measurements of both choices: docs/scaling.md.

BLAS runs with one thread (the reason is in ``app.methods.br``); ``progress`` is called from the
calling thread only, after each finished problem or chunk of problems, so a ``JobCancelled`` it
raises stops the fits at a safe point.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
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

#: chunks of problems per worker process: progress and cancelling come between chunks, and
#: uneven fits (iterations differ from label to label) even out over many small chunks
CHUNKS_PER_PROCESS = 32

#: least work (non-zero design entries x problems) for which the fits go to worker processes:
#: below it forking and joining the pool costs more than it saves (docs/scaling.md)
PROCESS_MIN_WORK = 5_000_000

log = logging.getLogger(__name__)

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


#: what forked workers fit, by call: set before the workers are forked, so they inherit it
_CALLS: dict[int, tuple[Sequence[Problem], float, int, Literal["balanced"] | None]] = {}
_call_ids = itertools.count()


_Chunk: TypeAlias = tuple[list[tuple[int, Fitted]], list[tuple[type[Warning], str]]]


def _fit_chunk(call: int, indices: list[int]) -> _Chunk:
    """The fits of ``indices`` in a worker, and the warnings they raised (a job records the
    warnings of its process, which a worker's would not reach: the caller raises them again)."""
    problems, C, max_iter, class_weight = _CALLS[call]
    with warnings.catch_warnings(record=True) as caught:
        fitted = [(i, _fit_one(problems[i], C, max_iter, class_weight)) for i in indices]
    return fitted, [(w.category, str(w.message)) for w in caught]


def _fit_in_processes(
    problems: Sequence[Problem],
    jobs: int,
    C: float,
    max_iter: int,
    class_weight: Literal["balanced"] | None,
    report: Callable[[float], None],
) -> list[Fitted] | None:
    """The fits in ``jobs`` forked processes, or None where that would not pay
    (``PROCESS_MIN_WORK``) or this process cannot fork workers.

    A worker killed meanwhile (out of memory) fails the call with ``BrokenProcessPool``, never a
    wait without end; leaving early (a ``JobCancelled`` from ``report``) drops the chunks not
    started and waits for the running ones, at most one chunk each.
    """
    design = problems[0].design
    work = (design.nnz if isinstance(design, sparse.csr_matrix) else design.size) * len(problems)
    if work < PROCESS_MIN_WORK or "fork" not in multiprocessing.get_all_start_methods():
        return None
    call = next(_call_ids)
    _CALLS[call] = (problems, C, max_iter, class_weight)
    chunks = min(len(problems), jobs * CHUNKS_PER_PROCESS)
    parts = [list(range(c, len(problems), chunks)) for c in range(chunks)]  # interleaved: even costs
    out: list[Fitted | None] = [None] * len(problems)
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            try:
                pending: set[Future[_Chunk]] = {pool.submit(_fit_chunk, call, p) for p in parts}
            except (AssertionError, OSError) as exc:  # e.g. a daemonic process may not have children
                log.debug("per-label fits in threads: no worker processes here (%s)", exc)
                return None
            done_count = 0
            try:
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        fitted, raised = future.result()
                        for i, one in fitted:
                            out[i] = one
                        done_count += len(fitted)
                        for category, message in raised:
                            warnings.warn(message, category, stacklevel=2)
                    report(done_count / len(problems))
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        _CALLS.pop(call, None)
    assert all(f is not None for f in out)
    return [f for f in out if f is not None]


def fit_logistic(
    problems: Sequence[Problem],
    *,
    C: float,
    max_iter: int,
    class_weight: Literal["balanced"] | None = None,
    n_jobs: int | None = None,
    report: Callable[[float], None],
) -> list[Fitted]:
    """Every problem fitted, in order; ``report(fraction done)`` after each one or each chunk
    (calling thread). ``n_jobs`` > 1: forked worker processes, else threads (module docstring)."""
    jobs = min(effective_jobs(n_jobs or 1), max(1, len(problems)))
    out: list[Fitted] = []
    with threadpool_limits(limits=1, user_api="blas"):
        if jobs == 1:
            for problem in problems:
                out.append(_fit_one(problem, C, max_iter, class_weight))
                report(len(out) / len(problems))
            return out
        forked = _fit_in_processes(problems, jobs, C, max_iter, class_weight, report)
        if forked is not None:
            return forked
        with Parallel(n_jobs=jobs, prefer="threads", return_as="generator") as parallel:
            for fitted in parallel(delayed(_fit_one)(p, C, max_iter, class_weight) for p in problems):
                out.append(fitted)
                report(len(out) / len(problems))
    return out
