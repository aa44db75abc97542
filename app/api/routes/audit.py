"""``GET /audit``: who moved aliases and deleted versions, models and datasets (admin keys only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import PageDep, ReadingDep
from app.api.errors import responses
from app.schemas import AuditAction, AuditEventOut, Page
from app.services import audit

router = APIRouter(tags=["audit"], responses=responses(422))


@router.get("/audit", response_model=Page[AuditEventOut])
def list_audit_events(
    session: ReadingDep,
    page: PageDep,
    action: AuditAction | None = None,
    key_name: Annotated[str | None, Query(max_length=64, description="the events of this key")] = None,
    target: Annotated[str | None, Query(max_length=512, description="the events of this target")] = None,
) -> Page[AuditEventOut]:
    """The audit of alias moves and deletes, newest first."""
    return audit.list_events(session, page, action, key_name, target)
