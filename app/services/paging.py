"""``{"items": [...], "next_offset": ...}`` pages over database queries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from app.schemas import Page

T = TypeVar("T")


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int


def page(session: Session, query: Select[Any], params: PageParams, convert: Callable[[Any], T]) -> Page[T]:
    """Fetch one row more than asked for to know whether another page exists."""
    rows = session.scalars(query.offset(params.offset).limit(params.limit + 1)).all()
    more = len(rows) > params.limit
    return Page(
        items=[convert(r) for r in rows[: params.limit]], next_offset=params.offset + params.limit if more else None
    )


def page_of(items: list[T], params: PageParams) -> Page[T]:
    """The same page over a list already in memory."""
    end = params.offset + params.limit
    return Page(items=items[params.offset : end], next_offset=end if end < len(items) else None)
