"""Who changed the registry and the datasets where no row of the change is left to say so: alias
moves and removals, and the deletes of versions, models and datasets.

Each is an ``AuditEvent`` row, inserted in the change's own transaction (so it is there exactly
when the change is), and once that commits a line at INFO in the structured log (``audit``,
with the key's name); ``GET /audit`` lists them, newest first.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from app.schemas import AuditEventOut, Page
from app.services.keys import Caller
from app.services.paging import PageParams, page
from app.storage.orm import AuditEvent

log = logging.getLogger("labelserve.audit")
#: the session's events waiting for its commit to be logged
_PENDING = "audit_pending"


def record(session: Session, caller: Caller, action: str, target: str, **detail: Any) -> None:
    """Add the event to the session's transaction; it is logged once that commits. A deletion
    staged again after a rollback (``commit_deletion``) records it again and logs it once."""
    session.add(
        AuditEvent(action=action, target=target, key_name=caller.name, address=caller.address, detail=detail or None)
    )
    pending: dict[tuple[str, str], dict[str, Any]] | None = session.info.get(_PENDING)
    if pending is None:
        pending = session.info[_PENDING] = {}
        event.listen(session, "after_commit", _log_committed, once=True)
    pending[(action, target)] = {"key_name": caller.name, "address": caller.address, **detail}


def _log_committed(session: Session) -> None:
    for (action, target), fields in session.info.pop(_PENDING, {}).items():
        log.info("audit", extra={"action": action, "target": target, **fields})


def list_events(
    session: Session, params: PageParams, action: str | None, key_name: str | None, target: str | None
) -> Page[AuditEventOut]:
    """A page of events, newest first, of one action, key or target when those are given."""
    query = select(AuditEvent).order_by(AuditEvent.id.desc())
    for column, wanted in ((AuditEvent.action, action), (AuditEvent.key_name, key_name), (AuditEvent.target, target)):
        if wanted is not None:
            query = query.where(column == wanted)
    return page(session, query, params, lambda row: AuditEventOut.model_validate(row, from_attributes=True))
