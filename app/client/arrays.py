"""What the Python client does with NumPy arrays, SciPy sparse matrices and pandas DataFrames.

The HTTP API speaks JSON lists and CSV files; these functions turn a user's matrices into those
(a DataFrame's column names become feature or label names) and turn a prediction answer back
into an array. NumPy is imported only when one is called, and pandas never is (a DataFrame is
recognised by its ``columns`` and ``to_numpy``), so the command line, which imports the client,
starts without them and the client works without pandas installed.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# rows formatted per block when writing a CSV, so a large sparse matrix is never dense at once
_BLOCK_ROWS = 1024


def is_frame(data: object) -> bool:
    """Whether ``data`` is a pandas DataFrame (or quacks like one), without importing pandas."""
    return hasattr(data, "columns") and hasattr(data, "to_numpy") and hasattr(data, "iloc")


def is_matrix(data: object) -> bool:
    """Whether ``data`` is a NumPy array, a SciPy sparse matrix or a DataFrame (not a plain list)."""
    return is_frame(data) or hasattr(data, "__array__") or _is_sparse(data)


def _is_sparse(data: object) -> bool:
    return hasattr(data, "tocsr") and hasattr(data, "nnz")


def dense_rows(data: Any, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start:stop`` of a matrix as a 2-D float64 array (a 1-D array is refused: one instance
    is ``[x]``, not ``x``)."""
    import numpy as np

    if is_frame(data):
        block = data.iloc[start:stop].to_numpy(dtype=np.float64)
    elif _is_sparse(data):
        block = data.tocsr()[start:stop].toarray().astype(np.float64, copy=False)
    else:
        block = np.asarray(data, dtype=np.float64)[start:stop]
    if block.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (one row per instance), got {block.ndim} dimension(s)")
    return block


def column_names(data: Any, given: Sequence[str] | None) -> list[str] | None:
    """The names given, else a DataFrame's column names, else None (the server names them)."""
    if given is not None:
        return [str(name) for name in given]
    return [str(name) for name in data.columns] if is_frame(data) else None


def instances_json(instances: Any) -> list[Any]:
    """``instances`` as ``POST /predict`` takes them: a DataFrame as ``{column: value}`` objects (so
    its columns are matched to the model's features by name, in any order), a NumPy array or a
    sparse matrix as rows, anything else (lists of rows or objects) as it is."""
    if not is_matrix(instances):
        return list(instances)
    rows = dense_rows(instances).tolist()
    if is_frame(instances):
        names = [str(name) for name in instances.columns]
        return [dict(zip(names, row)) for row in rows]
    return rows


def inline_data(
    X: Any, Y: Any, feature_names: Sequence[str] | None = None, label_names: Sequence[str] | None = None
) -> dict[str, Any]:
    """The ``data`` of ``POST /train`` for feature and label matrices."""
    data: dict[str, Any] = {"X": dense_rows(X).tolist(), "Y": dense_rows(Y).tolist()}
    names = {"feature_names": column_names(X, feature_names), "label_names": column_names(Y, label_names)}
    return data | {key: value for key, value in names.items() if value is not None}


def csv_upload(
    X: Any, Y: Any, feature_names: Sequence[str] | None = None, label_names: Sequence[str] | None = None
) -> tuple[bytes, dict[str, str]]:
    """A CSV file (header row, then the features and the labels of each row) and the form fields
    that tell the server which columns are labels.

    Values are written with 17 significant digits, so they read back as the same float64.
    """
    import numpy as np

    n, d = _shape(X)
    n_labels, q = _shape(Y)
    if n_labels != n:
        raise ValueError(f"X has {n} rows and Y {n_labels}; they must match")
    features = column_names(X, feature_names) or [f"f{j}" for j in range(d)]
    labels = column_names(Y, label_names) or [f"l{j}" for j in range(q)]
    if len(features) != d or len(labels) != q:
        raise ValueError(f"{len(features)} feature names for {d} columns, {len(labels)} label names for {q}")
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow([*features, *labels])
    for start in range(0, n, _BLOCK_ROWS):
        block = np.hstack([dense_rows(X, start, start + _BLOCK_ROWS), dense_rows(Y, start, start + _BLOCK_ROWS)])
        np.savetxt(text, block, fmt="%.17g", delimiter=",")
    return text.getvalue().encode(), {"label_columns": json.dumps(labels)}


def _shape(data: Any) -> tuple[int, int]:
    shape = tuple(data.shape) if hasattr(data, "shape") else (len(data), len(data[0]) if len(data) else 0)
    if len(shape) != 2:
        raise ValueError(f"expected a 2-D matrix (one row per sample), got shape {shape}")
    return int(shape[0]), int(shape[1])


def prediction_array(result: dict[str, Any], label_names: list[str]) -> np.ndarray:
    """A ``POST /predict`` answer as an array whose columns are ``label_names`` (the model's order).

    ``labels``: 0/1 (int8, n x q); ``ranking``: the scores (n x q, NaN for labels a ``top_k`` left
    out); ``distribution``: the probabilities (n x c); ``features``: the feature indices, best
    first.
    """
    import numpy as np

    output = result["output"]
    if output == "features":
        return np.array([feature["index"] for feature in result["features"]], dtype=np.int64)
    column = {label: j for j, label in enumerate(label_names)}
    predictions = result["predictions"]
    if output == "labels":
        matrix = np.zeros((len(predictions), len(label_names)), dtype=np.int8)
        for i, prediction in enumerate(predictions):
            matrix[i, [column[label] for label in prediction["labels"]]] = 1
        return matrix
    matrix = np.full((len(predictions), len(label_names)), np.nan)
    for i, prediction in enumerate(predictions):
        if output == "distribution":
            cells = prediction["distribution"].items()
        else:
            cells = ((entry["label"], entry["score"]) for entry in prediction["ranking"])
        for label, value in cells:
            matrix[i, column[label]] = value
    return matrix
