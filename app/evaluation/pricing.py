"""Pricing a selection's candidates before their cross-validation (docs/auto.md, docs/scaling.md).

A candidate's cost is measured, not guessed: one pilot fold is timed on this machine now and
extrapolated to a fold with the method's growth exponent in n (``GROWTH``, measured by
``benchmarks/scaling_growth.py``); ``plan`` keeps the candidates, cheapest first, while the
predicted total fits what the pilots left of the budget.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from app.evaluation.cross_validation import GRAPH_METHODS, empty_entry, fit_and_score, graph_users
from app.evaluation.pool import RANKING_METRICS, ranking_twin
from app.methods.base import JobCancelled, ProgressFn, no_progress
from app.methods.catalog import get_method
from app.methods.graph_cache import GraphCache, sharing_graphs

log = logging.getLogger("labelserve.selection")

#: default budget for the candidates' cross-validation, in expected seconds
DEFAULT_BUDGET_SECONDS = 600.0
#: below this many samples a selection uses more (and repeated) folds by default
SMALL_N = 1000
#: (folds, repeats) tried for a small dataset, most thorough first
_SMALL_RESAMPLING = ((10, 3), (10, 2), (10, 1))
#: share of the budget the extra folds of a small dataset may take
_RESAMPLING_SHARE = 0.25
#: Growth exponent in the training rows n of one fold's seconds (fit, then score the held-out
#: part): a fold on n rows costs ``pilot seconds * (n / pilot rows) ** GROWTH``. Measured over the
#: range a pilot extrapolates across (``benchmarks/scaling_growth.py --folds``; for the kNN methods
#: ``benchmarks/auto_cost.py --pilot-growth``; figures in docs/scaling.md). The LDL methods and the
#: selectors keep the exponents of their former cost models until they are measured the same way.
GROWTH: dict[str, float] = {
    "br": 0.4,
    "ecc": 0.5,
    "rf": 0.8,
    "gbm": 0.82,
    "mlknn": 1.5,
    "dmknn": 1.5,
    "trans-ovk": 3.0,
    "aa-knn": 2.0,
    "sa-maxent": 1.0,
    "ldlkm": 1.0,
    "mi-filter": 1.25,
    "elcfs": 1.25,
    "ghc-dr": 2.0,
}
#: the growth of a kNN method's fold when it reuses the neighbour graph another method of the
#: selection built for the fold (posteriors and the held-out part's queries; see ``GROWTH``)
GRAPH_REUSE_GROWTH = 1.35
#: the exponent of a method ``GROWTH`` does not list (between the linear and the quadratic ones)
DEFAULT_GROWTH = 1.5
#: a pilot fits this share of a fold's training rows (at least ``PILOT_MIN_ROWS`` of them): large
#: enough that fixed costs do not dominate the timing, small enough to cost about
#: ``PILOT_SHARE ** GROWTH / cv`` of the cross-validation (about 10% for br, 2% for mlknn, at 5 folds)
PILOT_SHARE = 0.2
PILOT_MIN_ROWS = 500
#: a pilot shorter than ``PILOT_REPEAT_SECONDS`` runs again (up to ``PILOT_RUNS`` times) and its
#: fastest run counts: on a shared machine a fraction of a second of wall time is mostly how the
#: scheduler treated it (docs/scaling.md)
PILOT_RUNS = 3
PILOT_REPEAT_SECONDS = 1.0


def within_budget(costs: Mapping[str, float], budget: float) -> list[str]:
    """The methods to cross-validate given each one's predicted seconds: cheapest first while the
    running total fits ``budget`` (a dearer one that does not fit never displaces a cheaper one
    that does; the cheapest always runs), in name order."""
    chosen: list[str] = []
    total = 0.0
    for method in sorted(costs, key=lambda m: (costs[m], m)):
        if chosen and total + costs[method] > budget:
            continue
        chosen.append(method)
        total += costs[method]
    return sorted(chosen)


def resampling(n: int, expected_fit_seconds: float, budget: float | None = None) -> tuple[int, int]:
    """Default (folds, repeats) of a selection on n samples whose candidates' fits together are
    expected to take ``expected_fit_seconds``: 5 x 1 from ``SMALL_N`` samples on, else the most
    thorough of ``_SMALL_RESAMPLING`` within ``_RESAMPLING_SHARE`` of the budget (5 x 1 when none is)."""
    budget = DEFAULT_BUDGET_SECONDS if budget is None else budget
    if n < SMALL_N:
        for cv, repeats in _SMALL_RESAMPLING:
            if cv * repeats * expected_fit_seconds <= _RESAMPLING_SHARE * budget:
                return cv, repeats
    return 5, 1


class _PilotStopped(Exception):
    """Raised from a pilot's progress once its extrapolation is already past the budget."""


