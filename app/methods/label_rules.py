"""Turning per-label scores into label sets: learned thresholds and the never-empty fallback.

ML-kNN's own rule (posterior > 0.5) is a per-label MAP decision: where every label is rare and
weakly predictable (the Yahoo web-page sets) no posterior reaches 0.5 for most samples, and most
get an empty set although every page carries a label (docs/methods/mlknn.md). Two remedies, both
learned from the training data alone:

* :func:`loo_threshold` -- one threshold on the posteriors that maximises the micro-F1 of the
  leave-one-out training predictions (ML-kNN computes them anyway, so this costs one sort). One
  global threshold: per-label ones chase the few positives of rare labels.
* :func:`fill_empty` -- a sample whose set would be empty gets its single best-scoring label;
  :func:`nonempty_by_default` says whether the training data justify it (nearly every training
  sample carries a label).
"""

from __future__ import annotations

import numpy as np

#: ``ensure_nonempty="auto"`` turns the fallback on when at most this share of the training
#: samples has an empty label set (so a set whose truth is often empty keeps empty predictions)
AUTO_NONEMPTY_MAX_EMPTY = 0.01


def loo_threshold(P: np.ndarray, Y: np.ndarray, default: float = 0.5) -> float:
    """The threshold t maximising micro-F1 of ``P > t`` against ``Y`` (both (m, q)).

    ``P`` should be out-of-sample scores of the training rows (leave-one-out posteriors). The
    returned t lies halfway between the lowest score predicted positive and the next lower
    distinct score (or half the lowest score), so the strict rule ``P > t`` reproduces the optimum.
    Ties in F1 go to the higher threshold (fewer labels). Without any positive, ``default``.
    """
    p = np.asarray(P, dtype=np.float64).ravel()
    y = np.asarray(Y).ravel() > 0
    n_pos = int(y.sum())
    if n_pos == 0 or p.size == 0:
        return float(default)
    order = np.argsort(-p, kind="stable")
    ps = p[order]
    tp = np.cumsum(y[order])
    run_end = np.r_[ps[1:] != ps[:-1], True]  # predicting "score >= ps[i]" is only possible at a run's end
    f1 = np.where(run_end, 2.0 * tp / (np.arange(1, p.size + 1) + n_pos), -1.0)
    best = int(np.argmax(f1))
    lower = ps[best + 1] if best + 1 < p.size else min(0.0, ps[best] - 1.0)
    return float((ps[best] + lower) / 2.0) if lower < ps[best] else float(np.nextafter(ps[best], -np.inf))


def nonempty_by_default(Y: np.ndarray) -> bool:
    """Whether nearly all training samples carry a label (at most 1% have an empty set)."""
    Y = np.asarray(Y)
    return bool(Y.shape[0]) and float((~Y.astype(bool).any(axis=1)).mean()) <= AUTO_NONEMPTY_MAX_EMPTY


def fill_empty(Yhat: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``Yhat`` (modified in place and returned) with each empty row given its top-scoring label
    (ties: lower label index)."""
    empty = ~Yhat.any(axis=1)
    if empty.any() and Yhat.shape[1]:
        Yhat[np.flatnonzero(empty), np.argmax(scores[empty], axis=1)] = 1
    return Yhat
