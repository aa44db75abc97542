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

Candidates. By default every classifier (or every label distribution learner) whose predicted
cross-validation cost fits ``budget_seconds`` of this machine; methods marked expensive are tried
only when named. A candidate's cost is measured, not guessed (``pilot_costs``): a pilot fold (fit
on ``PILOT_SHARE`` of a fold's training rows, score a held-out part in the folds' proportion) is
timed here and now, then extrapolated to a fold with the method's growth exponent in n
(``GROWTH``, measured by ``benchmarks/scaling_growth.py``); d and q are the dataset's own in the pilot,
so they need no model. The candidates are taken cheapest first while the predicted total fits
what the pilots left of the budget, so a cheap candidate whose pilot says it fits is never left
out for a dearer one. A constant model fitted to a loaded machine's wall times priced ``br`` on
bibtex 10x too high and left it out (issue 23). What did not fit is listed in the version's
``selection`` with its prediction; every row there has its predicted and measured seconds.

Twins. For a ranking metric (``RANKING_METRICS``) a ``dmknn`` entry whose ranking is ML-kNN's
posterior on the same neighbours (its defaults) is provably tied with the ``mlknn`` entry of the
same k, s and scaling: it is evaluated once, as ``mlknn``, and its leaderboard row says so
(``same_ranking_as``) and carries the twin's ranking metrics.

Grids (``tune=True``): every combination of the method's grid in ``GRIDS`` is one more entry of
the leaderboard; the grids of ``DEFAULT_GRIDS`` (sa-maxent's penalty) are searched even without it. They are small on purpose (at most 4 points) because each point costs ``cv``
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
from collections.abc import Collection, Mapping, Sequence
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
from app.methods.neighbours import GraphCache, sharing_graphs
from app.methods.thresholds import LearnedThresholdMixin, label_sets
from app.suggest import did_you_mean

log = logging.getLogger("labelserve.selection")

#: fractions of features at which selectors are scored for the report's curve
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)  # 1.0: the all-features reference of the report
#: the fraction at which selectors are ranked (ELCFS's protocol, as ``POST /evaluate``)
SELECTOR_FRACTION = 0.2
#: the method id of ``POST /train`` that selects the method
AUTO = "auto"
#: the seed of ``auto``'s folds and candidates when the request gives none: a fixed one, so the
#: same request on the same dataset picks the same model (a drawn one made reruns differ)
AUTO_RANDOM_STATE = 0
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

#: Growth exponent in the training rows n of one fold's seconds (fit, then score the held-out
#: part, both growing with n): a fold on n rows costs ``pilot seconds * (n / pilot rows) ** GROWTH``.
#: The classifiers': least-squares slopes of log CPU seconds of one fold (``_fit_and_score``) on
#: log n over tmc2007-500 prefixes of 500-4,000 training rows (``benchmarks/scaling_growth.py --folds``,
#: docs/scaling.md), the range a pilot extrapolates over (a factor of up to 5). Fixed costs make
#: them lower than the large-n slopes (BR's per-label overhead; ML-kNN's all-pairs product takes
#: over from about 2,000 rows). The neighbour classifiers' (1.5, and ``GRAPH_REUSE_GROWTH``
#: for the second of them in a selection, which reuses the first one's graph): what the pilots
#: themselves extrapolate over, the median fold of a 5-fold cross-validation against the median
#: of 3 pilots on bibtex and the 7 Yahoo sets' training splits (``benchmarks/auto_cost.py
#: --pilot-growth``, two runs: the graph's builder 1.09-1.82, means 1.51 and 1.50; the reuser
#: 1.07-1.60, means 1.36 and 1.27; docs/scaling.md).
#: They replaced tmc2007's 1.25 / 1.45, whose 500-row point paid the process's one-off costs: on
#: the Yahoo sets those priced ``dmknn`` 1.0-2.0x low. The LDL methods and selectors are not measured yet: their
#: exponents are those of the cost models they had before (quadratic neighbour and kernel
#: methods, linear sa-maxent and ldlkm; the selectors are scored by ML-kNN fits).
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
#: ``PILOT_SHARE ** GROWTH / cv`` of the cross-validation (1.5% for br at 5 folds)
PILOT_SHARE = 0.2
PILOT_MIN_ROWS = 500
#: a pilot shorter than ``PILOT_REPEAT_SECONDS`` runs again (up to ``PILOT_RUNS`` times) and its
#: fastest run counts: on a shared machine a fraction of a second of wall time is mostly how the
#: scheduler treated it (the Yahoo sets' ML-kNN pilots, 0.3 s, predicted 2-4x the folds' time)
PILOT_RUNS = 3
PILOT_REPEAT_SECONDS = 1.0
#: metrics computed from each sample's label ranking alone (equal rankings, equal values)
RANKING_METRICS = frozenset({"ranking_loss", "one_error", "coverage", "average_precision"})

