"""Turning request instances into a matrix, and model outputs into response items.

Input validation happens once here, at the API boundary, so the service calls the estimators'
private fast paths (``_predict``, ``_decision_function``, ``_predict_details``): scikit-learn's
per-call input validation would otherwise dominate the latency of a one-row prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from app.errors import InvalidInput
from app.formats.validation import MAX_ABS_FEATURE

LOC = ("body", "instances")
#: what every feature value of a prediction must be: what a dataset's must be
FEATURE_RULE = f"feature values must be finite numbers within +-{MAX_ABS_FEATURE:g}, as in datasets"


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
    unbounded = first_unbounded(X)
    if unbounded is not None:
        i, j = unbounded
        where = feature_names[j] if isinstance(instances[i], Mapping) else j
        raise InvalidInput(
            f"feature {feature_names[j]} is {shown_value(X[i, j])}; {FEATURE_RULE}", loc=(*LOC, i, where)
        )
    return X


def first_unbounded(X: np.ndarray) -> tuple[int, int] | None:
    """The (row, column) of the first value of ``X`` (n, d) that is not a finite number within
    +-``MAX_ABS_FEATURE``, or None. The request schemas already refuse NaN and infinity; this is
    the bound datasets have, so a model is never asked about values it could not have been
    trained on (1e300 squared overflows a distance, and the answer was whatever that made)."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(X) <= MAX_ABS_FEATURE)  # NaN compares false: refused too
    if not bad.any():
        return None
    i, j = np.argwhere(bad)[0]
    return int(i), int(j)


def shown_value(value: float) -> str:
    """A refused feature value as an error message shows it."""
    return repr(float(value)) if np.isfinite(value) else "not a finite number"


def csr_to_matrix(indptr: Sequence[int], indices: Sequence[int], values: Sequence[float], d: int) -> sp.csr_matrix:
    """The CSR instances of a request as a float64 (n, d) CSR matrix (indices sorted, duplicates
    summed), or InvalidInput naming the field at fault; checked before anything of size n x d."""
    loc = ("body", "csr")
    n = len(indptr) - 1
    if n < 1:
        raise InvalidInput("indptr needs n + 1 offsets for n >= 1 instances", loc=(*loc, "indptr"))
    if len(values) != len(indices):
        raise InvalidInput(f"{len(values)} values for {len(indices)} indices", loc=(*loc, "values"))
    offsets = np.asarray(indptr, dtype=np.int64)
    if offsets[0] != 0 or offsets[-1] != len(indices) or (np.diff(offsets) < 0).any():
        raise InvalidInput(
            f"indptr must rise from 0 to len(indices) = {len(indices)} without decreasing", loc=(*loc, "indptr")
        )
    columns = np.asarray(indices, dtype=np.int64)
    if columns.size and (columns.min() < 0 or columns.max() >= d):
        raise InvalidInput(
            f"feature indices must be in [0, {d - 1}] (the model has {d} features)", loc=(*loc, "indices")
        )
    data = np.asarray(values, dtype=np.float64)
    unbounded = first_unbounded(data.reshape(1, -1))
    if unbounded is not None:
        k = unbounded[1]
        raise InvalidInput(f"value {k} is {shown_value(data[k])}; {FEATURE_RULE}", loc=(*loc, "values", k))
    X = sp.csr_matrix((data, columns.astype(np.int32), offsets.astype(np.int32)), shape=(n, d))
    X.sum_duplicates()
    return X


def model_input(model: Any, X: sp.csr_matrix) -> Any:
    """Sparse instances as the model predicts them: CSR for a method that takes it, else dense
    (n x d; the answer bound has already bounded n; a selected-features model is given dense rows)."""
    return X if getattr(type(model), "accepts_sparse", False) else X.toarray()


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
