"""Cheap feature-ranking baselines for multi-label feature selection benchmarks.

Embedded selectors such as ELCFS (paper 001) or GHC-DR (paper 004) are only worth their cost if
they beat simple filters, so every selection benchmark reports these next to the method:

* :func:`variance_ranking` -- features by descending variance after min-max scaling to [0, 1]
  (unsupervised; scaling first so that the unit of a feature does not decide its rank).
* :func:`mi_ranking` -- features by the sum over labels of a *discrete* mutual information
  I(bin(x_f); y_l), with x_f cut into equal-frequency (quantile) bins. Plug-in estimate in nats,
  computed from contingency counts, so it is exact for the binned data, deterministic and costs
  O(n d q) -- far cheaper than scikit-learn's kNN estimator (``mutual_info_classif``), which is
  randomised (it jitters continuous features) and slow for d ~ 500 features times q ~ 30 labels.
* :func:`random_subsets` -- seeded random feature subsets (the "no selection intelligence" line).

Every ranking returns feature indices best first; ties are broken by the lower index (stable sort),
so results are reproducible.
"""

from __future__ import annotations

import numpy as np


def _minmax(X: np.ndarray) -> np.ndarray:
    """Scale columns to [0, 1]; constant columns become 0."""
    X = np.asarray(X, dtype=np.float64)
    lo = X.min(axis=0)
    span = X.max(axis=0) - lo
    span[span == 0] = 1.0
    return (X - lo) / span


def _rank_desc(scores: np.ndarray) -> np.ndarray:
    """Indices by descending score, ties by lower index."""
    return np.argsort(-scores, kind="stable")


def variance_ranking(X: np.ndarray, scale: bool = True) -> np.ndarray:
    """Feature indices by descending variance (of the [0, 1]-scaled column when ``scale``)."""
    Xs = _minmax(X) if scale else np.asarray(X, dtype=np.float64)
    return _rank_desc(Xs.var(axis=0))


def discretize(X: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Equal-frequency bin codes per column (int, shape (n, d)).

    Bin edges are the column's interior quantiles with duplicates merged, so a sparse column
    (mostly zeros, as in the Yahoo text sets) gets a "zero" bin plus bins for its non-zeros
    instead of several empty bins.
    """
    X = np.asarray(X, dtype=np.float64)
    codes = np.empty(X.shape, dtype=np.int64)
    qs = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    for f in range(X.shape[1]):
        col = X[:, f]
        edges = np.unique(np.quantile(col, qs))
        codes[:, f] = np.searchsorted(edges, col, side="left")  # bin = #edges < x
    return codes


def mi_scores(X: np.ndarray, Y: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Sum over labels of the plug-in mutual information (nats) between binned features and labels.

    For feature f with bin codes b and label column y: I = sum_{b,v} p(b,v) log(p(b,v) / (p(b) p(v))),
    evaluated for all q labels at once from the bin-by-label count matrix.
    """
    Y = (np.asarray(Y) > 0).astype(np.float64)
    n, _ = Y.shape
    codes = discretize(X, n_bins)
    p1 = Y.mean(axis=0)  # p(y_l = 1), shape (q,)
    py = np.stack([1.0 - p1, p1])  # (2, q)
    scores = np.zeros(codes.shape[1])
    for f in range(codes.shape[1]):
        b = codes[:, f]
        nb = int(b.max()) + 1
        onehot = np.zeros((n, nb))
        onehot[np.arange(n), b] = 1.0
        cnt_b = onehot.sum(axis=0)  # (nb,)
        c1 = onehot.T @ Y  # (nb, q) joint counts with y = 1
        joint = np.stack([cnt_b[:, None] - c1, c1]) / n  # (2, nb, q)
        pb = (cnt_b / n)[None, :, None]
        denom = pb * py[:, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(joint > 0, joint * np.log(joint / denom), 0.0)
        scores[f] = terms.sum()
    return scores


def mi_ranking(X: np.ndarray, Y: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Feature indices by descending summed label mutual information (see :func:`mi_scores`)."""
    return _rank_desc(mi_scores(X, Y, n_bins))


def random_subsets(d: int, k: int, n_subsets: int = 5, random_state: int = 0) -> list[np.ndarray]:
    """``n_subsets`` seeded random subsets of ``k`` distinct feature indices out of ``d``."""
    rng = np.random.default_rng(random_state)
    return [np.sort(rng.choice(d, size=k, replace=False)) for _ in range(n_subsets)]
