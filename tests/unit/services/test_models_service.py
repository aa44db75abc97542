"""The registry service (``services.models``) on a ``Core``, without HTTP: aliases move and go,
deleting a version takes its aliases, and a change is announced to every process's references."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.errors import InvalidInput, NotFound
from app.services import models
from app.services.keys import Caller, Role
from app.storage.orm import AuditEvent, ModelVersion
from tests.helpers import register_artifact

CALLER = Caller("ops", Role.ADMIN, "127.0.0.1")


def _register(core, name: str) -> int:
    """The next version of ``name``, registered as the warming tests do (``register_artifact``)."""
    version_id, _ = register_artifact(core, name, {"a": name})
    with core.database.reading() as session:
        return session.get(ModelVersion, version_id).version


def test_an_alias_moves_and_deleting_its_version_takes_it(core):
    first, second = _register(core, "m"), _register(core, "m")
    with core.database.session() as session:
        models.set_alias(session, core.store, "m", "prod", first, CALLER)
    token = core.store.registry_token()
    with core.database.session() as session:
        assert models.set_alias(session, core.store, "m", "prod", second, CALLER).aliases == {"prod": second}
    assert core.store.registry_token() != token  # every process drops its resolutions
    with core.database.session() as session:
        models.delete_version(session, core.store, "m", second, CALLER)
    with core.database.reading() as session:
        shown = models.show_model(session, core.refs, "m")
    assert shown.aliases == {} and [v.version for v in shown.versions] == [first]
    with core.database.reading() as session:
        audit = [
            (e.action, e.target, e.key_name, e.detail)
            for e in session.scalars(select(AuditEvent).order_by(AuditEvent.id))
        ]
    assert audit == [
        ("alias.set", "m@prod", "ops", {"version": first, "previous": None}),
        ("alias.set", "m@prod", "ops", {"version": second, "previous": first}),
        ("version.delete", f"m@{second}", "ops", {"aliases": ["prod"]}),
    ]


def test_reserved_aliases_and_unknown_models_are_refused(core):
    version = _register(core, "m")
    with core.database.session() as session, pytest.raises(InvalidInput):
        models.set_alias(session, core.store, "m", "latest", version, CALLER)
    with core.database.reading() as session, pytest.raises(NotFound):
        models.show_model(session, core.refs, "nope")
