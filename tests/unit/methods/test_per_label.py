"""``fit_logistic``: the per-label fits in forked worker processes (BR, ECC), and what the caller
still gets from them: the same models, the workers' warnings, progress, a stop on cancel."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from app.methods import per_label
from app.methods.per_label import Problem, design_matrix, fit_logistic


@pytest.fixture(autouse=True)
def any_work_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These problems are tiny: below ``PROCESS_MIN_WORK`` they would stay in threads."""
    monkeypatch.setattr(per_label, "PROCESS_MIN_WORK", 0)


def _problems(q: int = 12) -> list[Problem]:
    rng = np.random.default_rng(0)
    X = rng.random((120, 10))
    Y = ((X - 0.5) @ rng.normal(size=(10, q)) + rng.normal(size=(120, q)) > 0).astype(int)
    design = design_matrix(X)
    return [Problem(design, design.shape[1], Y[:, j]) for j in range(q)]


def _fit(problems: list[Problem], n_jobs: int, **kw: object) -> list[per_label.Fitted]:
    return fit_logistic(
        problems, C=1.0, max_iter=kw.pop("max_iter", 1000), n_jobs=n_jobs, report=kw.pop("report", lambda f: None)
    )  # type: ignore[arg-type]


def test_two_jobs_fit_in_other_processes_and_give_the_same_models(monkeypatch: pytest.MonkeyPatch) -> None:
    problems = _problems()
    fit_one = per_label._fit_one

    def telling(*args: object) -> per_label.Fitted:
        warnings.warn(f"pid {os.getpid()}", UserWarning, stacklevel=1)
        return fit_one(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(per_label, "_fit_one", telling)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        two = _fit(problems, 2)
    pids = {str(w.message) for w in caught if str(w.message).startswith("pid ")}
    assert pids and f"pid {os.getpid()}" not in pids  # the fits ran in workers; their warnings came back
    monkeypatch.setattr(per_label, "_fit_one", fit_one)
    one = _fit(problems, 1)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.coef, b.coef)
        assert (a.intercept, a.n_iter) == (b.intercept, b.n_iter)


def test_a_workers_convergence_warning_reaches_the_caller() -> None:
    with pytest.warns(ConvergenceWarning):
        _fit(_problems(), 2, max_iter=1)


def test_progress_comes_back_per_chunk_and_a_cancel_stops_the_fits() -> None:
    problems, seen = _problems(3 * per_label.CHUNKS_PER_PROCESS), []
    _fit(problems, 2, report=seen.append)
    assert (
        seen == sorted(seen) and seen[-1] == 1.0 and 1 < len(seen) <= 2 * per_label.CHUNKS_PER_PROCESS
    )  # not per label

    class Cancelled(Exception):
        pass

    def cancel(fraction: float) -> None:
        raise Cancelled

    with pytest.raises(Cancelled):
        _fit(problems, 2, report=cancel)
    assert not per_label._CALLS  # nothing left behind for later forks


def test_without_fork_the_fits_run_in_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    problems = _problems()
    monkeypatch.setattr(per_label.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    fit_one, pids = per_label._fit_one, set()

    def where(*args: object) -> per_label.Fitted:
        pids.add(os.getpid())
        return fit_one(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(per_label, "_fit_one", where)
    threaded = _fit(problems, 2)
    assert pids == {os.getpid()}
    monkeypatch.setattr(per_label, "_fit_one", fit_one)
    for a, b in zip(_fit(problems, 1), threaded, strict=True):
        np.testing.assert_array_equal(a.coef, b.coef)


def test_small_work_stays_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool costs about 20 ms to fork and join: an ECC of 10 chains on 80 rows took four
    times as long with processes as in one thread, so work this small is fitted in threads."""
    monkeypatch.setattr(per_label, "PROCESS_MIN_WORK", 10**12)
    fit_one, pids = per_label._fit_one, set()

    def where(*args: object) -> per_label.Fitted:
        pids.add(os.getpid())
        return fit_one(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(per_label, "_fit_one", where)
    _fit(_problems(), 2)
    assert pids == {os.getpid()}
