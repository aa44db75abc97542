"""Domain errors: what services, the job code and the parsers raise when a request cannot be served.

They carry no HTTP objects; ``app.api.errors`` maps each class to its status code once, with
FastAPI exception handlers, so every route answers the same error body. ``loc`` names the input
that was wrong the way FastAPI's validation errors do (``("body", "params", "k")``,
``("query", "limit")``, ``("path", "name")``), so a 422 from a rule looks like a 422 from a schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

_APP_DIR = str(Path(__file__).resolve().parent)


def raised_by_the_service(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is the service's code (a check of its
    own, whose message explains the fault) rather than a library's, whose text is not for clients."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_APP_DIR)


class DomainError(Exception):
    """Base class: a message safe to show the client, and the location of the faulty input."""

    status_code: int = 400
    error_type: str = "error"

    def __init__(self, message: str, *, loc: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.loc: tuple[str | int, ...] = tuple(loc)


class InvalidInput(DomainError):
    """The request is well-formed but its content breaks a rule (422)."""

    status_code = 422
    error_type = "value_error"


class NotFound(DomainError):
    """An id, name, version or alias that does not exist (404)."""

    status_code = 404
    error_type = "not_found"


class Conflict(DomainError):
    """The request clashes with the current state: in use, already exists, integrity failure (409)."""

    status_code = 409
    error_type = "conflict"


class Forbidden(DomainError):
    """The caller's API key may not do this (403)."""

    status_code = 403
    error_type = "forbidden"


class PayloadTooLarge(DomainError):
    """The input is, or would become, larger than a configured limit (413)."""

    status_code = 413
    error_type = "too_large"


class RetryLater(DomainError):
    """The same request may succeed after ``retry_after`` seconds (answered with ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after: int, loc: Sequence[str | int] = ()) -> None:
        super().__init__(message, loc=loc)
        self.retry_after = retry_after


class TooManyRequests(RetryLater):
    """A bound on what one caller (or this process) may have pending is reached (429)."""

    status_code = 429
    error_type = "too_many_requests"


class Unavailable(RetryLater):
    """Something the request needs besides the database (the job broker) cannot be reached now;
    nothing was stored (503)."""

    status_code = 503
    error_type = "unavailable"


class InsufficientStorage(DomainError):
    """The store or the database has no room left to make the result durable (507)."""

    status_code = 507
    error_type = "insufficient_storage"


class InvalidFields(InvalidInput):
    """Several inputs wrong at once, each with its own location, message and type (422).

    What a service raises when a pydantic model it validates itself (a method's ``params``, the
    upload's parse options) rejects the input: the client gets one item per error, located in
    the request as if FastAPI had validated the field.
    """

    def __init__(self, errors: Sequence[tuple[tuple[str | int, ...], str, str]]) -> None:
        if not errors:
            raise ValueError("InvalidFields needs at least one error")
        super().__init__("; ".join(msg for _, msg, _ in errors), loc=errors[0][0])
        self.errors = tuple(errors)

    @classmethod
    def from_pydantic(cls, exc: ValidationError, *, loc: Sequence[str | int]) -> InvalidFields:
        """The errors of a pydantic ``ValidationError``, each located under ``loc`` (tidied: see
        :func:`tidy_pydantic`)."""
        return cls([((*loc, *item_loc), msg, kind) for item_loc, msg, kind in tidy_pydantic(exc.errors())])


# what pydantic puts before the message of a ValueError / AssertionError raised by a validator
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
# a union member as pydantic names it in ``loc``: list[list[float]], dict[str,float], function-after[...]
_BRANCH = re.compile(r"^[a-z][a-z0-9_-]*\[.*\]$")

ErrorItem = tuple[tuple[str | int, ...], str, str]


def tidy_pydantic(errors: Sequence[Mapping[str, Any]]) -> list[ErrorItem]:
    """Pydantic's errors as ``(loc, msg, type)`` items in the API's words, not pydantic's.

    * a validator's message loses pydantic's ``Value error, `` prefix;
    * a value that fits no member of a union (``instances``: rows of numbers, or objects of
      feature names) gives one error per member, located under the member's type name
      (``["instances", "list[list[float]]", 0, 0]``); only the member that got furthest is kept
      (the one whose ``loc`` is longest: a string where rows were expected fails both at once,
      and the identical messages fold into one), without the type name in its ``loc``.
    """
    slots: list[tuple[bool, list[ErrorItem]]] = []  # (a union's members?, items), in pydantic's order
    unions: dict[tuple[str | int, ...], list[ErrorItem]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        msg = str(error["msg"])
        for prefix in _PYDANTIC_PREFIXES:
            msg = msg.removeprefix(prefix)
        branch = _branch_index(loc)
        if branch is None:
            slots.append((False, [(loc, msg, str(error["type"]))]))
            continue
        field = loc[:branch]
        if field not in unions:
            unions[field] = []
            slots.append((True, unions[field]))
        unions[field].append(((*field, *loc[branch + 1 :]), msg, str(error["type"])))
    tidy: list[ErrorItem] = []
    for is_union, members in slots:
        if not is_union:
            tidy.extend(members)
            continue
        deepest = max(len(loc) for loc, _, _ in members)
        for member in members:
            if len(member[0]) == deepest and member not in tidy:
                tidy.append(member)
    return tidy


def _branch_index(loc: tuple[str | int, ...]) -> int | None:
    """Where a union member's type name sits in ``loc``: a name right after a field name (a
    dict key, such as a feature name, comes after a row index instead)."""
    for i in range(1, len(loc)):
        part = loc[i]
        if isinstance(part, str) and isinstance(loc[i - 1], str) and _BRANCH.match(part):
            return i
    return None