class _PilotWatch:
    """A pilot's progress callback: passes reports on (cancellation), stops a pilot past ``limit`` s."""

    def __init__(self, label: str, limit: float, progress: ProgressFn) -> None:
        self.label, self.limit, self.progress = label, limit, progress
        self.started = time.perf_counter()
        self.reached = 0.0

    def __call__(self, stage: str, fraction: float) -> None:
        self.progress(f"{self.label}: {stage}", 0.0)
        self.reached = max(self.reached, min(max(fraction, 0.0), 1.0))
        if time.perf_counter() - self.started > self.limit and self.reached < 1.0:
            raise _PilotStopped


@dataclass(frozen=True)
class Cost:
    """What a candidate's pilot fold measured, and the fold cost it predicts."""

    method: str
    pilot_rows: int
    pilot_seconds: float
    growth: float
    #: the pilot was stopped at this fraction of its fit (its extrapolation was past the budget),
    #: so ``pilot_seconds / fraction`` stands for the whole pilot: a lower bound
    fraction: float = 1.0

    def fold_seconds(self, train_rows: int) -> float:
        """Predicted seconds of one fold that fits ``train_rows`` rows."""
        whole = self.pilot_seconds / max(self.fraction, 1e-3)
        return whole * max(1.0, train_rows / self.pilot_rows) ** self.growth

    def seconds(self, n: int, cv: int, repeats: int = 1) -> float:
        """Predicted seconds of the cross-validation of one entry on n samples."""
        return cv * repeats * self.fold_seconds(n - -(-n // cv))


def pilot_split(n: int, cv: int, random_state: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) rows of a pilot fold: ``PILOT_SHARE`` of a fold's training rows (at least
    ``PILOT_MIN_ROWS``, at most all of them) and a held-out part in the folds' proportion."""
    train = n - -(-n // cv)
    rows = min(train, max(PILOT_MIN_ROWS, int(PILOT_SHARE * train)))
    held = max(1, min(n - rows, round(rows / (cv - 1))))
    order = np.random.default_rng(random_state).permutation(n)
    return np.sort(order[:rows]), np.sort(order[rows : rows + held])


def pilot_costs(
    X: np.ndarray,
    Y: np.ndarray,
    entries: Sequence[tuple[str, dict[str, Any]]],
    *,
    cv: int,
    budget: float | None = None,
    random_state: int | None = 0,
    progress: ProgressFn | None = None,
    scores_only: bool = False,
) -> dict[str, Cost]:
    """Each entry's method timed on one pilot fold (``pilot_split``) on this machine now.

    A short pilot is repeated (``PILOT_RUNS``) and its fastest run counts.
    A pilot whose extrapolated cross-validation passes ``budget`` while it runs is stopped at the
    method's next progress report (its ``Cost`` then has the fraction it reached): the method
    cannot fit, and finishing the pilot would only spend the budget. A pilot that fails (a
    parameter the subsample cannot take) keeps the time it took: the cross-validation will say
    whether the method fits the real folds. ``JobCancelled`` from ``progress`` stops everything.
    """
    progress = progress or no_progress
    n = X.shape[0]
    tr, te = pilot_split(n, cv, random_state)
    costs: dict[str, Cost] = {}
    with sharing_graphs() if graph_users(entries) > 1 else nullcontext() as shared:
        for method, params in entries:
            costs[method] = _pilot(X, Y, method, params, tr, te, shared, cv, budget, progress, scores_only)
    return costs


def _pilot(
    X: np.ndarray,
    Y: np.ndarray,
    method: str,
    params: dict[str, Any],
    tr: np.ndarray,
    te: np.ndarray,
    shared: GraphCache | None,
    cv: int,
    budget: float | None,
    progress: ProgressFn,
    scores_only: bool,
) -> Cost:
    """One entry's pilot (``pilot_costs``). Inside ``shared`` it reuses the neighbour graphs of the
    pilots before it, as its folds will reuse those of the entries before it, and builds its own
    afresh in every run."""
    spec = get_method(method)
    if spec is None:
        raise ValueError(f"unknown method '{method}'")
    n = X.shape[0]
    growth = GROWTH.get(method, DEFAULT_GROWTH)
    limit = math.inf if budget is None else budget / (cv * max(1.0, (n - -(-n // cv)) / tr.size) ** growth)
    inherited = shared.keys() if shared is not None else frozenset()
    hits = shared.hits if shared is not None else 0
    runs: list[float] = []
    fraction = 1.0
    while fraction == 1.0 and len(runs) < PILOT_RUNS and sum(runs) < PILOT_REPEAT_SECONDS:
        if shared is not None:
            shared.retain(inherited)
        watch = _PilotWatch(f"pilot: {method}", limit, progress)
        try:
            with threadpool_limits(limits=1, user_api="blas"):
                fit_and_score(
                    spec, empty_entry(spec, method, params, Y, 1), X, Y, tr, te, watch, scores_only=scores_only
                )
        except _PilotStopped:
            fraction = max(watch.reached, 1e-3)
        except (JobCancelled, MemoryError):
            raise
        except Exception:  # noqa: BLE001 - the cross-validation reports the method's failure
            log.info("pilot of %s failed", method, exc_info=True)
            runs.append(time.perf_counter() - watch.started)
            break
        runs.append(time.perf_counter() - watch.started)
    if method in GRAPH_METHODS and shared is not None and shared.hits > hits:
        growth = GRAPH_REUSE_GROWTH  # its folds will reuse the graph too: what grows is the rest
    return Cost(method, int(tr.size), min(runs), growth, fraction)


Twins = list[tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]]


@dataclass
class Plan:
    """What a selection or comparison cross-validates, and what its pilots predicted."""

    entries: list[tuple[str, dict[str, Any]]]
    costs: dict[str, Cost]
    #: methods left out on cost, with their predicted cross-validation seconds
    left_out: dict[str, float]
    #: (entry, the entry of ``entries`` whose ranking it provably shares)
    twins: Twins
    pilot_seconds: float


def plan(
    X: np.ndarray,
    Y: np.ndarray,
    entries: Sequence[tuple[str, dict[str, Any]]],
    *,
    named: bool,
    metric: str | None = None,
    cv: int = 5,
    budget: float | None = None,
    random_state: int | None = 0,
    progress: ProgressFn | None = None,
) -> Plan:
    """The entries to cross-validate, priced by their pilots.

    For a ranking ``metric`` the ranking twins (``ranking_twin``) are set aside, to be reported
    with their twin's result. Every other method is piloted once (its first entry); unless the
    candidates were ``named``, the methods whose predicted cost (the cross-validation of all their
    entries, plus one fit on all the rows: the winner's, or a blend member's) does not fit what
    the pilots left of ``budget`` are left out, cheapest first (``within_budget``); a method with
    several entries (a ``DEFAULT_GRIDS`` grid) that does not fit keeps its first entry if that fits.
    """
    budget = DEFAULT_BUDGET_SECONDS if budget is None else budget
    kept, twins = _set_aside_twins(entries, metric)
    started = time.perf_counter()
    first: dict[str, dict[str, Any]] = {}
    for m, p in kept:  # in the folds' order, so each pilot shares neighbour graphs as its folds will
        first.setdefault(m, p)
    costs = pilot_costs(
        X,
        Y,
        list(first.items()),
        cv=cv,
        budget=None if named else budget,
        random_state=random_state,
        progress=progress,
        scores_only=metric in RANKING_METRICS,
    )
    pilot_seconds = time.perf_counter() - started
    if named:
        return Plan(kept, costs, {}, twins, pilot_seconds)
    kept, left_out = _within_room(kept, costs, X.shape[0], cv, max(0.0, budget - pilot_seconds))
    twins = [(entry, twin) for entry, twin in twins if twin in kept]
    return Plan(kept, costs, left_out, twins, pilot_seconds)


Entries = list[tuple[str, dict[str, Any]]]


def _set_aside_twins(entries: Sequence[tuple[str, dict[str, Any]]], metric: str | None) -> tuple[Entries, Twins]:
    """The entries to evaluate, and (for a ranking ``metric``) the ranking twins set aside."""
    kept = list(entries)
    twins: Twins = []
    if metric in RANKING_METRICS:
        for entry in entries:
            twin = ranking_twin(entry, [e for e in entries if e is not entry])
            if twin is not None:
                twins.append((entry, twin))
                kept.remove(entry)
    return kept, twins


def _within_room(
    kept: Entries, costs: dict[str, Cost], n: int, cv: int, room: float
) -> tuple[Entries, dict[str, float]]:
    """The entries whose methods fit ``room`` seconds, and the methods left out with their cost.

    A method's cost is its cross-validation (every entry of it) and the fit on all n rows should it
    win (or join a blend); one whose grid does not fit may still fit with its first entry alone.
    """

    def count(m: str) -> int:
        return sum(1 for e in kept if e[0] == m)

    per_method = {m: costs[m].seconds(n, cv) * count(m) + costs[m].fold_seconds(n) for m in costs}
    chosen = set(within_budget(per_method, room))
    single = {
        m: costs[m].seconds(n, cv) + costs[m].fold_seconds(n) for m in per_method if m not in chosen and count(m) > 1
    }
    spare = room - sum(per_method[m] for m in chosen)
    for m in sorted(single, key=lambda m: (single[m], m)):
        if single[m] <= spare:
            chosen.add(m)
            spare -= single[m]
            first_entry = next(e for e in kept if e[0] == m)
            kept = [e for e in kept if e[0] != m or e is first_entry]
    left_out = {m: per_method[m] for m in per_method if m not in chosen}
    return [e for e in kept if e[0] in chosen], left_out
