"""``{"items": [...], "next_offset": ...}`` pages over database queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from app.schemas import Page

T = TypeVar("T")


def page(session: Session, query: Select[Any], limit: int, offset: int, convert: Callable[[Any], T]) -> Page[T]:
    """Fetch one row more than asked for to know whether another page exists."""
    rows = session.scalars(query.offset(offset).limit(limit + 1)).all()
    more = len(rows) > limit
    return Page(items=[convert(r) for r in rows[:limit]], next_offset=offset + limit if more else None)
