"""Label sets from probability scores: one global threshold learned on inner out-of-fold scores.

At a fixed 0.5 the per-label baselines leave most rows of sparse sets with rare labels empty (a
rare label's probability seldom clears 0.5; figures in docs/methods/br.md). The rule here is the
classifier blend's: the value of ``THRESHOLDS`` maximising micro-F1 of ``scores > t`` (ties: the one
nearest 0.5), chosen on scores of rows the model did not see. With ``threshold="cv"`` (the
default of ``br``, ``ecc`` and ``rf``; ``gbm`` learns it from short inner boosters by default,
``threshold="oof"`` in ``app.methods.gbm``) the estimator, after its own fit, fits
``INNER_FOLDS`` copies of itself at 0.5 on inner folds of its training rows and chooses on their
out-of-fold scores; there it also keeps the never-empty fallback (``fill_empty_``: a row left
empty gets its top-scored label) where that raises micro-F1, so a set whose truth is often empty
keeps its empty sets. A float keeps the plain ``score > threshold`` rule. The cost, ``INNER_FOLDS``
more fits, is paid by the registered model only: ``auto`` ranks by scores and cross-validates its
candidates at 0.5.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field
from sklearn.model_selection import KFold

from app.methods.base import ProgressFn

#: candidate thresholds of a learned rule (the blends' grid)
THRESHOLDS = np.round(np.arange(0.05, 0.951, 0.05), 2)
#: inner folds whose out-of-fold scores a threshold is chosen on
INNER_FOLDS = 3
#: fewer training rows than this: too few to hold any out, the rule stays 0.5
MIN_ROWS = 2 * INNER_FOLDS

#: the ``threshold`` parameter of the thresholded baselines
ThresholdParam = Literal["cv"] | Annotated[float, Field(gt=0, lt=1)]
THRESHOLD_DOC = (
    "Label-set rule: 'cv' (default) learns one threshold maximising micro-F1 on inner 3-fold out-of-fold "
    "scores (and fills an empty set with the top label where that raised micro-F1 there); a number in (0, 1) "
    "keeps the plain rule score > threshold (0.5 was the earlier default)."
)


def micro_f1(Y: np.ndarray, predicted: np.ndarray) -> float:
    """Micro-F1 of 0/1 (or bool) label sets against ``Y`` (0 when both are empty)."""
    relevant = Y > 0
    tp = np.logical_and(predicted, relevant).sum()
    denominator = predicted.sum() + relevant.sum()
    return float(2.0 * tp / denominator) if denominator else 0.0


def micro_f1_threshold(Y: np.ndarray, S: np.ndarray) -> float:
    """The value of ``THRESHOLDS`` maximising micro-F1 of ``S > t`` against ``Y`` (ties: nearest 0.5)."""
    best_t, best_f1 = 0.5, -1.0
    for t in sorted(THRESHOLDS, key=lambda v: (abs(v - 0.5), v)):
        f1 = micro_f1(Y, S > t)
        if f1 > best_f1 + 1e-12:
            best_t, best_f1 = float(t), f1
    return best_t


def label_sets(S: np.ndarray, threshold: float, fill_empty: bool) -> np.ndarray:
    """0/1 label sets (n, q): ``S > threshold``, and with ``fill_empty`` each row left empty given
    its top-scored label."""
    P = (S > threshold).astype(np.int64)
    if fill_empty and P.shape[1]:
        empty = ~P.any(axis=1)
        if empty.any():
            P[np.flatnonzero(empty), np.argmax(S[empty], axis=1)] = 1
    return P


def choose_rule(Y: np.ndarray, S: np.ndarray) -> tuple[float, bool]:
    """(threshold, fill_empty) learned on out-of-fold scores ``S`` of rows with labels ``Y``."""
    t = micro_f1_threshold(Y, S)
    fill = micro_f1(Y, label_sets(S, t, True)) > micro_f1(Y, label_sets(S, t, False)) + 1e-12
    return t, bool(fill)


class LearnedThresholdMixin:
    """The ``threshold`` parameter of a probability classifier (before ``ProbabilityClassifierMixin``
    in the bases): fitted ``threshold_`` and ``fill_empty_``, the label-set rule of ``predict``
    when the caller names no threshold. The estimator calls :meth:`_learn_threshold` at the end
    of its ``_fit``."""

    threshold: Any
    threshold_: float
    fill_empty_: bool
    recorded_attributes: ClassVar[tuple[str, ...]] = ("threshold_", "fill_empty_")

    def _learn_threshold(self, X: Any, Y: np.ndarray, progress: ProgressFn, seed: int | None) -> None:
        """Set ``threshold_`` and ``fill_empty_``: the given float (no fill), or for ``"cv"`` the rule
        chosen on the inner folds' out-of-fold scores of copies of this estimator at 0.5."""
        if self.threshold != "cv":
            self.threshold_, self.fill_empty_ = float(self.threshold), False
            return
        n = Y.shape[0]
        if n < MIN_ROWS:
            self.threshold_, self.fill_empty_ = 0.5, False
            return
        S = np.zeros(Y.shape)
        splits = list(KFold(INNER_FOLDS, shuffle=True, random_state=seed).split(np.zeros((n, 1))))
        params = {**self.get_params(deep=False), "threshold": 0.5}  # type: ignore[attr-defined]
        for f, (tr, te) in enumerate(splits):
            progress("threshold", f / INNER_FOLDS)

            def inner(stage: str, fraction: float, f: int = f) -> None:
                progress("threshold", (f + min(max(fraction, 0.0), 1.0)) / INNER_FOLDS)

            copy: Any = type(self)(**params)
            S[te] = copy.fit(X[tr], Y[tr], progress=inner)._decision_function(X[te])
        progress("threshold", 1.0)
        self.threshold_, self.fill_empty_ = choose_rule(Y, S)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """0.1.x artifacts (br, ecc, rf) predate the learned rule and ``n_jobs``: they predict
        ``score > 0.5`` and fitted one job at a time, and load as such."""
        if "threshold" not in state:
            state = {"threshold": 0.5, "n_jobs": None, **state}
            if "n_features_in_" in state:
                state |= {"threshold_": 0.5, "fill_empty_": False}
        super().__setstate__(state)  # type: ignore[misc]  # a mixin: BaseEstimator is after it

    def _default_threshold(self) -> float:
        return float(self.threshold_)

    def _predict(self, X: Any, threshold: float | None = None) -> np.ndarray:
        S = self._decision_function(X)  # type: ignore[attr-defined]
        if threshold is not None:
            return (S > float(threshold)).astype(np.int64)
        return label_sets(S, self.threshold_, self.fill_empty_)
