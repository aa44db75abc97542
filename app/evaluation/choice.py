"""Choosing among cross-validated entries: ``select`` (``auto``) and ``compare``.

``select`` prices the candidates (``pricing.plan``), cross-validates them, adds the
ensemble-selection blend of their out-of-fold predictions (``blend_entry``) and ranks the
leaderboard; ``compare`` ranks methods at their defaults for ``POST /compare``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app import scoring
from app.evaluation import racing
from app.evaluation.blending import blend_entry
from app.evaluation.cross_validation import Entry, cross_validate, finite, folds, rank, seeded
from app.evaluation.pool import (
    RANKING_METRICS,
    candidate_pool,
    default_entries,
    default_metric,
    grid,
    metric_names,
    task_of,
)
from app.evaluation.pricing import Plan, plan, resampling
from app.methods.base import ProgressFn, no_progress
from app.methods.blend import BLENDS
from app.methods.catalog import get_method


@dataclass
class Selection:
    """The outcome of ``select``: the leaderboard (best first) and the winning entry."""

    metric: str
    cv: int
    leaderboard: list[Entry]
    repeats: int = 1
    #: methods left out on cost, with their predicted cross-validation seconds
    left_out: dict[str, float] = field(default_factory=dict)
    #: seconds the pilots took
    pilot_seconds: float = 0.0
    #: a leading blend against the best single method (``simplest_within_noise``), if one led
    blend_margin: dict[str, Any] | None = None
    #: the repeats the plan allowed (``repeats`` is how many ran: the race stops them early)
    planned_repeats: int | None = None

    @property
    def best(self) -> Entry:
        return self.leaderboard[0]

    def record(self) -> dict[str, Any]:
        """What the version record stores under ``selection``."""
        return {
            "metric": self.metric,
            "cv": self.cv,
            "repeats": self.repeats,
            "planned_repeats": self.planned_repeats or self.repeats,
            "leaderboard": [
                {
                    "method": e.method,
                    "params": e.params,
                    "mean": finite(e.mean(self.metric)),
                    "std": finite(e.std(self.metric)),
                    "predicted_seconds": _rounded(e.predicted_seconds),
                    "measured_seconds": _rounded(sum(e.fold_seconds)) if e.fold_seconds else None,
                    **({"same_ranking_as": e.same_ranking_as} if e.same_ranking_as else {}),
                    **({"stopped": e.stopped} if e.stopped else {}),
                    **({"error": e.error} if e.error else {}),
                }
                for e in self.leaderboard
            ],
            "left_out": [
                {"method": m, "predicted_seconds": _rounded(seconds)}
                for m, seconds in sorted(self.left_out.items(), key=lambda item: item[1])
            ],
            "pilot_seconds": _rounded(self.pilot_seconds),
            **({"blend_margin": self.blend_margin} if self.blend_margin is not None else {}),
        }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None or not math.isfinite(seconds) else round(seconds, 3)


@dataclass
class Comparison:
    """The outcome of ``compare``: every entry ranked, with all the task's metrics."""

    metric: str
    cv: int
    metric_names: tuple[str, ...]
    leaderboard: list[Entry]

    def document(self) -> dict[str, Any]:
        """The JSON result of a compare job."""
        return {
            "metric": self.metric,
            "cv": self.cv,
            "leaderboard": [
                {
                    "method": e.method,
                    "params": e.params,
                    "metrics": e.summary(self.metric_names),
                    "fit_seconds": float(np.mean(e.fit_seconds)) if e.fit_seconds else None,
                    **({"error": e.error} if e.error else {}),
                }
                for e in self.leaderboard
            ],
        }


def _prepared(method: str, params: dict[str, Any], random_state: int | None, n_jobs: int | None) -> dict[str, Any]:
    """An entry's parameters as cross-validation fits them: seeded, and ``n_jobs`` where declared."""
    spec = get_method(method)
    if spec is None:
        raise ValueError(f"unknown method '{method}'")
    prepared = seeded(spec, params, random_state)
    if n_jobs is not None and "n_jobs" in spec.params.model_fields and prepared.get("n_jobs") is None:
        prepared["n_jobs"] = n_jobs
    return prepared


