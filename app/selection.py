"""Model selection and comparison by cross-validation on one dataset.

``POST /train`` with ``"method": "auto"`` and ``POST /compare`` share this module: it splits the
dataset into folds, fits every (method, parameters) entry on each training part, scores it on the
held-out part with every metric of the task, and ranks the entries by one metric. Nothing outside
the dataset is used, so a user's test split stays untouched.

Folds. Multi-label data is split by iterative stratification (Sechidis et al. 2011, the
``iterative-stratification`` package): each fold gets about its share of every label's positives,
which a plain shuffled split does not guarantee for rare labels. Label distributions use shuffled
k-fold. A selection on a small dataset (under ``SMALL_N`` samples) by default uses 10 folds,
repeated up to 3 times with fresh shuffles while the expected cost stays within a quarter of the
budget (``resampling``). Two effects made 5 single folds pick the wrong method there: each
training part holds 80% of an already small set, which penalises the learners that gain most from
more rows (forests, nearest neighbours; on SJAFFE aa-knn ranked behind sa-maxent with 136
training rows and ahead with 153), and one split of a few hundred rows is noisy (birds: the
ranking of rf, ecc and br changed with the shuffle seed; 30 folds average that out).

Candidates. By default every classifier (or every label distribution learner) whose expected cost
fits ``budget_seconds``; methods marked expensive are tried only when named. The expected cost of
one fit is a rough model in n, d and q per method (``_COST``), fitted to timings of one fit on a
shared 2-core machine; the candidates' cross-validation cost is ``cv`` times that.

Grids (``tune=True``): every combination of the method's grid in ``GRIDS`` is one more entry of
the leaderboard. They are small on purpose (at most 4 points) because each point costs ``cv``
fits; they cover the parameter that moves results most for each method.

Selectors (compare only) are scored by what they are for: ML-kNN (k=10) trained on their top 20%
of features, with every multi-label metric of that classifier; the average precision at other
fractions (``FRACTIONS``) is kept for the report's curve.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from iterstrat.ml_stratifiers import MultilabelStratifiedKFold, RepeatedMultilabelStratifiedKFold
from pydantic import BaseModel, ConfigDict, Field
from sklearn.model_selection import KFold, RepeatedKFold
from threadpoolctl import threadpool_limits

from app import blending, metrics
from app.methods.base import JobCancelled, MethodSpec, ProgressFn, no_progress
from app.methods.blend import BLENDS, blendable
from app.methods.catalog import catalog, get_method
from app.methods.mlknn import MLkNN
from app.methods.neighbours import sharing_graphs

log = logging.getLogger("labelserve.selection")

#: fractions of features at which selectors are scored for the report's curve
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)  # 1.0: the all-features reference of the report
#: the fraction at which selectors are ranked (ELCFS's protocol, as ``POST /evaluate``)
SELECTOR_FRACTION = 0.2
#: the method id of ``POST /train`` that selects the method
AUTO = "auto"
#: default budget for the candidates' cross-validation, in expected seconds
DEFAULT_BUDGET_SECONDS = 600.0
#: below this many samples a selection uses more (and repeated) folds by default
SMALL_N = 1000
#: (folds, repeats) tried for a small dataset, most thorough first
_SMALL_RESAMPLING = ((10, 3), (10, 2), (10, 1))
#: share of the budget the extra folds of a small dataset may take
_RESAMPLING_SHARE = 0.25

#: methods whose fits build the same leave-one-out neighbour graph (shared within a selection)
GRAPH_METHODS = frozenset({"mlknn", "dmknn"})
#: methods tried only when named: their cost grows too fast with the data for a default sweep
EXPENSIVE = frozenset({"trans-ovk", "ghc-dr"})

#: documented grids for ``tune=True`` (every combination is evaluated)
GRIDS: dict[str, dict[str, list[Any]]] = {
    "br": {"C": [0.1, 1.0, 10.0]},
    "ecc": {"C": [0.1, 1.0, 10.0]},
    "rf": {"max_features": ["sqrt", 0.3], "min_samples_leaf": [1, 3]},
    "mlknn": {"k": [5, 10, 20]},
    "dmknn": {"k": [5, 10, 20]},
    "trans-ovk": {"lambda_k": [1e-3, 1e-2, 1e-1]},
    "aa-knn": {"k": [3, 5, 10, 20]},
    "sa-maxent": {"alpha": [1e-4, 1e-3, 1e-2, 1e-1]},
    "ldlkm": {"k": [3, 5, 10]},
    "mi-filter": {"estimator": ["binned", "knn"]},
    "elcfs": {"lambda4": [0.1, 1.0]},
    "ghc-dr": {"alpha": [0.1, 1.0]},
}


def _cost(method: str, n: int, d: int, q: int) -> float:
    """Expected seconds of one fit on n x d data with q labels (rough, from measured fits)."""
    size = n * d * q
    models: dict[str, Callable[[], float]] = {
        "br": lambda: 3.8 * size / (1600 * 462 * 26),
        "ecc": lambda: 10.0 * size / (1600 * 462 * 26),
        "rf": lambda: 26.0 * (n / 1600) ** 1.2 * math.sqrt(d / 462) * (q / 26) ** 0.5,
        "mlknn": lambda: 0.5 * (n / 1600) ** 2 * (d / 462) + 0.01 * q,
        "dmknn": lambda: 0.7 * (n / 1600) ** 2 * (d / 462) + 0.02 * q,
        "trans-ovk": lambda: 5.0 * (n / 400) ** 3 * (d / 72),
        "aa-knn": lambda: 0.05 + 1.1 * (n / 6200) ** 2 * (d / 1869),
        "sa-maxent": lambda: max(1.0, 58.0 * size / (6200 * 1869 * 5)),
        "ldlkm": lambda: 0.05 + 3.7 * (n * d) / (6200 * 1869),
        "mi-filter": lambda: 0.2 * size / (1600 * 462 * 26),  # the binned estimator used in sweeps
        "elcfs": lambda: 2.0 * (d / 300) ** 2 * (q / 6),
        "ghc-dr": lambda: 3.0 * (n / 1200) ** 2 * (d / 300),
    }
    return float(models[method]()) if method in models else 1.0


def expected_cost(method: str, n: int, d: int, q: int) -> float:
    """Expected seconds of one fit of ``method`` (a rough model; 1 s for unknown methods)."""
    return _cost(method, n, d, q)


def task_of(kind: str) -> str:
    """The method task that fits a dataset kind (and is ranked in a selection)."""
    return "distribution" if kind == "distribution" else "multilabel"


def default_metric(kind: str) -> str:
    return "chebyshev" if kind == "distribution" else "average_precision"


def metric_names(task: str) -> tuple[str, ...]:
    return metrics.LDL_METRICS if task == "distribution" else metrics.MULTILABEL_METRICS


def default_candidates(
    kind: str, n: int, d: int, q: int, cv: int, *, tasks: Sequence[str] | None = None, budget: float | None = None
) -> list[str]:
    """Methods of the kind's tasks, not expensive, whose expected cross-validation cost fits the
    budget (cheapest first while the running total fits; the cheapest always runs)."""
    tasks = tuple(tasks or (task_of(kind),))
    budget = DEFAULT_BUDGET_SECONDS if budget is None else budget
    pool = [
        spec.id
        for spec in catalog().values()
        if spec.task in tasks and spec.dataset_kind == kind and spec.id not in EXPENSIVE and spec.id not in BLENDS
    ]
    pool.sort(key=lambda m: expected_cost(m, n, d, q))
    chosen: list[str] = []
    total = 0.0
    for method in pool:
        cost = cv * expected_cost(method, n, d, q)
        if chosen and total + cost > budget:
            continue
        chosen.append(method)
        total += cost
    return sorted(chosen)


def grid(method: str) -> list[dict[str, Any]]:
    """Every parameter combination of the method's documented grid (``[{}]`` when it has none)."""
    axes = GRIDS.get(method, {})
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))] or [{}]


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


