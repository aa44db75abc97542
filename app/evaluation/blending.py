"""Ensemble selection on out-of-fold predictions: the blend ``"method": "auto"`` may register.

Caruana et al. (ICML 2004), as auto-sklearn's ensemble builder does it: for ``ROUNDS`` rounds add
the candidate (with replacement) whose addition gives the best metric of the averaged out-of-fold
predictions of every repeat; a member's weight is how often it was added, the best prefix is
kept, and the greedy runs on ``BAGS`` bootstrap samples whose weights are summed (the paper's
remedy for overfitting the selection). The blend's cross-validation row is cross-fitted (weights
and threshold chosen without the fold they are scored on), so ``auto`` registers a blend only
when it beats the best single candidate on the same folds. A classifier blend's label sets follow
``app.methods.thresholds``. Only ranking-type and label distribution metrics are blended: a
label-set metric keeps the single best method, since averaging scores says nothing about another
method's threshold rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app import scoring
from app.evaluation.cross_validation import Entry, fit_params, rank
from app.evaluation.pool import task_of
from app.methods.blend import blendable
from app.methods.catalog import get_method
from app.methods.thresholds import choose_rule, label_sets

#: greedy rounds per bag
ROUNDS = 10
#: bootstrap bags whose greedy weights are summed (bagged ensemble selection)
BAGS = 20
#: members with a smaller share of the summed weights are dropped (each costs a fit and a prediction)
MIN_SHARE = 0.05
#: multi-label metrics computed from scores alone (the ones a blend is chosen by)
SCORE_METRICS = frozenset({"average_precision", "ranking_loss", "one_error", "coverage"})


def blends_for(metric: str, task: str) -> bool:
    """Whether a selection by ``metric`` on a ``task`` considers a blend."""
    return task == "distribution" or metric in SCORE_METRICS


def _objective(metric: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """Higher-is-better score of predictions P for targets Y by ``metric`` (nan counts as worst)."""
    fn = getattr(scoring, metric)
    sign = -1.0 if metric in scoring.LOWER_IS_BETTER else 1.0

    def score(Y: np.ndarray, P: np.ndarray) -> float:
        value = float(fn(Y, P))
        return sign * value if math.isfinite(value) else -math.inf

    return score


def greedy_weights(predictions: Sequence[np.ndarray], Y: np.ndarray, metric: str, rounds: int = ROUNDS) -> np.ndarray:
    """Integer weights (counts) of ensemble selection with replacement over ``predictions`` (each
    (n, q), rows aligned with ``Y``); the best prefix of ``rounds`` greedy additions. Ties go to
    the earlier candidate."""
    score = _objective(metric)
    counts = np.zeros(len(predictions), dtype=np.int64)
    best_counts = counts.copy()
    best = -math.inf
    total = np.zeros_like(predictions[0], dtype=np.float64)
    for r in range(1, rounds + 1):
        trial = [score(Y, (total + P) / r) for P in predictions]
        i = int(np.argmax(trial))
        counts[i] += 1
        total += predictions[i]
        if trial[i] > best:
            best, best_counts = trial[i], counts.copy()
    return best_counts


def blend(predictions: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """The weighted mean of ``predictions`` (weights need not be normalised)."""
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros_like(predictions[0], dtype=np.float64)
    for weight, P in zip(w, predictions):
        if weight:
            out += weight * P
    return out / w.sum()


@dataclass
class BlendChoice:
    """Weights (counts, one per candidate) and, for classifiers, the label-set rule."""

    counts: np.ndarray
    threshold: float | None
    #: classifiers: a row left empty gets its top-scored label
    fill_empty: bool = False


def _pooled(oof: Sequence[np.ndarray], Y: np.ndarray, rows: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The out-of-fold predictions of samples ``rows`` in every repeat, stacked, and their targets."""
    stacked = [P[:, rows].reshape(-1, P.shape[-1]) for P in oof]
    return stacked, np.concatenate([Y[rows]] * oof[0].shape[0])


def choose(
    oof: Sequence[np.ndarray],
    Y: np.ndarray,
    metric: str,
    task: str,
    rows: np.ndarray | None = None,
    *,
    bags: int = BAGS,
    min_share: float = MIN_SHARE,
) -> BlendChoice:
    """Bagged ensemble selection on the out-of-fold predictions ``oof`` (each (repeats, n, q)) of
    the samples ``rows`` (default all), every repeat pooled.

    Greedy selection follows noise when candidates are nearly tied (a lead of a few thousandths
    in cross-validation takes most of the weight), so, as Caruana et al. propose, it runs on
    ``bags`` bootstrap samples of the samples (a fixed seed: the same data give the same blend)
    and the weights are summed over the bags; members under ``min_share`` of the total are
    dropped. ``bags=0`` is plain ensemble selection on every row. The label-set rule (threshold
    and ``fill_empty``) is chosen on every row with the final weights."""
    samples = np.arange(Y.shape[0]) if rows is None else np.asarray(rows)
    rng = np.random.default_rng(0)
    counts = np.zeros(len(oof), dtype=np.int64)
    for _ in range(bags):
        stacked, target = _pooled(oof, Y, rng.choice(samples, size=samples.size, replace=True))
        counts += greedy_weights(stacked, target, metric)
    if not bags:
        counts = greedy_weights(*_pooled(oof, Y, samples), metric)
    counts[counts < min_share * counts.sum()] = 0
    if task != "multilabel":
        return BlendChoice(counts, None)
    stacked, target = _pooled(oof, Y, samples)
    threshold, fill = choose_rule(target, blend(stacked, counts))
    return BlendChoice(counts, threshold, fill)