#: documented grids for ``tune=True`` (every combination is evaluated)
GRIDS: dict[str, dict[str, list[Any]]] = {
    "br": {"C": [0.1, 1.0, 10.0]},
    "ecc": {"C": [0.1, 1.0, 10.0]},
    "rf": {"max_features": ["sqrt", 0.3], "min_samples_leaf": [1, 3]},
    "gbm": {"num_leaves": [7, 15, 31]},
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


#: grids ``auto`` searches even without ``tune``: cheap ones whose parameter moves results a lot.
#: sa-maxent's penalty: the four fits cost about 4x one default fit (Movie, 1,250 rows: 9.4 CPU s
#: against 2.5 s; the smaller the penalty, the longer L-BFGS runs), and a practitioner's KL
#: softmax regression takes its penalty by cross-validation (issue 27)
DEFAULT_GRIDS: dict[str, dict[str, list[Any]]] = {"sa-maxent": GRIDS["sa-maxent"]}


def task_of(kind: str) -> str:
    """The method task that fits a dataset kind (and is ranked in a selection)."""
    return "distribution" if kind == "distribution" else "multilabel"


def default_metric(kind: str) -> str:
    return "chebyshev" if kind == "distribution" else "average_precision"


def metric_names(task: str) -> tuple[str, ...]:
    return metrics.LDL_METRICS if task == "distribution" else metrics.MULTILABEL_METRICS


def candidate_pool(kind: str, tasks: Sequence[str] | None = None) -> list[str]:
    """The methods a default selection may try: the kind's tasks, neither expensive nor a blend."""
    tasks = tuple(tasks or (task_of(kind),))
    return sorted(
        spec.id
        for spec in catalog().values()
        if spec.task in tasks and spec.dataset_kind == kind and spec.id not in EXPENSIVE and spec.id not in BLENDS
    )


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


def grid(method: str, grids: Mapping[str, dict[str, list[Any]]] = GRIDS) -> list[dict[str, Any]]:
    """Every parameter combination of the method's grid in ``grids`` (``[{}]`` when it has none)."""
    axes = grids.get(method, {})
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))] or [{}]


def default_entries(method: str) -> list[dict[str, Any]]:
    """A method's entries without ``tune``: its defaults first (what its pilot prices, and all
    that is kept when the rest of its ``DEFAULT_GRIDS`` grid does not fit the budget), then the
    other points of that grid."""
    spec = get_method(method)
    if spec is None or method not in DEFAULT_GRIDS:
        return [{}]
    defaults = spec.params().model_dump()
    return [{}] + [p for p in grid(method, DEFAULT_GRIDS) if any(defaults.get(k) != v for k, v in p.items())]


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


# ----------------------------------------------------------------------------------- costs
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
    with sharing_graphs() if _graph_users(entries) > 1 else nullcontext() as shared:
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
                _fit_and_score(spec, _entry(spec, method, params, Y, 1), X, Y, tr, te, watch, scores_only=scores_only)
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


