"""Racing a selection's candidates over its folds (an F-race, as successive halving races a grid).

Every candidate runs the first rung of folds (``rungs``: half a repeat, then each whole repeat);
after each rung a candidate is stopped when the folds say it is out of the running (``verdict``):
its paired gap to the leader on the folds both ran is larger than ``STOP_SE`` standard errors
and than ``MIN_GAP``, and ensemble selection on the out-of-fold predictions so far gives it no
weight (so it would not be a blend member either). A stopped candidate keeps its row on the
leaderboard with the folds it ran and why (``stopped``); it is not a blend member. Repeats after
the first run while they can still move the choice (``worth_repeating``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app import scoring
from app.evaluation import blending
from app.evaluation.blending import blend_entry
from app.evaluation.cross_validation import Entry, rank, run_folds, start_entries
from app.evaluation.pool import task_of
from app.methods.base import ProgressFn
from app.methods.blend import blendable

#: a candidate stops when the leader leads it by more than this many standard errors of the
#: paired per-fold differences...
STOP_SE = 2.0
#: ...and by more than this much of the metric (a gap the folds resolve but too small to matter
#: does not stop a candidate)
MIN_GAP = 0.01


@dataclass(frozen=True)
class Stop:
    """Why a candidate was stopped: after ``folds`` folds it was ``gap`` behind ``leader`` (paired
    mean over the common folds, ``standard_error`` of it) with no weight in the blend so far."""

    folds: int
    leader: str
    gap: float
    standard_error: float

    def record(self) -> dict[str, Any]:
        return {
            "after_folds": self.folds,
            "behind": self.leader,
            "gap": round(self.gap, 5),
            "standard_error": round(self.standard_error, 5),
        }


def rungs(cv: int, repeats: int) -> list[int]:
    """The numbers of folds after which the race is judged: half the first repeat (at least two
    folds), then the end of each repeat."""
    first = max(2, math.ceil(cv / 2))
    return sorted({min(first, cv), *(cv * r for r in range(1, repeats + 1))})


def paired_gap(entry: Entry, leader: Entry, metric: str) -> tuple[float, float]:
    """The leader's lead over ``entry`` (higher = entry worse) on the folds both ran, and the
    standard error of that mean (``inf`` on fewer than two finite folds)."""
    sign = -1.0 if metric in scoring.LOWER_IS_BETTER else 1.0
    common = min(len(entry.fold_metrics), len(leader.fold_metrics))
    gaps = np.array([sign * (leader.fold_metrics[f][metric] - entry.fold_metrics[f][metric]) for f in range(common)])
    gaps = gaps[np.isfinite(gaps)]
    if gaps.size < 2:
        return (float(gaps.mean()) if gaps.size else 0.0), math.inf
    return float(gaps.mean()), float(gaps.std(ddof=1) / math.sqrt(gaps.size))


def blend_weights(
    entries: Sequence[Entry], Y: np.ndarray, kind: str, metric: str, rows: np.ndarray, repeats: int
) -> dict[int, float]:
    """Each blendable entry's share of the ensemble-selection weights on the out-of-fold
    predictions of ``rows`` in the first ``repeats`` repeats (the folds run so far), keyed by its
    index in ``entries``; empty when the metric is not blended."""
    task = task_of(kind)
    if not blending.blends_for(metric, task):
        return {}
    pool = [
        i
        for i, e in enumerate(entries)
        if e.error is None and e.oof_all is not None and blendable(e.method, e.params, task)  # type: ignore[arg-type]
    ]
    if len(pool) < 2:
        return {i: 1.0 for i in pool}
    oof = [entries[i].oof_all[:repeats] for i in pool]  # type: ignore[index]
    counts = blending.choose(oof, Y, metric, task, rows=rows).counts
    total = max(1, int(counts.sum()))
    return {i: float(c) / total for i, c in zip(pool, counts)}


def verdict(
    active: Sequence[Entry],
    Y: np.ndarray,
    kind: str,
    metric: str,
    run: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
) -> dict[int, Stop]:
    """The active entries (indices into ``active``) stopped by the folds ``run`` so far, and why."""
    running = [e for e in active if e.error is None]
    if len(running) < 2:
        return {}
    leader = rank(running, metric)[0]
    whole = len(run) // cv
    rows = np.arange(Y.shape[0]) if whole else np.unique(np.concatenate([te for _, te in run]))
    shares = blend_weights(active, Y, kind, metric, rows, max(1, whole))
    stops: dict[int, Stop] = {}
    for i, entry in enumerate(active):
        if entry is leader or entry.error is not None or shares.get(i, 0.0) > 0.0:
            continue
        gap, se = paired_gap(entry, leader, metric)
        if gap > max(STOP_SE * se, MIN_GAP):
            stops[i] = Stop(len(entry.fold_metrics), leader.method, gap, se)
    return stops


def worth_repeating(
    active: Sequence[Entry],
    Y: np.ndarray,
    kind: str,
    metric: str,
    run: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
) -> bool:
    """Whether another repeat of the folds could still move the choice. A repeat reshuffles the
    folds, which removes the noise of one partition of the rows; none is worth it once the leader
    (the blend of the candidates so far among them, by plain rather than bagged ensemble
    selection: this runs after every repeat) leads the runner-up by more than ``STOP_SE``
    standard errors of their paired per-fold differences, nor once the last repeat alone already
    picks what all the repeats pick (the same method; for a blend, the same members)."""
    ranked = rank([e for e in active if e.error is None and len(e.fold_metrics) == len(run)], metric)
    mixed = blend_entry(ranked, Y, kind, metric, run, cv, bags=0)  # unbagged: a twentieth of the cost
    ranked = rank(ranked + ([mixed] if mixed is not None else []), metric)
    if len(ranked) < 2:
        return False
    gap, se = paired_gap(ranked[1], ranked[0], metric)
    if gap > STOP_SE * se:
        return False
    if len(run) < 2 * cv:
        return True
    last = [_last_repeat(e, cv) for e in ranked]
    return _choice(rank(last, metric)[0]) != _choice(ranked[0])


def _last_repeat(entry: Entry, cv: int) -> Entry:
    """The entry as its last repeat's folds alone score it."""
    return Entry(method=entry.method, params=entry.params, fold_metrics=entry.fold_metrics[-cv:])