def compare(
    X: np.ndarray,
    Y: np.ndarray,
    kind: str,
    *,
    methods: Sequence[str] | None = None,
    metric: str | None = None,
    cv: int = 5,
    random_state: int | None = 0,
    budget: float | None = None,
    progress: ProgressFn | None = None,
) -> Comparison:
    """Cross-validate ``methods`` (default: the kind's methods whose pilots say they fit the
    budget, selectors included for multi-label data) at their defaults and rank them by ``metric``."""
    metric = metric or default_metric(kind)
    tasks = ("multilabel", "selection") if kind == "multilabel" else ("distribution",)
    chosen = list(methods) if methods else candidate_pool(kind, tasks)
    entries = [(m, {"estimator": "binned"} if m == "mi-filter" and not methods else {}) for m in chosen]
    if not methods:
        entries = plan(X, Y, entries, named=False, cv=cv, budget=budget, random_state=random_state).entries
    results = cross_validate(X, Y, kind, entries, cv=cv, random_state=random_state, progress=progress)
    return Comparison(metric=metric, cv=cv, metric_names=metric_names(task_of(kind)), leaderboard=rank(results, metric))


def select(
    X: np.ndarray,
    Y: np.ndarray,
    kind: str,
    *,
    candidates: Sequence[str] | None = None,
    metric: str | None = None,
    cv: int | None = None,
    repeats: int | None = None,
    tune: bool = False,
    random_state: int | None = 0,
    budget: float | None = None,
    n_jobs: int | None = None,
    exclude: Collection[str] = (),
    sizes: Mapping[str, Mapping[str, Any]] | None = None,
    progress: ProgressFn | None = None,
    race: bool = True,
) -> Selection:
    """Rank the candidates by cross-validated ``metric`` (default: the kind's).

    ``exclude``: methods left out before pricing (the job's memory bound refused them);
    ``sizes``: parameters given to every entry of a method (the job's memory bound fits it only
    smaller, e.g. ``{"rf": {"n_estimators": 195}}``), priced and cross-validated so.

    The candidates (default: ``candidate_pool``) are priced and chosen by ``plan`` at 5 folds (or
    the ``cv`` named), so the extra folds of a small dataset never cost a candidate; ``cv`` and
    ``repeats`` then default to ``resampling`` (10 folds, repeated, on small datasets; 5
    otherwise). ``n_jobs`` is given to the candidates that declare it (the job's cores).
    With ``race`` (the default) the candidates race over the folds (``app.evaluation.racing``):
    one out of the running stops early, and the default repeats stop once another could not
    move the choice; ``race=False`` runs every candidate on every planned fold.
    """
    metric = metric or default_metric(kind)
    progress = progress or no_progress
    n = X.shape[0]
    methods = [m for m in (list(candidates) if candidates else candidate_pool(kind)) if m not in exclude]
    sizes = sizes or {}
    entries = [
        (m, _prepared(m, {**p, **sizes.get(m, {})}, random_state, n_jobs))
        for m in methods
        for p in (grid(m) if tune else default_entries(m))
    ]
    chosen = plan(
        X,
        Y,
        entries,
        named=bool(candidates),
        metric=metric,
        cv=cv or 5,
        budget=budget,
        random_state=random_state,
        progress=progress,
    )
    named_repeats = repeats is not None
    cv, repeats = _resampled(chosen, n, cv, repeats, budget)
    splits = folds(Y, kind, cv, random_state, repeats)
    results, run = _cross_validated(
        X, Y, kind, chosen.entries, splits, cv, metric, random_state, progress, race, not named_repeats
    )
    planned, repeats, splits = repeats, max(1, run // cv), splits[:run]
    for entry in results:  # the pilot's prediction for the folds the entry ran (the race may stop it)
        ran = max(1, len(entry.fold_seconds)) if entry.stopped else len(splits)
        entry.predicted_seconds = chosen.costs[entry.method].seconds(n, cv) * ran / cv
    ranked, margin = _leaderboard(results, chosen, Y, kind, metric, splits, cv)
    return Selection(
        metric=metric,
        cv=cv,
        repeats=repeats,
        leaderboard=ranked,
        left_out=chosen.left_out,
        pilot_seconds=chosen.pilot_seconds,
        blend_margin=margin,
        planned_repeats=planned,
    )


def _cross_validated(
    X: np.ndarray,
    Y: np.ndarray,
    kind: str,
    entries: list[tuple[str, dict[str, Any]]],
    splits: list[tuple[np.ndarray, np.ndarray]],
    cv: int,
    metric: str,
    random_state: int | None,
    progress: ProgressFn,
    race: bool,
    repeat_while_useful: bool,
) -> tuple[list[Entry], int]:
    """The entries cross-validated on ``splits``, raced or on every split, and how many splits ran."""
    scores_only = metric in RANKING_METRICS
    if race:
        return racing.race(
            X,
            Y,
            kind,
            entries,
            splits,
            cv,
            metric,
            random_state=random_state,
            progress=progress,
            scores_only=scores_only,
            repeat_while_useful=repeat_while_useful,
        )
    results = cross_validate(
        X,
        Y,
        kind,
        entries,
        cv=cv,
        random_state=random_state,
        progress=progress,
        splits=splits,
        scores_only=scores_only,
    )
    return results, len(splits)


def _resampled(chosen: Plan, n: int, cv: int | None, repeats: int | None, budget: float | None) -> tuple[int, int]:
    """The folds and repeats asked for, or else ``resampling``'s for the chosen candidates' cost."""
    if cv is not None and repeats is not None:
        return cv, repeats
    per_fit = sum(chosen.costs[m].fold_seconds(n - -(-n // 5)) for m, _ in chosen.entries)
    auto_cv, auto_repeats = resampling(n, per_fit, budget)
    if cv is None:
        cv = min(auto_cv, n)
    return cv, repeats or (auto_repeats if cv == auto_cv else 1)


def _leaderboard(
    results: list[Entry],
    chosen: Plan,
    Y: np.ndarray,
    kind: str,
    metric: str,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
) -> tuple[list[Entry], dict[str, Any] | None]:
    """The cross-validated entries, their blend and the ranking twins, best first; and the blend's
    margin over the best single method (label distributions only, ``simplest_within_noise``)."""
    mixed = blend_entry(results, Y, kind, metric, splits, cv)
    twins = [_twin_entry(entry, twin, chosen.entries, results) for entry, twin in chosen.twins]
    ranked = rank(results + ([mixed] if mixed is not None else []) + twins, metric)
    margin = None
    if task_of(kind) == "distribution":
        ranked, margin = simplest_within_noise(ranked, metric)
    if ranked[0].error is not None or not math.isfinite(ranked[0].mean(metric)):
        raise ValueError(f"no candidate could be evaluated: {ranked[0].error or 'metric undefined on every fold'}")
    return ranked, margin


def simplest_within_noise(ranked: list[Entry], metric: str) -> tuple[list[Entry], dict[str, Any] | None]:
    """The leaderboard with the best single method first when a blend leads it by no more than
    the noise of the folds (the one-standard-error rule of model selection), and the comparison
    made (None when no blend leads). ``select`` applies it to label distribution learning only.

    The gain is the mean over folds of the blend's metric minus the best single entry's, on the
    same folds (the blend's are cross-fitted: its weights chosen without the fold); the noise is
    the standard error of those paired differences. A blend costs the fits and the memory of
    every member and predicts slower; where it wins by less than the folds vary, its test score
    is a coin toss against its best member: on the three yeast label distribution sets the
    blends were 0.00001-0.00002 Chebyshev above ``aa-knn`` on the test splits (issue 27).

    Multi-label blends are kept on any lead: there the rule replaced blends that were better on
    the test splits (emotions 0.804 -> 0.787, birds 0.701 -> 0.687 average precision; the
    classifiers' folds are small and noisy, and their blends' gains held on new data).
    """
    if not ranked or ranked[0].method not in BLENDS or ranked[0].error is not None:
        return ranked, None
    blend = ranked[0]
    single = next(
        (
            e
            for e in ranked[1:]
            if e.method not in BLENDS and e.error is None and len(e.fold_metrics) == len(blend.fold_metrics)
        ),
        None,
    )
    if single is None:
        return ranked, None
    sign = -1.0 if metric in scoring.LOWER_IS_BETTER else 1.0
    gains = np.array([sign * (b[metric] - s[metric]) for b, s in zip(blend.fold_metrics, single.fold_metrics)])
    gains = gains[np.isfinite(gains)]
    if gains.size < 2:
        return ranked, None
    gain, noise = float(gains.mean()), float(gains.std(ddof=1) / math.sqrt(gains.size))
    kept = gain > noise
    margin = {"single": single.method, "gain": gain, "standard_error": noise, "blend_kept": kept}
    if kept:
        return ranked, margin
    return [single, *(e for e in ranked if e is not single)], margin


def _twin_entry(
    entry: tuple[str, dict[str, Any]],
    twin: tuple[str, dict[str, Any]],
    evaluated: Sequence[tuple[str, dict[str, Any]]],
    results: Sequence[Entry],
) -> Entry:
    """The leaderboard row of an entry evaluated as its ranking twin: the twin's ranking metrics."""
    source = results[list(evaluated).index(twin)]
    row = Entry(method=entry[0], params=dict(entry[1]), same_ranking_as=source.method, error=source.error)
    row.fold_metrics = [{m: v for m, v in fold.items() if m in RANKING_METRICS} for fold in source.fold_metrics]
    return row
