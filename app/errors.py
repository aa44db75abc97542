"""Domain errors: what services, the job code and the parsers raise when a request cannot be served.

They carry no HTTP objects; ``app.api.errors`` maps each class to its status code once, with
FastAPI exception handlers, so every route answers the same error body. ``loc`` names the input
that was wrong the way FastAPI's validation errors do (``("body", "params", "k")``,
``("query", "limit")``, ``("path", "name")``), so a 422 from a rule looks like a 422 from a schema.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


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


class PayloadTooLarge(DomainError):
    """The input is, or would become, larger than a configured limit (413)."""

    status_code = 413
    error_type = "too_large"


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
        """The errors of a pydantic ``ValidationError``, each located under ``loc``."""
        return cls([((*loc, *err["loc"]), err["msg"], err["type"]) for err in exc.errors(include_url=False)])
