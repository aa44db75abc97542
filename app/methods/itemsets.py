"""Frequent label combinations (DMKNN's "frequent items", docs/methods/dmknn.md).

The paper mines frequent label combinations with FP-growth and then only ever uses them through
*exact* label-set matches (Y_i = P_j). An itemset that no training sample carries exactly can
never be predicted, so the useful output of FP-growth is

    P = {distinct observed label sets L : |L| >= min_size and support(L) >= min_count},

This module computes that set directly over the U <= m distinct label sets
instead of running FP-growth: the cost is bounded by U^2 q / BLAS, where FP-growth's output can
grow exponentially with q (cal500: 174 labels, about 26 per sample). The tests check it against
a brute-force enumeration of every label combination followed by the n_j >= 1 filter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

SupportMode = Literal["containment", "exact"]

#: Largest number of entries in one block of the distinct-set containment matrix.
_BLOCK_ENTRIES = 1 << 22


def support_count(min_support: float, m: int) -> int:
    """The absolute minimum support sigma.

    A value in (0, 1) is a fraction of the m training samples: max(2, ceil(f m)). A value >= 2
    with no fractional part is a count. Anything else is rejected, as is a count above m.
    """
    f = float(min_support)
    if 0.0 < f < 1.0:
        count = max(2, math.ceil(f * m - 1e-9))
    elif f >= 2.0 and f == int(f):
        count = int(f)
    else:
        raise ValueError(f"min_support must be a fraction in (0, 1) or an integer count >= 2, got {min_support}")
    if count > m:
        raise ValueError(f"min_support = {count} samples exceeds the {m} training samples")
    return count


@dataclass(frozen=True)
class FrequentSets:
    """Frequent label sets in canonical order (size ascending, then label-index tuple).

    ``sets`` (M, q) uint8; ``n_exact`` (M,) training samples whose label set equals each one
    (always >= 1); ``support`` (M,) support in the configured mode; ``row_item`` (m,) the item
    index of each training sample's label set, -1 when it is not a frequent item.
    """

    sets: np.ndarray
    n_exact: np.ndarray
    support: np.ndarray
    row_item: np.ndarray


def frequent_label_sets(
    Y: np.ndarray, min_count: int, min_size: int = 2, mode: SupportMode = "containment"
) -> FrequentSets:
    """The observed label sets of at least ``min_size`` labels with support >= ``min_count``.

    ``containment`` support counts samples whose label set contains L (FP-growth's
    definition); ``exact`` counts samples whose label set equals L.
    """
    Y = np.asarray(Y, dtype=np.uint8)
    m, q = Y.shape
    distinct, inverse, multiplicity = np.unique(Y, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    sizes = distinct.sum(axis=1)
    cand = np.flatnonzero(sizes >= max(1, min_size))
    if mode == "exact":
        support = multiplicity[cand].astype(np.int64)
    elif mode == "containment":
        support = _containment_support(distinct[cand], distinct, multiplicity)
    else:
        raise ValueError(f"support mode must be 'containment' or 'exact', got {mode!r}")
    keep = cand[support >= min_count]
    support = support[support >= min_count]
    order = sorted(range(len(keep)), key=lambda i: (int(sizes[keep[i]]), tuple(np.flatnonzero(distinct[keep[i]]))))
    keep, support = keep[order], support[order]
    item_of_distinct = np.full(len(distinct), -1, dtype=np.intp)
    item_of_distinct[keep] = np.arange(len(keep))
    return FrequentSets(
        sets=distinct[keep].astype(np.uint8).reshape(len(keep), q),
        n_exact=multiplicity[keep].astype(np.int64),
        support=np.asarray(support, dtype=np.int64),
        row_item=item_of_distinct[inverse],
    )


def _containment_support(candidates: np.ndarray, distinct: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """sum of multiplicity[v] over distinct sets v that contain each candidate (blocked)."""
    missing_of = (1.0 - distinct).T  # (q, U): 1 where v lacks the label
    out = np.empty(len(candidates), dtype=np.int64)
    step = max(1, _BLOCK_ENTRIES // max(1, distinct.shape[0]))
    weights = multiplicity.astype(np.float64)
    for start in range(0, len(candidates), step):
        block = candidates[start : start + step].astype(np.float64)
        contained = (block @ missing_of) == 0.0  # L within v <=> no label of L missing in v
        out[start : start + step] = np.rint(contained @ weights).astype(np.int64)
    return out
