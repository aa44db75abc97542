"""Checks every parsed dataset passes before it is stored.

Each format parser builds ``X``, ``Y`` and the names, then calls :func:`finalize`, so the rules
are the same whatever the format: at least 2 samples, 1 feature and 1 label; within the
dataset limits (``limits``); finite feature values no larger in magnitude than
``MAX_ABS_FEATURE``; unique names; labels either 0/1 (``-1/+1`` is mapped to 0/1) or non-negative rows summing to 1
(``kind = "distribution"``; rows within ``SUM_TOLERANCE`` of 1 are renormalised exactly).
Every rejection names the row and column (1-based rows; the parser may describe rows better,
e.g. with their ARFF line, through ``describe_row``).

Sparse features (CSR) are checked on their stored values only, never expanded; multi-label
label matrices leave as uint8 0/1.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from app.upload_options import name_fault

from .common import DatasetFormatError, DatasetKind, Features, ParsedDataset
from .limits import DatasetLimits, check_dimensions

SUM_TOLERANCE = 1e-6
# Beyond 2**53 (about 9e15) float64 no longer represents every integer, so larger feature values
# are sentinels or corruption rather than measurements; bounding them keeps every method's sums of
# squares and differences far from overflow (differences of +-1e308 are infinite, and a model
# fitted on them predicts NaN).
MAX_ABS_FEATURE = 1e15

RowDescriber = Callable[[int], str]


def default_row(i: int) -> str:
    """1-based data row number."""
    return f"row {i + 1}"


def _check_names(names: list[str], what: str) -> None:
    """Unique names without control or direction control characters (a NUL cannot be stored by
    PostgreSQL, and the same names must be accepted or refused whatever the database)."""
    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        fault = name_fault(name)
        if fault is not None:
            raise DatasetFormatError(f"{what} name {name!r} ({what} {j + 1}) {fault}")
        if name in seen:
            raise DatasetFormatError(f"duplicate {what} name {name!r} ({what}s {seen[name] + 1} and {j + 1})")
        seen[name] = j


def _first_bad(mask: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(mask)[0]
    return int(i), int(j)


def check_features(X: Features, feature_names: list[str], describe_row: RowDescriber) -> None:
    if X.ndim != 2:
        raise DatasetFormatError(f"features must form a table, got an array of shape {X.shape}")
    n, d = X.shape
    if n < 2:
        raise DatasetFormatError(f"a dataset needs at least 2 samples, found {n}")
    if d < 1:
        raise DatasetFormatError("a dataset needs at least 1 feature, found none")
    if len(feature_names) != d:
        raise DatasetFormatError(f"{len(feature_names)} feature names for {d} feature columns")
    _check_names(feature_names, "feature")
    if sp.issparse(X):
        _check_sparse_values(X, feature_names, describe_row)
        return
    if not np.isfinite(X).all():
        i, j = _first_bad(~np.isfinite(X))
        raise DatasetFormatError(
            f"feature {feature_names[j]!r} (column {j + 1}) at {describe_row(i)} is "
            f"{_show(X[i, j])}; every feature value must be a finite number"
        )
    too_large = np.abs(X) > MAX_ABS_FEATURE
    if too_large.any():
        i, j = _first_bad(too_large)
        raise DatasetFormatError(
            f"feature {feature_names[j]!r} (column {j + 1}) at {describe_row(i)} is {float(X[i, j])!r}; "
            f"feature values must lie within +-{MAX_ABS_FEATURE:g}"
        )


def _check_sparse_values(X: sp.csr_matrix, feature_names: list[str], describe_row: RowDescriber) -> None:
    """The dense checks on a CSR matrix's stored values (its implicit zeros are valid values)."""
    for bad, rule in (
        (~np.isfinite(X.data), "every feature value must be a finite number"),
        (np.abs(X.data) > MAX_ABS_FEATURE, f"feature values must lie within +-{MAX_ABS_FEATURE:g}"),
    ):
        if bad.any():
            k = int(np.argmax(bad))
            i, j = int(np.searchsorted(X.indptr, k, side="right")) - 1, int(X.indices[k])
            raise DatasetFormatError(
                f"feature {feature_names[j]!r} (column {j + 1}) at {describe_row(i)} is {_show(X.data[k])}; {rule}"
            )