def fold_scores(
    oof: Sequence[np.ndarray],
    Y: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
    metric: str,
    task: str,
    **options: Any,
) -> list[dict[str, float]]:
    """The cross-fitted metrics of the blend on every fold: weights and label-set rule chosen on the
    samples outside the fold, scored on the fold (split s belongs to repeat ``s // cv``)."""
    n = Y.shape[0]
    out = []
    for s, (_, te) in enumerate(splits):
        outside = np.ones(n, dtype=bool)
        outside[te] = False
        choice = choose(oof, Y, metric, task, rows=np.flatnonzero(outside), **options)
        P = blend([pred[s // cv, te] for pred in oof], choice.counts)
        if task == "distribution":
            out.append(scoring.ldl_metrics(Y[te], P))
        else:
            assert choice.threshold is not None
            Yhat = label_sets(P, choice.threshold, choice.fill_empty).astype(np.int8)
            out.append(scoring.multilabel_metrics(Y[te], Yhat, P))
    return out


def blend_entry(
    results: Sequence[Entry],
    Y: np.ndarray,
    kind: str,
    metric: str,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
    bags: int = BAGS,
) -> Entry | None:
    """The ensemble-selection blend of the cross-validated ``results`` as one more leaderboard
    entry (method ``blend`` or ``blend-ldl``, members and weights in its params, cross-fitted fold
    metrics on ``splits``: ``app.evaluation.blending``), or None when there is nothing to blend: fewer than
    two blendable entries that ran on every fold, a label-set metric, or a greedy choice of one
    member alone. A label distribution learner that never beat the training mean on a fold
    (``beats_the_mean``) is not a member. ``bags``: as ``choose`` (0: plain ensemble selection)."""
    task = task_of(kind)
    if not blends_for(metric, task):
        return None
    pool = _blend_pool(results, Y, task, metric, splits)
    if len(pool) < 2:
        return None
    oof = [e.oof_all for e in pool if e.oof_all is not None]
    final = choose(oof, Y, metric, task, bags=bags)
    if np.count_nonzero(final.counts) < 2:
        return None
    order = sorted(np.flatnonzero(final.counts), key=lambda i: -final.counts[i])  # stable: better entry first
    members = [
        {"method": pool[i].method, "params": _member_params(pool[i]), "weight": float(final.counts[i])} for i in order
    ]
    params: dict[str, Any] = {"members": members}
    if task == "multilabel":
        params["threshold"] = final.threshold
        params["fill_empty"] = final.fill_empty
    entry = Entry(method="blend" if task == "multilabel" else "blend-ldl", params=params)
    entry.fold_metrics = fold_scores(oof, Y, splits, cv, metric, task, bags=bags)
    entry.fit_seconds = [sum(pool[i].fit_seconds[s] for i in order) for s in range(len(splits))]
    entry.oof_all = np.stack([blend([pred[r] for pred in oof], final.counts) for r in range(oof[0].shape[0])])
    entry.oof_scores = entry.oof_all[-1]
    if task == "multilabel":
        entry.oof_labels = label_sets(entry.oof_scores, params["threshold"], final.fill_empty).astype(np.int8)
    return entry


def _blend_pool(
    results: Sequence[Entry], Y: np.ndarray, task: str, metric: str, splits: Sequence[tuple[np.ndarray, np.ndarray]]
) -> list[Entry]:
    """The entries a blend may take, best first: blendable, run on every fold, and for label
    distributions better than the training mean on some fold."""
    pool = [
        e
        for e in rank(results, metric)
        if e.error is None
        and e.oof_all is not None
        and len(e.fold_metrics) == len(splits)
        and blendable(e.method, e.params, task)  # type: ignore[arg-type]
    ]
    if task == "distribution":
        pool = [e for e in pool if beats_the_mean(e, Y, splits, metric)]
    return pool


def beats_the_mean(entry: Entry, D: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]], metric: str) -> bool:
    """Whether a label distribution learner's ``metric`` beat predicting the fold's training mean
    on at least one fold. One that never did (``ldlkm`` at the paper's defaults on the yeast sets,
    issue 27) adds nothing a blend could not get from the others, yet took weight in greedy
    selection on noise; it is left out of the blend (it stays on the leaderboard)."""
    lower = metric in scoring.LOWER_IS_BETTER
    for (tr, te), fold in zip(splits, entry.fold_metrics):
        mean = np.tile(D[tr].mean(axis=0), (len(te), 1))
        baseline = scoring.ldl_metrics(D[te], mean)[metric]
        value = fold[metric]
        if math.isfinite(value) and (value < baseline if lower else value > baseline):
            return True
    return False


def _member_params(entry: Entry) -> dict[str, Any]:
    """A blend member's parameters: the entry's, with ``threshold=0.5`` where the method would
    learn one (a blend uses its members' scores only, so their inner threshold fits are wasted)."""
    spec = get_method(entry.method)
    assert spec is not None
    return fit_params(spec, entry.params, scores_only=True)
