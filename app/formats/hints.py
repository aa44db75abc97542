"""Upload warnings for datasets that parse but look like a mistake in the options.

A CSV read with a ``label_count`` one too small stores its last label as a feature; a CSV
without a header row turns its first sample into column names. Both parse cleanly, so the only
way the user learns of them is a warning in the upload's answer. The checks here are cheap
(they stop at the first column that rules the mistake out) and only warn: a binary feature
next to the labels is sometimes just a binary feature.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

# how many column names a warning lists before it says "and N more"
_NAMED = 5


def is_binary_column(column: np.ndarray) -> bool:
    """Only 0s and 1s, and both of them (a constant column says nothing about being a label)."""
    zero, one = column == 0, column == 1
    return bool((zero | one).all() and zero.any() and one.any())


def binary_columns(X: np.ndarray | sp.spmatrix | sp.sparray) -> Callable[[int], bool]:
    """``is_binary(j)`` for the columns of ``X``: dense columns are judged when asked (the walk
    stops at the first non-binary one); a sparse matrix is judged whole in one pass over its
    stored values, since slicing a CSR column costs a pass each."""
    if not sp.issparse(X):
        dense = np.asarray(X)
        return lambda j: is_binary_column(dense[:, j])
    csc = sp.csc_array(X)
    n, d = csc.shape
    stored = np.diff(csc.indptr)
    not_one = np.zeros(d, dtype=bool)
    not_one[np.repeat(np.arange(d), stored)[csc.data != 1]] = True
    binary = ~not_one & (stored > 0) & (stored < n)
    return lambda j: bool(binary[j])


def label_count_hint(
    feature_names: Sequence[str],
    is_binary: Callable[[int], bool],
    label_count: int,
    *,
    at_end: bool,
    declared: str = "",
) -> str | None:
    """A warning when the features next to a block of ``label_count`` labels hold only 0/1.

    ``feature_names`` are the feature columns in file order and ``is_binary(j)`` says whether
    feature ``j`` looks like a label; the labels are the last columns (``at_end``) or the first.
    Walking outward from the label block, the run of label-like features is what a too-small
    ``label_count`` leaves behind. When every feature is label-like (bag-of-words datasets such
    as enron or medical), the run says nothing and there is no warning.
    """
    d = len(feature_names)
    order = range(d - 1, -1, -1) if at_end else range(d)
    run: list[str] = []
    for j in order:
        if not is_binary(j):
            break
        run.append(feature_names[j])
    if not run or len(run) == d:
        return None
    if at_end:
        run.reverse()
    shown = ", ".join(repr(name) for name in run[:_NAMED])
    more = f" and {len(run) - _NAMED} more" if len(run) > _NAMED else ""
    side = "before" if at_end else "after"
    columns = f"feature {shown} holds" if len(run) == 1 else f"{len(run)} features ({shown}{more}) hold"
    return (
        f"{columns} only 0/1{declared} right {side} the {label_count} label column(s), stored as "
        f"{'a feature' if len(run) == 1 else 'features'}: if {'it is a label' if len(run) == 1 else 'they are labels'}, "
        f"did you mean label_count={label_count + len(run)}?"
    )


def numeric_header_hint(names: Sequence[str]) -> str | None:
    """A warning when every CSV column name is a number: the file most likely has no header row,
    so its first line (a sample) was read as the column names and is not in the dataset."""
    try:
        for name in names:
            float(name)
    except ValueError:
        return None
    shown = ", ".join(repr(name) for name in names[:_NAMED])
    more = ", ..." if len(names) > _NAMED else ""
    return (
        f"every CSV column name is a number ({shown}{more}): no header row? Line 1 was read as the "
        "column names, so that sample is not in the dataset; add a header row with the column names"
    )
