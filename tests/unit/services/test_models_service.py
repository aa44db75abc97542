"""The registry service (``services.models``) on a ``Core``, without HTTP: aliases move and go,
deleting a version takes its aliases, and a change is announced to every process's references."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput, NotFound
from app.registry.versions import library_versions, register_version
from app.services import models


def _register(core, name: str) -> int:
    sha = core.store.save_artifact({"a": name})
    with core.database.session() as session:
        row = register_version(
            session,
            core.store,
            name,
            method="br",
            params={},
            dataset_id=None,
            dataset_sha256="0" * 64,
            feature_names=["f"],
            label_names=["l"],
            training_seconds=0.0,
            warnings=[],
            library_versions=library_versions(),
            artifact_sha256=sha,
            job_id=None,
            selection=None,
        )
        return row.version


def test_an_alias_moves_and_deleting_its_version_takes_it(core):
    first, second = _register(core, "m"), _register(core, "m")
    with core.database.session() as session:
        models.set_alias(session, core.store, "m", "prod", first)
    token = core.store.registry_token()
    with core.database.session() as session:
        assert models.set_alias(session, core.store, "m", "prod", second).aliases == {"prod": second}
    assert core.store.registry_token() != token  # every process drops its resolutions
    with core.database.session() as session:
        models.delete_version(session, core.store, "m", second)
    with core.database.reading() as session:
        shown = models.show_model(session, core.refs, "m")
    assert shown.aliases == {} and [v.version for v in shown.versions] == [first]


def test_reserved_aliases_and_unknown_models_are_refused(core):
    version = _register(core, "m")
    with core.database.session() as session, pytest.raises(InvalidInput):
        models.set_alias(session, core.store, "m", "latest", version)
    with core.database.reading() as session, pytest.raises(NotFound):
        models.show_model(session, core.refs, "nope")
