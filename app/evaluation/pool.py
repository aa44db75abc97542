"""The candidate pool of a selection or comparison: which methods, which parameter points.

By default every method of the dataset's task but the expensive ones (tried only when named)
and the blends (built by ``auto`` itself); ``GRIDS`` are the documented grids of ``tune=True``.
For a ranking metric a ``dmknn`` entry whose ranking is ML-kNN's posterior is evaluated once,
as its ``mlknn`` twin (``ranking_twin``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from app import scoring
from app.methods.blend import BLENDS
from app.methods.catalog import catalog, get_method

#: the method id of ``POST /train`` that selects the method
AUTO = "auto"
#: the seed of ``auto``'s folds and candidates when the request gives none: a fixed one, so the
#: same request on the same dataset picks the same model (a drawn one made reruns differ)
AUTO_RANDOM_STATE = 0
#: methods tried only when named: their cost grows too fast with the data for a default sweep
EXPENSIVE = frozenset({"trans-ovk", "ghc-dr"})
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
#: grids ``auto`` searches even without ``tune``: cheap ones whose parameter moves results a lot
#: (sa-maxent's penalty: a practitioner's KL softmax regression takes it by cross-validation;
#: its cost is in docs/auto.md)
DEFAULT_GRIDS: dict[str, dict[str, list[Any]]] = {"sa-maxent": GRIDS["sa-maxent"]}


def task_of(kind: str) -> str:
    """The method task that fits a dataset kind (and is ranked in a selection)."""
    return "distribution" if kind == "distribution" else "multilabel"


def default_metric(kind: str) -> str:
    return "chebyshev" if kind == "distribution" else "average_precision"


def metric_names(task: str) -> tuple[str, ...]:
    return scoring.LDL_METRICS if task == "distribution" else scoring.MULTILABEL_METRICS


def candidate_pool(kind: str, tasks: Sequence[str] | None = None) -> list[str]:
    """The methods a default selection may try: the kind's tasks, neither expensive nor a blend."""
    tasks = tuple(tasks or (task_of(kind),))
    return sorted(
        spec.id
        for spec in catalog().values()
        if spec.task in tasks and spec.dataset_kind == kind and spec.id not in EXPENSIVE and spec.id not in BLENDS
    )


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
