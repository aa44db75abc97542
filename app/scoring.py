"""Every evaluation metric of the service, in one place.

Multi-label metrics take ``Y`` (n, q) true label sets (0/1; anything > 0 counts as relevant),
``Yhat`` (n, q) predicted label sets, and/or ``S`` (n, q) real-valued scores (higher = more
relevant); label distribution metrics take ``D`` (n, c) true and ``Dhat`` (n, c) predicted
distributions. Every function returns the mean over samples as a Python ``float``, ``nan`` when
every row is skipped (JSON layers map it to ``null``).

Definitions follow the papers (the ML-kNN authors' MATLAB evaluation code for multi-label, Geng's
LDL toolbox for distributions); scikit-learn is used where its definition is the same, and the
ranking metrics are vectorised here (equal to scikit-learn's on the rows both keep, tested). The
conventions that change numbers, used everywhere in the service and the benchmarks, are listed in
docs/metrics.md: pessimistic ranks for ties, degenerate rows skipped by the ranking metrics, the
papers' coverage (scikit-learn's minus one), F1's ``zero_division`` 0.0 (Mulan's 1.0 on request),
and 0/0 := 0 in the LDL metrics.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.metrics import accuracy_score, coverage_error, f1_score
from sklearn.metrics import hamming_loss as _sk_hamming_loss

__all__ = [
    "hamming_loss",
    "ranking_loss",
    "one_error",
    "coverage",
    "average_precision",
    "subset_accuracy",
    "micro_f1",
    "macro_f1",
    "example_f1",
    "multilabel_metrics",
    "MULTILABEL_METRICS",
    "chebyshev",
    "clark",
    "canberra",
    "kl_divergence",
    "cosine",
    "intersection",
    "ldl_metrics",
    "LDL_METRICS",
    "LOWER_IS_BETTER",
]

KL_EPS = 1e-12

#: metric names whose best value is the smallest one (every other metric: higher is better)
LOWER_IS_BETTER = frozenset(
    {
        "hamming_loss",
        "ranking_loss",
        "one_error",
        "coverage",
        "chebyshev",
        "clark",
        "canberra",
        "kl_divergence",
    }
)


# --------------------------------------------------------------------------- input checks


def _as_2d(a: object, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_labels), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    return arr


def _labels(Y: object, name: str = "Y") -> np.ndarray:
    """Boolean label matrix: anything > 0 is relevant (so 0/1 and -1/+1 both work)."""
    arr = _as_2d(Y, name)
    return arr > 0


def _scores(S: object, shape: tuple[int, int]) -> np.ndarray:
    arr = _as_2d(S, "S").astype(np.float64, copy=False)
    if arr.shape != shape:
        raise ValueError(f"S has shape {arr.shape}, expected {shape} (the shape of Y)")
    if not np.isfinite(arr).all():
        raise ValueError("S contains non-finite scores")
    return arr


def _pair(Y: object, Yhat: object) -> tuple[np.ndarray, np.ndarray]:
    y = _labels(Y, "Y")
    p = _labels(Yhat, "Yhat")
    if y.shape != p.shape:
        raise ValueError(f"Yhat has shape {p.shape}, expected {y.shape} (the shape of Y)")
    return y, p


#: entries of one block of the (relevant entry x label) comparisons of ``_relevant_ranks``
_COMPARE_ENTRIES = 1 << 22


def _relevant_ranks(Y: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The relevant entries (rows, columns) and, at each, ``rank`` = #{labels with score >= its
    score} and ``relrank`` = the same count among the row's relevant labels (scipy's
    ``rankdata(-S, method="max")``, pessimistic on ties, over all labels and over the relevant
    ones). Counted for the relevant entries only: label sets are sparse (bibtex: 2.4 of 159 per
    row), and a selection's ensemble search computes this thousands of times (two full-matrix
    ``rankdata`` sorts took 85 ms on 3,900 x 159)."""
    r, c = np.nonzero(Y)
    values = S[r, c]
    rank = np.empty(r.size, dtype=np.int64)
    relrank = np.empty(r.size, dtype=np.int64)
    step = max(1, _COMPARE_ENTRIES // max(S.shape[1], 1))
    for a in range(0, r.size, step):
        rows = r[a : a + step]
        above = S[rows] >= values[a : a + step, None]
        rank[a : a + step] = above.sum(axis=1)
        relrank[a : a + step] = (above & Y[rows]).sum(axis=1)
    return r, c, rank, relrank


def _at_relevant(shape: tuple[int, int], r: np.ndarray, c: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` at the relevant entries of an otherwise zero (n, q) matrix (row sums then add in
    the same order as over the dense matrix)."""
    out = np.zeros(shape)
    out[r, c] = values
    return out


def _mean_or_nan(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


# --------------------------------------------------------------------------- multi-label


def hamming_loss(Y: object, Yhat: object) -> float:
    """Fraction of misclassified (sample, label) pairs: (1/nq) sum_i |Y_i xor Yhat_i|."""
    y, p = _pair(Y, Yhat)
    return float(_sk_hamming_loss(y, p))


def subset_accuracy(Y: object, Yhat: object) -> float:
    """Fraction of samples whose predicted label set equals the true one exactly."""
    y, p = _pair(Y, Yhat)
    return float(accuracy_score(y, p))


def micro_f1(Y: object, Yhat: object, *, zero_division: float = 0.0) -> float:
    """2 sum TP / (2 sum TP + sum FP + sum FN), counts pooled over samples and labels."""
    y, p = _pair(Y, Yhat)
    return float(f1_score(y, p, average="micro", zero_division=zero_division))


def macro_f1(Y: object, Yhat: object, *, zero_division: float = 0.0) -> float:
    """Mean over labels of 2 TP_l / (2 TP_l + FP_l + FN_l) (a label with 0/0 scores
    ``zero_division``)."""
    y, p = _pair(Y, Yhat)
    return float(f1_score(y, p, average="macro", zero_division=zero_division))


def example_f1(Y: object, Yhat: object, *, zero_division: float = 0.0) -> float:
    """Mean over samples of 2 |Y_i & Yhat_i| / (|Y_i| + |Yhat_i|) (a sample with both sets
    empty scores ``zero_division``)."""
    y, p = _pair(Y, Yhat)
    return float(f1_score(y, p, average="samples", zero_division=zero_division))


def ranking_loss(Y: object, S: object) -> float:
    """Mean over samples of the fraction of (relevant, irrelevant) label pairs ordered wrongly,
    ``|{(a, b) in Y_i x Ybar_i : s_a <= s_b}| / (|Y_i| |Ybar_i|)``; rows with an empty or full
    label set are skipped."""
    y = _labels(Y)
    s = _scores(S, y.shape)
    n_pos = y.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < y.shape[1])
    y, s, n_pos = y[keep], s[keep], n_pos[keep]
    if not y.shape[0]:
        return math.nan
    r, c, rank, relrank = _relevant_ranks(y, s)
    # rank - relrank = number of irrelevant labels scored >= this relevant label
    wrong = _at_relevant(y.shape, r, c, rank - relrank).sum(axis=1)
    return float(np.mean(wrong / (n_pos * (y.shape[1] - n_pos))))


def one_error(Y: object, S: object) -> float:
    """Fraction of samples whose top-scored label is irrelevant (a tie at the top counts as
    correct if any tied label is relevant); rows with an empty or full label set are skipped."""
    y = _labels(Y)
    s = _scores(S, y.shape)
    n_pos = y.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < y.shape[1])
    y, s = y[keep], s[keep]
    top = s == s.max(axis=1, keepdims=True)
    return _mean_or_nan(~(top & y).any(axis=1))


def coverage(Y: object, S: object) -> float:
    """Mean over samples of ``max_{l in Y_i} rank(l) - 1``: how far down the ranking one must go
    to cover every relevant label (papers' definition; scikit-learn's ``coverage_error`` minus
    one). Rows with an empty label set are skipped."""
    y = _labels(Y)
    s = _scores(S, y.shape)
    keep = y.any(axis=1)
    if not keep.any():
        return math.nan
    return float(coverage_error(y[keep], s[keep])) - 1.0


def average_precision(Y: object, S: object) -> float:
    """Mean over samples of ``(1/|Y_i|) sum_{l in Y_i} |{l' in Y_i : rank(l') <= rank(l)}| /
    rank(l)``; rows with an empty or full label set are skipped."""
    y = _labels(Y)
    s = _scores(S, y.shape)
    n_pos = y.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < y.shape[1])
    y, s, n_pos = y[keep], s[keep], n_pos[keep]
    if not y.shape[0]:
        return math.nan
    r, c, rank, relrank = _relevant_ranks(y, s)
    precision = _at_relevant(y.shape, r, c, relrank / rank).sum(axis=1) / n_pos
    return float(precision.mean())


#: the multi-label metric names, in the order of the API contract
MULTILABEL_METRICS = (
    "hamming_loss",
    "ranking_loss",
    "one_error",
    "coverage",
    "average_precision",
    "subset_accuracy",
    "micro_f1",
    "macro_f1",
    "example_f1",
)


def multilabel_metrics(Y: object, Yhat: object, S: object | None) -> dict[str, float]:
    """Every multi-label metric of the API contract. ``S`` may be ``None`` for a method that
    predicts label sets only; the ranking metrics are then left out.

    The same values as the functions above (tested), computed together: the label-set metrics
    from one set of counts, the ranking metrics from one ranking of the scores. Each function
    alone validates its input (scikit-learn's checks scan the whole matrix) and ranks the scores
    again; together they took 0.3 s on 1,000 x 200, which a report paid on every first view.
    """
    y, p = _pair(Y, Yhat)
    n, q = y.shape
    wrong = y != p
    hits = y & p
    out: dict[str, float] = {"hamming_loss": int(np.count_nonzero(wrong)) / (n * q)}
    if S is not None:
        out.update(_ranking_metrics(y, _scores(S, y.shape)))
    out["subset_accuracy"] = int(np.count_nonzero(~wrong.any(axis=1))) / n
    tp, true, predicted = hits.sum(axis=0), y.sum(axis=0), p.sum(axis=0)
    out["micro_f1"] = _f1(np.array([tp.sum()]), np.array([true.sum() + predicted.sum()]))
    out["macro_f1"] = _f1(tp, true + predicted)
    out["example_f1"] = _f1(hits.sum(axis=1), y.sum(axis=1) + p.sum(axis=1))
    return out


def _f1(tp: np.ndarray, total: np.ndarray, zero_division: float = 0.0) -> float:
    """Mean of ``2 tp / total`` (``total`` = true + predicted positives), ``zero_division`` where 0/0."""
    f1 = np.full(tp.shape, zero_division, dtype=np.float64)
    np.divide(2.0 * tp, total.astype(np.float64), out=f1, where=total > 0)
    return float(f1.mean())


def _ranking_metrics(y: np.ndarray, s: np.ndarray) -> dict[str, float]:
    """Ranking loss, one-error, coverage and average precision from one pessimistic ranking,
    each over the rows its definition keeps (see the module's conventions)."""
    n_pos = y.sum(axis=1)
    covered = n_pos > 0
    if not covered.any():
        return {"ranking_loss": math.nan, "one_error": math.nan, "coverage": math.nan, "average_precision": math.nan}
    y, s, n_pos = y[covered], s[covered], n_pos[covered]
    r, c, rank, relrank = _relevant_ranks(y, s)
    keep = n_pos < y.shape[1]
    out = {"coverage": float(_at_relevant(y.shape, r, c, rank).max(axis=1).mean()) - 1.0}
    if not keep.any():
        return {"ranking_loss": math.nan, "one_error": math.nan, **out, "average_precision": math.nan}
    wrong = _at_relevant(y.shape, r, c, rank - relrank)[keep].sum(axis=1)
    precision = _at_relevant(y.shape, r, c, relrank / rank)[keep].sum(axis=1)
    y, s, n_pos = y[keep], s[keep], n_pos[keep]
    top = s == s.max(axis=1, keepdims=True)
    return {
        "ranking_loss": float(np.mean(wrong / (n_pos * (y.shape[1] - n_pos)))),
        "one_error": float(np.mean(~(top & y).any(axis=1))),
        **out,
        "average_precision": float((precision / n_pos).mean()),
    }


# --------------------------------------------------------------------------- LDL


def _dists(D: object, Dhat: object) -> tuple[np.ndarray, np.ndarray]:
    d = _as_2d(D, "D").astype(np.float64, copy=False)
    h = _as_2d(Dhat, "Dhat").astype(np.float64, copy=False)
    if d.shape != h.shape:
        raise ValueError(f"Dhat has shape {h.shape}, expected {d.shape} (the shape of D)")
    if not (np.isfinite(d).all() and np.isfinite(h).all()):
        raise ValueError("D and Dhat must be finite")
    return d, h


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0/0 := 0 (den is never negative here)."""
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den > 0)
    return out


def chebyshev(D: object, Dhat: object) -> float:
    """Mean of max_l |d_l - d̂_l| (lower is better)."""
    d, h = _dists(D, Dhat)
    return float(np.abs(d - h).max(axis=1).mean())


def clark(D: object, Dhat: object) -> float:
    """Mean of sqrt(sum_l (d_l - d̂_l)^2 / (d_l + d̂_l)^2), 0/0 terms = 0 (lower is better)."""
    d, h = _dists(D, Dhat)
    terms = _safe_ratio((d - h) ** 2, (d + h) ** 2)
    return float(np.sqrt(terms.sum(axis=1)).mean())


def canberra(D: object, Dhat: object) -> float:
    """Mean of sum_l |d_l - d̂_l| / (d_l + d̂_l), 0/0 terms = 0 (lower is better)."""
    d, h = _dists(D, Dhat)
    return float(_safe_ratio(np.abs(d - h), d + h).sum(axis=1).mean())


def kl_divergence(D: object, Dhat: object, *, eps: float = KL_EPS) -> float:
    """Mean of sum_l d_l log(d_l / max(d̂_l, eps)); terms with d_l = 0 are 0 (lower is
    better)."""
    d, h = _dists(D, Dhat)
    pos = d > 0
    terms = np.zeros_like(d)
    terms[pos] = d[pos] * (np.log(d[pos]) - np.log(np.maximum(h[pos], eps)))
    return float(terms.sum(axis=1).mean())


def cosine(D: object, Dhat: object) -> float:
    """Mean of <d, d̂> / (|d| |d̂|), 0 for a zero-norm row (higher is better)."""
    d, h = _dists(D, Dhat)
    num = np.einsum("ij,ij->i", d, h)
    den = np.linalg.norm(d, axis=1) * np.linalg.norm(h, axis=1)
    return float(_safe_ratio(num, den).mean())


def intersection(D: object, Dhat: object) -> float:
    """Mean of sum_l min(d_l, d̂_l) (higher is better)."""
    d, h = _dists(D, Dhat)
    return float(np.minimum(d, h).sum(axis=1).mean())


#: the LDL metric names, in the order of the API contract
LDL_METRICS = ("chebyshev", "clark", "canberra", "kl_divergence", "cosine", "intersection")


def ldl_metrics(D: object, Dhat: object) -> dict[str, float]:
    """Every label distribution metric of the API contract."""
    d, h = _dists(D, Dhat)
    return {
        "chebyshev": chebyshev(d, h),
        "clark": clark(d, h),
        "canberra": canberra(d, h),
        "kl_divergence": kl_divergence(d, h),
        "cosine": cosine(d, h),
        "intersection": intersection(d, h),
    }
