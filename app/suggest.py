""" "Did you mean" for a name that is not one of the valid choices (a method id, a model name, an
alias, a parameter): the closest choice by difflib's ratio, compared case-insensitively, so that
``mlknnn`` and ``MLkNN`` both point at ``mlknn``. Plain Python: schemas, services and the CLI
use it alike.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (case-insensitively), or None when none is close."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    match = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[match[0]] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or "" when none is close."""
    match = closest(word, choices)
    return f" (did you mean '{match}'?)" if match is not None and match != word else ""