# ---------------------------------------------------------------------------------- results
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
            entry = _entry(spec, method, _seeded(spec, params, random_state), Y, max(1, len(splits) // cv))
            for f, (tr, te) in enumerate(splits):
                step = e * len(splits) + f
                label = f"{method} ({e + 1}/{len(entries)}) fold {f + 1}/{len(splits)}"

                def inner(stage: str, fraction: float, label: str = label, step: int = step) -> None:
                    progress(f"{label}: {stage}", (step + min(max(fraction, 0.0), 1.0)) / total)

                progress(label, step / total)
                try:
                    entry_fold = _fit_and_score(spec, entry, X, Y, tr, te, inner, f // cv, scores_only)
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


def _entry(spec: MethodSpec, method: str, params: dict[str, Any], Y: np.ndarray, repeats: int) -> Entry:
    """An empty entry with room for the out-of-fold predictions of ``repeats`` repeats."""
    entry = Entry(method=method, params=dict(params))
    if spec.task != "selection":
        entry.oof_all = np.zeros((repeats, *Y.shape))
        entry.oof_scores = entry.oof_all[-1]
        entry.oof_labels = np.zeros(Y.shape, dtype=np.int8) if spec.task == "multilabel" else None
    return entry


def _graph_users(entries: Sequence[tuple[str, dict[str, Any]]]) -> int:
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


def _fit_and_score(
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
    #: methods left out on cost, with their predicted cross-validation seconds
    left_out: dict[str, float] = field(default_factory=dict)
    #: seconds the pilots took
    pilot_seconds: float = 0.0
    #: a leading blend against the best single method (``simplest_within_noise``), if one led
    blend_margin: dict[str, Any] | None = None

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
                    "predicted_seconds": _rounded(e.predicted_seconds),
                    "measured_seconds": _rounded(sum(e.fold_seconds)) if e.fold_seconds else None,
                    **({"same_ranking_as": e.same_ranking_as} if e.same_ranking_as else {}),
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


@dataclass
class Plan:
    """What a selection or comparison cross-validates, and what its pilots predicted."""

    entries: list[tuple[str, dict[str, Any]]]
    costs: dict[str, Cost]
    #: methods left out on cost, with their predicted cross-validation seconds
    left_out: dict[str, float]
    #: (entry, the entry of ``entries`` whose ranking it provably shares)
    twins: list[tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]]
    pilot_seconds: float


def _prepared(method: str, params: dict[str, Any], random_state: int | None, n_jobs: int | None) -> dict[str, Any]:
    """An entry's parameters as cross-validation fits them: seeded, and ``n_jobs`` where declared."""
    spec = get_method(method)
    if spec is None:
        raise ValueError(f"unknown method '{method}'")
    prepared = _seeded(spec, params, random_state)
    if n_jobs is not None and "n_jobs" in spec.params.model_fields and prepared.get("n_jobs") is None:
        prepared["n_jobs"] = n_jobs
    return prepared


def ranking_twin(
    entry: tuple[str, dict[str, Any]], others: Sequence[tuple[str, dict[str, Any]]]
) -> tuple[str, dict[str, Any]] | None:
    """The ``mlknn`` entry of ``others`` whose label ranking the ``dmknn`` ``entry`` provably shares.

    DMKNN ranks by the ML-kNN posteriors of its label model (``ranking="posterior"``), an ML-kNN
    with its k and s on its scaled features, with leave-one-out training neighbours: the same
    ranking as ``mlknn`` with those k and s and the same scaling (min-max maps a constant feature
    to 0 in both), on the same neighbour search. Any other reading is not provably the same.
    """
    method, params = entry
    if method != "dmknn":
        return None
    dm = get_method("dmknn")
    ml = get_method("mlknn")
    if dm is None or ml is None:
        return None
    d = dm.params.model_validate(params).model_dump()
    if d.get("ranking") != "posterior" or d.get("include_self_in_training_neighbours"):
        return None
    for other in others:
        if other[0] != "mlknn":
            continue
        m = ml.params.model_validate(other[1]).model_dump()
        same_search = all(d.get(key) == m.get(key) for key in ("neighbors",) if key in d or key in m)
        same_scaling = {"minmax": "minmax", "none": "none"}.get(d["normalization"]) == m["scale"]
        if d["k"] == m["k"] and d["s"] == m["s"] and same_scaling and same_search:
            return other
    return None


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
    twins = []
    kept = list(entries)
    if metric in RANKING_METRICS:
        for entry in entries:
            twin = ranking_twin(entry, [e for e in entries if e is not entry])
            if twin is not None:
                twins.append((entry, twin))
                kept.remove(entry)
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
    n = X.shape[0]
    # its cross-validation (every entry of it), and the fit on all n rows should it win (or join a blend)
    per_method = {
        m: costs[m].seconds(n, cv) * sum(1 for e in kept if e[0] == m) + costs[m].fold_seconds(n) for m in costs
    }
    left_out: dict[str, float] = {}
    if not named:
        room = max(0.0, budget - pilot_seconds)
        chosen = set(within_budget(per_method, room))
        # a method whose grid does not fit may still fit with its first entry alone (its defaults)
        single = {
            m: costs[m].seconds(n, cv) + costs[m].fold_seconds(n)
            for m in per_method
            if m not in chosen and sum(1 for e in kept if e[0] == m) > 1
        }
        spare = room - sum(per_method[m] for m in chosen)
        for m in sorted(single, key=lambda m: (single[m], m)):
            if single[m] <= spare:
                chosen.add(m)
                spare -= single[m]
                first_entry = next(e for e in kept if e[0] == m)
                kept = [e for e in kept if e[0] != m or e is first_entry]
        left_out = {m: per_method[m] for m in per_method if m not in chosen}
        kept = [e for e in kept if e[0] in chosen]
        twins = [(entry, twin) for entry, twin in twins if twin in kept]
    return Plan(kept, costs, left_out, twins, pilot_seconds)


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
    progress: ProgressFn | None = None,
) -> Selection:
    """Rank the candidates by cross-validated ``metric`` (default: the kind's).

    ``exclude``: methods left out before pricing (the job's memory bound refused them).

    The candidates (default: ``candidate_pool``) are priced and chosen by ``plan`` at 5 folds (or
    the ``cv`` named), so the extra folds of a small dataset never cost a candidate; ``cv`` and
    ``repeats`` then default to ``resampling`` (10 folds, repeated, on small datasets; 5
    otherwise). ``n_jobs`` is given to the candidates that declare it (the job's cores).
    """
    metric = metric or default_metric(kind)
    progress = progress or no_progress
    n = X.shape[0]
    methods = [m for m in (list(candidates) if candidates else candidate_pool(kind)) if m not in exclude]
    entries = [
        (m, _prepared(m, p, random_state, n_jobs)) for m in methods for p in (grid(m) if tune else default_entries(m))
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
    if cv is None or repeats is None:
        per_fit = sum(chosen.costs[m].fold_seconds(n - -(-n // 5)) for m, _ in chosen.entries)
        auto_cv, auto_repeats = resampling(n, per_fit, budget)
        if cv is None:
            cv = min(auto_cv, n)
        repeats = repeats or (auto_repeats if cv == auto_cv else 1)
    splits = folds(Y, kind, cv, random_state, repeats)
    results = cross_validate(
        X,
        Y,
        kind,
        chosen.entries,
        cv=cv,
        repeats=repeats,
        random_state=random_state,
        progress=progress,
        splits=splits,
        scores_only=metric in RANKING_METRICS,
    )
    for entry in results:
        entry.predicted_seconds = chosen.costs[entry.method].seconds(n, cv, repeats)
    mixed = blend_entry(results, Y, kind, metric, splits, cv)
    twins = [_twin_entry(entry, twin, chosen.entries, results) for entry, twin in chosen.twins]
    ranked = rank(results + ([mixed] if mixed is not None else []) + twins, metric)
    margin = None
    if task_of(kind) == "distribution":
        ranked, margin = simplest_within_noise(ranked, metric)
    if ranked[0].error is not None or not math.isfinite(ranked[0].mean(metric)):
        raise ValueError(f"no candidate could be evaluated: {ranked[0].error or 'metric undefined on every fold'}")
    return Selection(
        metric=metric,
        cv=cv,
        repeats=repeats,
        leaderboard=ranked,
        left_out=chosen.left_out,
        pilot_seconds=chosen.pilot_seconds,
        blend_margin=margin,
    )


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
    sign = -1.0 if metric in metrics.LOWER_IS_BETTER else 1.0
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
    member alone. A label distribution learner that never beat the training mean on a fold
    (``beats_the_mean``) is not a member."""
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
    if task == "distribution":
        pool = [e for e in pool if beats_the_mean(e, Y, splits, metric)]
    if len(pool) < 2:
        return None
    oof = [e.oof_all for e in pool if e.oof_all is not None]
    final = blending.choose(oof, Y, metric, task)
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
    entry.fold_metrics = blending.fold_scores(oof, Y, splits, cv, metric, task)
    entry.fit_seconds = [sum(pool[i].fit_seconds[s] for i in order) for s in range(len(splits))]
    entry.oof_all = np.stack([blending.blend([pred[r] for pred in oof], final.counts) for r in range(oof[0].shape[0])])
    entry.oof_scores = entry.oof_all[-1]
    if task == "multilabel":
        entry.oof_labels = label_sets(entry.oof_scores, params["threshold"], final.fill_empty).astype(np.int8)
    return entry


def beats_the_mean(entry: Entry, D: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]], metric: str) -> bool:
    """Whether a label distribution learner's ``metric`` beat predicting the fold's training mean
    on at least one fold. One that never did (``ldlkm`` at the paper's defaults on the yeast sets,
    issue 27) adds nothing a blend could not get from the others, yet took weight in greedy
    selection on noise; it is left out of the blend (it stays on the leaderboard)."""
    lower = metric in metrics.LOWER_IS_BETTER
    for (tr, te), fold in zip(splits, entry.fold_metrics):
        mean = np.tile(D[tr].mean(axis=0), (len(te), 1))
        baseline = metrics.ldl_metrics(D[te], mean)[metric]
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
        None,
        gt=0,
        description="Wall seconds of this machine for choosing among the default candidates and fitting the "
        "winner (pilots, cross-validation, final fit; default 600 s): what its pilot predicts past it is left out.",
    )


def check_auto(params: AutoParams, kind: str) -> list[str]:
    """Problems with an auto request for a dataset of ``kind`` (empty when it is fine)."""
    task = task_of(kind)
    problems = []
    for method in params.candidates or []:
        spec = get_method(method)
        if spec is None:
            problems.append(f"candidates: unknown method '{method}'{did_you_mean(method, catalog())}")
        elif method in BLENDS:
            problems.append(f"candidates: '{method}' is built by auto itself from the other candidates")
        elif spec.task != task or spec.dataset_kind != kind:
            problems.append(f"candidates: '{method}' does not fit a {kind} dataset")
    if params.metric is not None and params.metric not in metric_names(task):
        problems.append(f"metric: '{params.metric}' is not a {task} metric ({', '.join(metric_names(task))})")
    return problems