# ---------------------------------------------------------------------------------- results
@dataclass
class Entry:
    """One (method, parameters) point of a leaderboard and what cross-validation measured."""

    method: str
    params: dict[str, Any]
    fold_metrics: list[dict[str, float]] = field(default_factory=list)
    fit_seconds: list[float] = field(default_factory=list)
    #: out-of-fold predictions of the last repeat: scores (classifiers), distributions (LDL); None
    #: for selectors
    oof_scores: np.ndarray | None = None
    oof_labels: np.ndarray | None = None
    #: out-of-fold scores or distributions of every repeat, (repeats, n, q) (what blends are chosen on)
    oof_all: np.ndarray | None = None
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
        return {name: {"mean": _finite(self.mean(name)), "std": _finite(self.std(name))} for name in names}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def rank(entries: Sequence[Entry], metric: str) -> list[Entry]:
    """Best first by the mean of ``metric``; failed or undefined entries last (stable otherwise)."""
    lower = metric in metrics.LOWER_IS_BETTER

    def key(entry: Entry) -> tuple[int, float]:
        value = entry.mean(metric)
        if entry.error is not None or not math.isfinite(value):
            return (1, 0.0)
        return (0, value if lower else -value)

    return sorted(entries, key=key)


# ------------------------------------------------------------------------------ evaluation
def _seeded(spec: MethodSpec, params: dict[str, Any], random_state: int | None) -> dict[str, Any]:
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
        curve[fraction] = metrics.average_precision(Y[te], S)
        if fraction == SELECTOR_FRACTION:
            at_default = metrics.multilabel_metrics(Y[te], knn.predict(X[te][:, keep]), S)
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
) -> list[Entry]:
    """Every entry fitted on each fold's training part and scored on its held-out part.

    With ``repeats`` > 1 each sample is held out once per repeat: ``oof_all`` keeps the
    out-of-fold predictions of every repeat, ``oof_scores`` / ``oof_labels`` those of the last;
    the fold metrics are those of every fold. ``splits`` (default ``folds(Y, kind, cv,
    random_state, repeats)``) are the folds, repeat after repeat.

    A candidate that fails on some fold (e.g. a parameter that does not fit the fold's size) is
    kept with its ``error`` and ranked last; ``JobCancelled`` from ``progress`` stops everything.
    BLAS runs single-threaded: the fits are small and BLAS threads competing for the cores of a
    shared machine cost far more than they gain. When several entries search neighbours the
    same way (``mlknn`` and ``dmknn`` with the same k), each fold's neighbour graph is computed
    once and shared (:func:`app.methods.neighbours.sharing_graphs`).
    """
    progress = progress or no_progress
    if splits is None:
        splits = folds(Y, kind, cv, random_state, repeats)
    results: list[Entry] = []
    total = len(entries) * len(splits)
    sharing = sharing_graphs() if _graph_users(entries) > 1 else nullcontext()
    with threadpool_limits(limits=1, user_api="blas"), sharing:
        for e, (method, params) in enumerate(entries):
            spec = get_method(method)
            if spec is None:
                raise ValueError(f"unknown method '{method}'")
            entry = Entry(method=method, params=_seeded(spec, params, random_state))
            if spec.task != "selection":
                entry.oof_all = np.zeros((max(1, len(splits) // cv), *Y.shape))
                entry.oof_scores = entry.oof_all[-1]
                entry.oof_labels = np.zeros(Y.shape, dtype=np.int8) if spec.task == "multilabel" else None
            for f, (tr, te) in enumerate(splits):
                step = e * len(splits) + f
                label = f"{method} ({e + 1}/{len(entries)}) fold {f + 1}/{len(splits)}"

                def inner(stage: str, fraction: float, label: str = label, step: int = step) -> None:
                    progress(f"{label}: {stage}", (step + min(max(fraction, 0.0), 1.0)) / total)

                progress(label, step / total)
                try:
                    entry_fold = _fit_and_score(spec, entry, X, Y, tr, te, inner, f // cv)
                except JobCancelled:
                    raise
                except ValueError as exc:  # the method's own complaint about this data: worth showing
                    entry.error = f"fold {f + 1}: {exc}"
                    break
                except Exception:  # anything else is internal: logged, not shown
                    log.exception("candidate %s failed on fold %d", method, f + 1)
                    entry.error = f"fold {f + 1}: the fit failed (details in the service log)"
                    break
                entry.fold_metrics.append(entry_fold)
            results.append(entry)
    progress("cross-validation done", 1.0)
    return results


def _graph_users(entries: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """How many entries build a leave-one-out neighbour graph (the kNN classifiers)."""
    return sum(method in GRAPH_METHODS for method, _ in entries)


def _fit_and_score(
    spec: MethodSpec,
    entry: Entry,
    X: np.ndarray,
    Y: np.ndarray,
    tr: np.ndarray,
    te: np.ndarray,
    progress: ProgressFn,
    repeat: int = 0,
) -> dict[str, float]:
    estimator = spec.build(entry.params)
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
        return metrics.ldl_metrics(Y[te], P)
    S = estimator.decision_function(X[te])
    Yhat = estimator.predict(X[te])
    assert entry.oof_all is not None and entry.oof_labels is not None
    entry.oof_all[repeat, te] = S
    if repeat == entry.oof_all.shape[0] - 1:
        entry.oof_labels[te] = Yhat
    return metrics.multilabel_metrics(Y[te], Yhat, S)


# ------------------------------------------------------------------------------- selection
@dataclass
class Selection:
    """The outcome of ``select``: the leaderboard (best first) and the winning entry."""

    metric: str
    cv: int
    leaderboard: list[Entry]
    repeats: int = 1

    @property
    def best(self) -> Entry:
        return self.leaderboard[0]

    def record(self) -> dict[str, Any]:
        """What the version record stores under ``selection``."""
        return {
            "metric": self.metric,
            "cv": self.cv,
            "repeats": self.repeats,
            "leaderboard": [
                {
                    "method": e.method,
                    "params": e.params,
                    "mean": _finite(e.mean(self.metric)),
                    "std": _finite(e.std(self.metric)),
                    **({"error": e.error} if e.error else {}),
                }
                for e in self.leaderboard
            ],
        }


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
    """Cross-validate ``methods`` (default: the kind's methods within budget, selectors included for
    multi-label data) at their defaults and rank them by ``metric``."""
    metric = metric or default_metric(kind)
    tasks = ("multilabel", "selection") if kind == "multilabel" else ("distribution",)
    n, d, q = X.shape[0], X.shape[1], Y.shape[1]
    chosen = list(methods) if methods else default_candidates(kind, n, d, q, cv, tasks=tasks, budget=budget)
    entries = [(m, {"estimator": "binned"} if m == "mi-filter" and not methods else {}) for m in chosen]
    results = cross_validate(X, Y, kind, entries, cv=cv, random_state=random_state, progress=progress)
    return Comparison(metric=metric, cv=cv, metric_names=metric_names(task_of(kind)), leaderboard=rank(results, metric))


def plan(
    kind: str,
    shape: tuple[int, int, int],
    *,
    candidates: Sequence[str] | None = None,
    cv: int = 5,
    tune: bool = False,
    tasks: Sequence[str] | None = None,
    budget: float | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The (method, params) entries a selection or comparison evaluates."""
    n, d, q = shape
    methods = list(candidates) if candidates else default_candidates(kind, n, d, q, cv, tasks=tasks, budget=budget)
    return [(m, p) for m in methods for p in (grid(m) if tune else [{}])]


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
    progress: ProgressFn | None = None,
) -> Selection:
    """Rank the candidates of ``plan`` by cross-validated ``metric`` (default: the kind's).

    ``cv`` and ``repeats`` default to ``resampling`` (10 folds, repeated, on small datasets; 5
    otherwise); the candidates are those that fit the budget at 5 folds, so the extra folds of a
    small dataset never cost a candidate.
    """
    metric = metric or default_metric(kind)
    shape = (X.shape[0], X.shape[1], Y.shape[1])
    entries = plan(kind, shape, candidates=candidates, cv=cv or 5, tune=tune, budget=budget)
    if cv is None or repeats is None:
        per_fit = sum(expected_cost(m, *shape) for m, _ in entries)
        auto_cv, auto_repeats = resampling(shape[0], per_fit, budget)
        if cv is None:
            cv = min(auto_cv, shape[0])
        repeats = repeats or (auto_repeats if cv == auto_cv else 1)
    splits = folds(Y, kind, cv, random_state, repeats)
    results = cross_validate(
        X, Y, kind, entries, cv=cv, repeats=repeats, random_state=random_state, progress=progress, splits=splits
    )
    mixed = blend_entry(results, Y, kind, metric, splits, cv)
    ranked = rank(results + ([mixed] if mixed is not None else []), metric)
    if ranked[0].error is not None or not math.isfinite(ranked[0].mean(metric)):
        raise ValueError(f"no candidate could be evaluated: {ranked[0].error or 'metric undefined on every fold'}")
    return Selection(metric=metric, cv=cv, repeats=repeats, leaderboard=ranked)


def blend_entry(
    results: Sequence[Entry],
    Y: np.ndarray,
    kind: str,
    metric: str,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    cv: int,
) -> Entry | None:
    """The ensemble-selection blend of the cross-validated ``results`` as one more leaderboard
    entry (method ``blend`` or ``blend-ldl``, members and weights in its params, cross-fitted fold
    metrics on ``splits``: ``app.blending``), or None when there is nothing to blend: fewer than
    two blendable entries that ran on every fold, a label-set metric, or a greedy choice of one
    member alone."""
    task = task_of(kind)
    if not blending.blends_for(metric, task):
        return None
    pool = [
        e
        for e in rank(results, metric)
        if e.error is None
        and e.oof_all is not None
        and len(e.fold_metrics) == len(splits)
        and blendable(e.method, e.params, task)  # type: ignore[arg-type]
    ]
    if len(pool) < 2:
        return None
    oof = [e.oof_all for e in pool if e.oof_all is not None]
    final = blending.choose(oof, Y, metric, task)
    if np.count_nonzero(final.counts) < 2:
        return None
    order = sorted(np.flatnonzero(final.counts), key=lambda i: -final.counts[i])  # stable: better entry first
    members = [{"method": pool[i].method, "params": pool[i].params, "weight": float(final.counts[i])} for i in order]
    params: dict[str, Any] = {"members": members}
    if task == "multilabel":
        params["threshold"] = final.threshold
    entry = Entry(method="blend" if task == "multilabel" else "blend-ldl", params=params)
    entry.fold_metrics = blending.fold_scores(oof, Y, splits, cv, metric, task)
    entry.fit_seconds = [sum(pool[i].fit_seconds[s] for i in order) for s in range(len(splits))]
    entry.oof_all = np.stack([blending.blend([pred[r] for pred in oof], final.counts) for r in range(oof[0].shape[0])])
    entry.oof_scores = entry.oof_all[-1]
    if task == "multilabel":
        entry.oof_labels = (entry.oof_scores > params["threshold"]).astype(np.int8)
    return entry


# --------------------------------------------------------------------------- auto requests
class AutoParams(BaseModel):
    """``params`` of ``POST /train`` with ``"method": "auto"`` (all optional)."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[str] | None = Field(
        None, min_length=1, description="Method ids to choose from; default: every method fitting the dataset."
    )
    metric: str | None = Field(
        None, description="Metric to rank by (any /evaluate metric); default average_precision or chebyshev."
    )
    cv: int | None = Field(
        None,
        ge=2,
        le=20,
        description="Folds of the inner cross-validation; default 10 under 1000 samples (repeated with fresh "
        "shuffles while a quarter of the budget allows), else 5.",
    )
    tune: bool = Field(False, description="Also search each candidate's documented grid.")
    budget_seconds: float | None = Field(
        None, gt=0, description="Expected-cost budget for the default candidates (default 600 s)."
    )


def check_auto(params: AutoParams, kind: str) -> list[str]:
    """Problems with an auto request for a dataset of ``kind`` (empty when it is fine)."""
    task = task_of(kind)
    problems = []
    for method in params.candidates or []:
        spec = get_method(method)
        if spec is None:
            problems.append(f"candidates: unknown method '{method}'")
        elif method in BLENDS:
            problems.append(f"candidates: '{method}' is built by auto itself from the other candidates")
        elif spec.task != task or spec.dataset_kind != kind:
            problems.append(f"candidates: '{method}' does not fit a {kind} dataset")
    if params.metric is not None and params.metric not in metric_names(task):
        problems.append(f"metric: '{params.metric}' is not a {task} metric ({', '.join(metric_names(task))})")
    return problems
