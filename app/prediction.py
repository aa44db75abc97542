"""Turning request instances into a matrix, and model outputs into response items.

Input validation happens once here, at the API boundary, so the service calls the estimators'
private fast paths (``_predict``, ``_decision_function``, ``_predict_details``): scikit-learn's
per-call input validation would otherwise dominate the latency of a one-row prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from app.errors import InvalidInput

LOC = ("body", "instances")


def instances_to_matrix(
    instances: Sequence[Sequence[float]] | Sequence[Mapping[str, float]],
    feature_names: list[str],
) -> np.ndarray:
    """A float64 (n, d) matrix in training feature order, or InvalidInput naming the problem."""
    d = len(feature_names)
    if len(instances) == 0:
        raise InvalidInput("at least one instance is required", loc=LOC)
    if all(isinstance(row, Mapping) for row in instances):
        position = {name: j for j, name in enumerate(feature_names)}
        X = np.empty((len(instances), d))
        for i, row in enumerate(cast(Sequence[Mapping[str, float]], instances)):
            unknown = sorted(set(row) - position.keys())
            missing = [name for name in feature_names if name not in row]
            if unknown or missing:
                raise InvalidInput(
                    f"expected the {d} training features; "
                    f"received {len(row)} ({_names('unknown', unknown)}{_names('missing', missing)})",
                    loc=(*LOC, i),
                )
            for name, value in row.items():
                X[i, position[name]] = _number(value, i, name)
    elif any(isinstance(row, Mapping) for row in instances):
        raise InvalidInput("mix of lists and objects; use one form for all instances", loc=LOC)
    else:
        for i, values in enumerate(instances):
            if len(values) != d:
                raise InvalidInput(f"expected {d} features, received {len(values)}", loc=(*LOC, i))
        try:
            X = np.asarray(instances, dtype=np.float64)
        except (TypeError, ValueError):  # NumPy's own text names no position; say what is expected
            raise InvalidInput("every value must be a number (or a list of numbers per instance)", loc=LOC) from None
    if np.isfinite(X).all():
        return X
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise InvalidInput(f"feature {feature_names[j]} is not a finite number", loc=(*LOC, i, j))
    return X


def _names(what: str, names: list[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")
    return f"{what}: {shown}; "


def _number(value: Any, i: int, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{value!r} is not a number", loc=(*LOC, i, name))
    return float(value)


def label_matrix(model: Any, X: np.ndarray, threshold: float | None) -> tuple[np.ndarray, list[dict[str, Any]] | None]:
    """The 0/1 label sets (n, q) and the method's extra fields per row, if it has any."""
    # The private twins skip scikit-learn's input validation: X was checked by instances_to_matrix.
    details = getattr(model, "_predict_details", None)
    if details is not None:
        Yhat, extras = details(X, threshold=threshold)
        return Yhat, extras
    return model._predict(X, threshold=threshold), None


def label_sets(
    model: Any, X: np.ndarray, label_names: list[str], threshold: float | None, include_scores: bool
) -> list[dict[str, Any]]:
    Yhat, extras = label_matrix(model, X, threshold)
    scores = model._decision_function(X) if include_scores else None
    names = np.asarray(label_names, dtype=object)
    items: list[dict[str, Any]] = []
    for i, row in enumerate(np.asarray(Yhat, dtype=bool)):
        item: dict[str, Any] = {"labels": names[row].tolist()}
        if extras is not None:
            item.update(_named(extras[i], label_names))
        if scores is not None:
            item["scores"] = dict(zip(label_names, map(float, scores[i])))
        items.append(item)
    return items


def _named(extra: dict[str, Any], label_names: list[str]) -> dict[str, Any]:
    """Label column indices in a method's extra fields become label names."""
    out = dict(extra)
    if out.get("itemset") is not None:
        out["itemset"] = [label_names[j] for j in out["itemset"]]
    return out


def rankings(model: Any, X: np.ndarray, label_names: list[str], top_k: int | None) -> list[dict[str, Any]]:
    scores = np.asarray(model._decision_function(X), dtype=np.float64)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
    return [
        {"ranking": [{"label": label_names[j], "score": float(s[j])} for j in row]} for row, s in zip(order, scores)
    ]


def distributions(model: Any, X: np.ndarray, label_names: list[str]) -> list[dict[str, Any]]:
    P = np.asarray(model._predict(X), dtype=np.float64)
    return [{"distribution": dict(zip(label_names, row))} for row in P.tolist()]


def score_matrix(model: Any, X: np.ndarray) -> np.ndarray:
    """The ``scores`` output: each label's score (n, q) as float32, a classifier's decision
    function or a distribution learner's probabilities. float32's shortest decimal form is about
    10 characters where float64's is 18-19, which is what keeps a wide answer near 11 bytes per
    score; 7 significant digits are more than a score's meaning holds."""
    scores = getattr(model, "_decision_function", None) or model._predict
    return np.asarray(scores(X), dtype=np.float32)


def selected_features(model: Any, feature_names: list[str], top_k: int | None) -> list[dict[str, Any]]:
    ranking = np.asarray(model.ranking_)[:top_k]
    scores = np.asarray(model.feature_scores_, dtype=np.float64)
    return [{"index": int(j), "name": feature_names[j], "score": float(scores[j])} for j in ranking]


def predict_items(
    model: Any,
    output: str,
    X: np.ndarray,
    label_names: list[str],
    *,
    threshold: float | None = None,
    top_k: int | None = None,
    include_scores: bool = False,
) -> list[dict[str, Any]]:
    """The ``predictions`` of a response for one of the instance outputs."""
    if output == "labels":
        return label_sets(model, X, label_names, threshold, include_scores)
    if output == "ranking":
        return rankings(model, X, label_names, top_k)
    if output == "distribution":
        return distributions(model, X, label_names)
    if output == "scores":  # a batch job's rows; an answer carries the matrix once (score_matrix)
        return [{"scores": dict(zip(label_names, row))} for row in score_matrix(model, X).tolist()]
    raise ValueError(f"output '{output}' has no per-instance predictions")