def _choice(entry: Entry) -> tuple[str, frozenset[str]]:
    """What a leaderboard's leader picks: its method and, for a blend, its members' methods."""
    members = entry.params.get("members") or []
    return entry.method, frozenset(str(m["method"]) for m in members)


def race(
    X: np.ndarray,
    Y: np.ndarray,
    kind: str,
    entries: Sequence[tuple[str, dict[str, Any]]],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
    metric: str,
    *,
    random_state: int | None,
    progress: ProgressFn,
    scores_only: bool,
    repeat_while_useful: bool = True,
) -> tuple[list[Entry], int]:
    """Cross-validate ``entries`` on ``splits`` (``cv`` folds a repeat) rung by rung (``rungs``),
    stopping the candidates ``verdict`` finds out of the running (their ``stopped`` says why) and
    (with ``repeat_while_useful``) the repeats once ``worth_repeating`` says no; the entries, and the number of splits run (the
    survivors ran all of them). Out-of-fold predictions are trimmed to the repeats run."""
    planned = max(1, len(splits) // cv)
    results = start_entries(entries, Y, random_state, planned)
    done = 0
    for rung in rungs(cv, planned):
        active = [e for e in results if e.stopped is None]
        if done >= cv and repeat_while_useful and not worth_repeating(active, Y, kind, metric, splits[:done], cv):
            break
        step = _scaled(progress, done / len(splits), rung / len(splits))
        run_folds(active, X, Y, splits, cv, range(done, rung), step, scores_only)
        done = rung
        for i, stop in verdict(active, Y, kind, metric, splits[:done], cv).items():
            active[i].stopped = stop.record()
    for entry in results:
        if entry.oof_all is not None and entry.oof_all.shape[0] > max(1, done // cv):
            entry.oof_all = entry.oof_all[: max(1, done // cv)]
            entry.oof_scores = entry.oof_all[-1]
    progress("cross-validation done", 1.0)
    return results, done


def _scaled(progress: ProgressFn, start: float, end: float) -> ProgressFn:
    def report(stage: str, fraction: float) -> None:
        progress(stage, start + (end - start) * min(max(fraction, 0.0), 1.0))

    return report