def _show(value: float) -> str:
    return "missing" if np.isnan(value) else repr(float(value))


def check_labels(
    Y: np.ndarray, label_names: list[str], describe_row: RowDescriber, warnings: list[str]
) -> tuple[np.ndarray, DatasetKind]:
    """Return the label matrix in canonical form (0/1, or rows summing to 1) and its kind."""
    if Y.ndim != 2:
        raise DatasetFormatError(f"labels must form a table, got an array of shape {Y.shape}")
    q = Y.shape[1]
    if q < 1:
        raise DatasetFormatError("a dataset needs at least 1 label, found none")
    if len(label_names) != q:
        raise DatasetFormatError(f"{len(label_names)} label names for {q} label columns")
    _check_names(label_names, "label")

    def where(i: int, j: int) -> str:
        return f"label {label_names[j]!r} (label column {j + 1}) at {describe_row(i)}"

    if Y.dtype == np.uint8 and Y.max(initial=0) <= 1:  # a parser's 0/1 table (sparse files)
        return Y, "multilabel"
    if not np.isfinite(Y).all():
        i, j = _first_bad(~np.isfinite(Y))
        raise DatasetFormatError(f"{where(i, j)} is {_show(Y[i, j])}; labels must be finite")

    is_zero, is_one = Y == 0, Y == 1
    if (is_zero | is_one).all():
        return is_one.view(np.uint8), "multilabel"
    is_minus = Y == -1
    if (is_minus | is_one).all():
        warnings.append("labels given as -1/+1 were mapped to 0/1")
        return is_one.view(np.uint8), "multilabel"
    if is_minus.any():
        i, j = _first_bad(is_minus)
        k, m = _first_bad(~(is_minus | is_one))
        raise DatasetFormatError(
            f"{where(i, j)} is -1 but {where(k, m)} is {float(Y[k, m])!r}; labels must be all "
            "0/1, all -1/+1, or non-negative rows summing to 1"
        )
    if (Y < 0).any():
        i, j = _first_bad(Y < 0)
        raise DatasetFormatError(
            f"{where(i, j)} is {float(Y[i, j])!r}; labels must be 0/1, -1/+1, or a non-negative distribution"
        )
    sums = Y.sum(axis=1)
    off = np.abs(sums - 1.0) > SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        not01 = ~(is_zero[i] | is_one[i])
        j = int(np.argmax(not01)) if not01.any() else int(np.argmax(Y[i]))
        raise DatasetFormatError(
            f"labels are neither 0/1 nor distributions: {describe_row(i)} sums to "
            f"{float(sums[i])!r}, not 1 (e.g. label {label_names[j]!r} = {float(Y[i, j])!r}); "
            "multi-label targets must be 0/1 or -1/+1, distribution rows must sum to 1"
        )
    return Y / sums[:, None], "distribution"


def finalize(
    X: Features,
    Y: np.ndarray,
    feature_names: list[str],
    label_names: list[str],
    warnings: list[str],
    describe_row: RowDescriber = default_row,
    limits: DatasetLimits | None = None,
) -> ParsedDataset:
    """Validate and wrap a parsed dataset (``X`` float64, C-contiguous or canonical CSR).

    The parsers check ``limits`` before allocating; checking again here also covers arrays that
    arrive already built (inline training data).
    """
    if X.ndim == 2 and Y.ndim == 2:
        nnz = None if isinstance(X, np.ndarray) else int(X.nnz)
        check_dimensions(limits or DatasetLimits(), X.shape[0], X.shape[1], Y.shape[1], nnz)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()  # also sorts the indices
        X.eliminate_zeros()
    else:
        X = np.ascontiguousarray(X, dtype=np.float64)
    if Y.dtype != np.uint8:
        Y = np.ascontiguousarray(Y, dtype=np.float64)
    check_features(X, feature_names, describe_row)
    if Y.ndim == 2 and Y.shape[0] != X.shape[0]:
        raise DatasetFormatError(
            f"{X.shape[0]} feature rows but {Y.shape[0]} label rows; both must have one row per sample"
        )
    Y, kind = check_labels(Y, label_names, describe_row, warnings)
    return ParsedDataset(
        X=X,
        Y=np.ascontiguousarray(Y),
        feature_names=list(feature_names),
        label_names=list(label_names),
        kind=kind,
        warnings=warnings,
    )
