"""Cross-validation of (method, parameters) entries on one dataset's folds.

Multi-label folds come from iterative stratification (``iterative-stratification``), so each
fold gets its share of every label's positives; label distributions use shuffled k-fold.
Selectors are scored by ML-kNN on their top features. Nothing outside the dataset is used, so a
user's test split stays untouched.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from iterstrat.ml_stratifiers import MultilabelStratifiedKFold, RepeatedMultilabelStratifiedKFold
from sklearn.model_selection import KFold, RepeatedKFold
from threadpoolctl import threadpool_limits

from app import scoring
from app.methods.base import JobCancelled, MethodSpec, ProgressFn, no_progress
from app.methods.catalog import get_method
from app.methods.graph_cache import sharing_graphs
from app.methods.mlknn import MLkNN
from app.methods.thresholds import LearnedThresholdMixin

log = logging.getLogger("labelserve.selection")
#: fractions of features at which selectors are scored for the report's curve
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)  # 1.0: the all-features reference of the report
#: the fraction at which selectors are ranked (ELCFS's protocol, as ``POST /evaluate``)
SELECTOR_FRACTION = 0.2
#: methods whose fits build the same leave-one-out neighbour graph (shared within a selection)
GRAPH_METHODS = frozenset({"mlknn", "dmknn"})


def folds(
    Y: np.ndarray, kind: str, cv: int, random_state: int | None, repeats: int = 1
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``cv * repeats`` (train, held-out) index pairs, each repeat a fresh shuffle; iterative
    stratification for multi-label data."""
    n = Y.shape[0]
    if not 2 <= cv <= n:
        raise ValueError(f"cv must be in [2, {n}] for {n} samples, got {cv}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    splitter: Any
    if kind == "distribution":
        splitter = (
            KFold(n_splits=cv, shuffle=True, random_state=random_state)
            if repeats == 1
            else RepeatedKFold(n_splits=cv, n_repeats=repeats, random_state=random_state)
        )
    elif repeats == 1:
        splitter = MultilabelStratifiedKFold(n_splits=cv, shuffle=True, random_state=random_state)
    else:
        splitter = RepeatedMultilabelStratifiedKFold(n_splits=cv, n_repeats=repeats, random_state=random_state)
    return [(np.asarray(tr), np.asarray(te)) for tr, te in splitter.split(np.zeros((n, 1)), (Y > 0).astype(int))]


@dataclass
class Entry:
    """One (method, parameters) point of a leaderboard and what cross-validation measured."""

    method: str
    params: dict[str, Any]
    fold_metrics: list[dict[str, float]] = field(default_factory=list)
    fit_seconds: list[float] = field(default_factory=list)
    #: seconds of each fold: fit, predict the held-out part, score it
    fold_seconds: list[float] = field(default_factory=list)
    #: the pilot's prediction of the cross-validation's seconds (None: not priced)
    predicted_seconds: float | None = None
    #: the entry whose ranking this one provably shares (evaluated once, as that entry)
    same_ranking_as: str | None = None
    #: out-of-fold predictions of the last repeat: scores (classifiers), distributions (LDL); None
    #: for selectors
    oof_scores: np.ndarray | None = None
    oof_labels: np.ndarray | None = None
    #: out-of-fold scores or distributions of every repeat, (repeats, n, q) (what blends are chosen on)
    oof_all: np.ndarray | None = None
    #: the race stopped it (``app.evaluation.racing.Stop.record``): after how many folds, and why
    stopped: dict[str, Any] | None = None
    #: selectors: downstream average precision per fraction of features, one list per fold
    curve: dict[float, list[float]] = field(default_factory=dict)
    error: str | None = None

    def mean(self, metric: str) -> float:
        values = [f[metric] for f in self.fold_metrics if metric in f and math.isfinite(f[metric])]
        return float(np.mean(values)) if values else math.nan

    def std(self, metric: str) -> float:
        values = [f[metric] for f in self.fold_metrics if metric in f and math.isfinite(f[metric])]
        return float(np.std(values)) if values else math.nan

    def summary(self, names: Sequence[str]) -> dict[str, dict[str, float | None]]:
        return {name: {"mean": finite(self.mean(name)), "std": finite(self.std(name))} for name in names}


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def rank(entries: Sequence[Entry], metric: str) -> list[Entry]:
    """Best first by the mean of ``metric``; failed or undefined entries last (stable otherwise)."""
    lower = metric in scoring.LOWER_IS_BETTER

    def key(entry: Entry) -> tuple[int, float]:
        value = entry.mean(metric)
        if entry.error is not None or not math.isfinite(value):
            return (1, 0.0)
        return (0, value if lower else -value)

    return sorted(entries, key=key)


def seeded(spec: MethodSpec, params: dict[str, Any], random_state: int | None) -> dict[str, Any]:
    if "random_state" in spec.params.model_fields and params.get("random_state") is None and random_state is not None:
        return {**params, "random_state": random_state}
    return dict(params)


def _selector_scores(
    selector: Any, X: np.ndarray, Y: np.ndarray, tr: np.ndarray, te: np.ndarray
) -> tuple[dict[str, float], dict[float, float]]:
    """ML-kNN (k=10) on the selector's top features: every metric at ``SELECTOR_FRACTION``, AP per fraction."""
    ranking = np.asarray(selector.ranking_)
    d = ranking.size
    curve: dict[float, float] = {}
    at_default: dict[str, float] = {}
    for fraction in sorted(set(FRACTIONS) | {SELECTOR_FRACTION}):
        keep = ranking[: max(1, int(round(fraction * d)))]
        knn = MLkNN(k=min(10, len(tr) - 1)).fit(X[tr][:, keep], Y[tr])
        S = knn.decision_function(X[te][:, keep])
        curve[fraction] = scoring.average_precision(Y[te], S)
        if fraction == SELECTOR_FRACTION:
            at_default = scoring.multilabel_metrics(Y[te], knn.predict(X[te][:, keep]), S)
    return at_default, curve


def cross_validate(
    X: np.ndarray,
    Y: np.ndarray,
    kind: str,
    entries: Sequence[tuple[str, dict[str, Any]]],
    *,
    cv: int = 5,
    repeats: int = 1,
    random_state: int | None = 0,
    progress: ProgressFn | None = None,
    splits: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    scores_only: bool = False,
) -> list[Entry]:
    """Every entry fitted on each fold's training part and scored on its held-out part.

    With ``repeats`` > 1 each sample is held out once per repeat: ``oof_all`` keeps the
    out-of-fold predictions of every repeat, ``oof_scores`` / ``oof_labels`` those of the last;
    the fold metrics are those of every fold. ``splits`` (default ``folds(Y, kind, cv,
    random_state, repeats)``) are the folds, repeat after repeat. ``scores_only``: the ranking needs the
    scores alone, so the methods that learn a label-set threshold on inner folds are fitted at 0.5
    (``fit_params``).

    A candidate that fails on some fold (e.g. a parameter that does not fit the fold's size) is
    kept with its ``error`` and ranked last; ``JobCancelled`` from ``progress`` stops everything.
    BLAS runs single-threaded: the fits are small and BLAS threads competing for the cores of a
    shared machine cost far more than they gain. When several entries search neighbours the
    same way (``mlknn`` and ``dmknn`` with the same k), each fold's neighbour graph is computed
    once and shared (:func:`app.methods.graph_cache.sharing_graphs`).
    """
    progress = progress or no_progress
    if splits is None:
        splits = folds(Y, kind, cv, random_state, repeats)
    results = start_entries(entries, Y, random_state, max(1, len(splits) // cv))
    run_folds(results, X, Y, splits, cv, range(len(splits)), progress, scores_only)
    progress("cross-validation done", 1.0)
    return results


def start_entries(
    entries: Sequence[tuple[str, dict[str, Any]]], Y: np.ndarray, random_state: int | None, repeats: int
) -> list[Entry]:
    """Empty, seeded entries with room for the out-of-fold predictions of ``repeats`` repeats."""
    out = []
    for method, params in entries:
        spec = get_method(method)
        if spec is None:
            raise ValueError(f"unknown method '{method}'")
        out.append(empty_entry(spec, method, seeded(spec, params, random_state), Y, repeats))
    return out


def run_folds(
    results: Sequence[Entry],
    X: np.ndarray,
    Y: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
    fold_range: range,
    progress: ProgressFn,
    scores_only: bool,
) -> None:
    """Fit and score every entry without an error on the folds ``fold_range`` of ``splits`` (the
    next ones it has not run), entry after entry; ``progress`` goes from 0 to 1 over them."""
    total = max(1, len(results) * len(fold_range))
    entries = [(e.method, e.params) for e in results]
    sharing = sharing_graphs() if graph_users(entries) > 1 else nullcontext()
    with threadpool_limits(limits=1, user_api="blas"), sharing:
        for e, entry in enumerate(results):
            spec = get_method(entry.method)
            assert spec is not None
            for f in fold_range:
                if entry.error is not None:
                    break
                tr, te = splits[f]
                step = e * len(fold_range) + f - fold_range.start
                label = f"{entry.method} ({e + 1}/{len(results)}) fold {f + 1}/{len(splits)}"

                def inner(stage: str, fraction: float, label: str = label, step: int = step) -> None:
                    progress(f"{label}: {stage}", (step + min(max(fraction, 0.0), 1.0)) / total)

                progress(label, step / total)
                try:
                    entry_fold = fit_and_score(spec, entry, X, Y, tr, te, inner, f // cv, scores_only)
                except JobCancelled:
                    raise
                except ValueError as exc:  # the method's own complaint about this data: worth showing
                    entry.error = f"fold {f + 1}: {exc}"
                    break
                except Exception:  # anything else is internal: logged, not shown
                    log.exception("candidate %s failed on fold %d", entry.method, f + 1)
                    entry.error = f"fold {f + 1}: the fit failed (details in the service log)"
                    break
                entry.fold_metrics.append(entry_fold)


def empty_entry(spec: MethodSpec, method: str, params: dict[str, Any], Y: np.ndarray, repeats: int) -> Entry:
    """An empty entry with room for the out-of-fold predictions of ``repeats`` repeats."""
    entry = Entry(method=method, params=dict(params))
    if spec.task != "selection":
        entry.oof_all = np.zeros((repeats, *Y.shape))
        entry.oof_scores = entry.oof_all[-1]
        entry.oof_labels = np.zeros(Y.shape, dtype=np.int8) if spec.task == "multilabel" else None
    return entry


def graph_users(entries: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """How many entries build a leave-one-out neighbour graph (the kNN classifiers)."""
    return sum(method in GRAPH_METHODS for method, _ in entries)


def fit_params(spec: MethodSpec, params: dict[str, Any], scores_only: bool) -> dict[str, Any]:
    """What a fold fits ``spec`` with: ``params``, and when only the scores count (a ranking
    metric), ``threshold=0.5`` for a method whose default learns its label-set threshold on inner
    folds (``app.methods.thresholds``: three more fits each). The entry keeps its own parameters,
    so the registered winner learns its threshold; the fold's label-set metrics are then those of
    the 0.5 rule."""
    if scores_only and issubclass(spec.estimator, LearnedThresholdMixin) and "threshold" not in params:
        return {**params, "threshold": 0.5}
    return params


def fit_and_score(
    spec: MethodSpec,
    entry: Entry,
    X: np.ndarray,
    Y: np.ndarray,
    tr: np.ndarray,
    te: np.ndarray,
    progress: ProgressFn,
    repeat: int = 0,
    scores_only: bool = False,
) -> dict[str, float]:
    started = time.perf_counter()
    scores = _score_fold(spec, entry, X, Y, tr, te, progress, repeat, scores_only)
    entry.fold_seconds.append(time.perf_counter() - started)
    return scores


def _score_fold(
    spec: MethodSpec,
    entry: Entry,
    X: np.ndarray,
    Y: np.ndarray,
    tr: np.ndarray,
    te: np.ndarray,
    progress: ProgressFn,
    repeat: int,
    scores_only: bool,
) -> dict[str, float]:
    estimator = spec.build(fit_params(spec, entry.params, scores_only))
    started = time.perf_counter()
    estimator.fit(X[tr], Y[tr], progress=progress)
    entry.fit_seconds.append(time.perf_counter() - started)
    if spec.task == "selection":
        scores, curve = _selector_scores(estimator, X, Y, tr, te)
        for fraction, value in curve.items():
            entry.curve.setdefault(fraction, []).append(value)
        return scores
    if spec.task == "distribution":
        P = estimator.predict(X[te])
        assert entry.oof_all is not None
        entry.oof_all[repeat, te] = P
        return scoring.ldl_metrics(Y[te], P)
    S = estimator.decision_function(X[te])
    Yhat = estimator.predict(X[te])
    assert entry.oof_all is not None and entry.oof_labels is not None
    entry.oof_all[repeat, te] = S
    entry.oof_labels[te] = Yhat  # the last repeat run's
    return scoring.multilabel_metrics(Y[te], Yhat, S)
