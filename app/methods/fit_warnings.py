"""Warnings a fit raises when its result should not be trusted as is.

An estimator that stops without converging raises scikit-learn's ``ConvergenceWarning``; one
that meets a degenerate case raises a subclass of :class:`DegenerateFitWarning`; one whose rule
scored below another it measured on the same training data, :class:`BetterRuleWarning`. The job runner
records every warning a training raised on the model version, so an API user sees them next to
the version's metrics; the fitted attributes (``converged_``, ``convex_``, ...) keep the detail.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "ConvergenceWarning",
    "DegenerateFitWarning",
    "EmptyLabelSetWarning",
    "ConstantScoresWarning",
    "NonConvexWarning",
    "BetterRuleWarning",
    "EMPTY_SHARE_LIMIT",
    "warn_if_mostly_empty",
    "warn_if_constant",
    "recorded",
]

#: Share of labelled training samples left with an empty predicted set above which a fit warns.
EMPTY_SHARE_LIMIT = 0.5


class DegenerateFitWarning(UserWarning):
    """The fit finished, but its model is degenerate in a way that makes its output misleading."""


class EmptyLabelSetWarning(DegenerateFitWarning):
    """The label-set rule leaves most samples that do carry labels with an empty predicted set."""


class ConstantScoresWarning(DegenerateFitWarning):
    """Every score is the same, so the ranking (of labels or features) carries no information."""


class NonConvexWarning(DegenerateFitWarning):
    """The objective is not strictly convex at these parameters: the solution is a saddle point or
    the minimum-norm solution of a singular system, not the unique minimiser."""


class BetterRuleWarning(UserWarning):
    """Another rule the fit measured beside the one in use scored higher on the same leave-one-out
    training predictions: the model is as asked for (e.g. a paper's rule), but the data favour
    the other."""


def warn_if_mostly_empty(Y: np.ndarray, Yhat: np.ndarray, method: str, what: str, stacklevel: int = 3) -> float:
    """Warn (:class:`EmptyLabelSetWarning`) when ``Yhat`` is empty for more than half of the rows
    whose true set ``Y`` is not; returns that share (0 when no row carries a label).

    ``Yhat`` holds the predictions for the training rows themselves (leave-one-out where the
    method has them), so the warning is raised at training time, before any user sees an empty set.
    """
    labelled = np.asarray(Y).any(axis=1)
    if not labelled.any():
        return 0.0
    share = float((~np.asarray(Yhat)[labelled].any(axis=1)).mean())
    if share > EMPTY_SHARE_LIMIT:
        warnings.warn(
            f"{method}: {what} predicts an empty label set for {100 * share:.0f}% of the training samples that "
            "carry labels",
            EmptyLabelSetWarning,
            stacklevel=stacklevel,
        )
    return share


def warn_if_constant(scores: np.ndarray, method: str, what: str, stacklevel: int = 3) -> bool:
    """Warn (:class:`ConstantScoresWarning`) when every entry of ``scores`` is the same; returns
    whether they were."""
    s = np.asarray(scores, dtype=np.float64)
    constant = bool(s.size) and bool(np.ptp(s) <= 1e-12 * max(1.0, float(np.abs(s).max())))
    if constant:
        warnings.warn(
            f"{method}: every {what} is the same ({float(s.flat[0]):.6g})", ConstantScoresWarning, stacklevel=stacklevel
        )
    return constant


#: At most this many distinct warnings, each cut to this many characters, are kept per training.
MAX_RECORDED = 20
MAX_MESSAGE = 500


def recorded(caught: list[warnings.WarningMessage]) -> list[dict[str, str]]:
    """The ``UserWarning``s (``ConvergenceWarning`` and :class:`DegenerateFitWarning` included) of
    a training, as ``{"category", "message"}`` records for the model version: distinct ones only,
    in the order first raised. Deprecation and runtime noise from libraries is left out."""
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for w in caught:
        if not issubclass(w.category, UserWarning):
            continue
        key = (w.category.__name__, str(w.message)[:MAX_MESSAGE])
        if key not in seen and len(out) < MAX_RECORDED:
            seen.add(key)
            out.append({"category": key[0], "message": key[1]})
    return out
