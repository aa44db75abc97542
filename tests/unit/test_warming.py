"""Warming: a newly registered version is in the model cache before any request asks for it."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.core import Core
from app.registry.versions import library_versions, register_version
from app.services.warming import Warmer
from app.storage.db import migrate


@pytest.fixture
def core(tmp_path: Path) -> Core:
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    migrate(url)
    settings = Settings(database_url=url, model_dir=tmp_path / "store", model_cache_mb=1, warm_poll_seconds=0.05)
    return Core.open(settings)


def register(core: Core, name: str, artifact: object) -> tuple[int, object]:
    sha = core.store.save_artifact(artifact)
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
        session.commit()
        return row.id, row.created_at


def test_a_new_version_is_loaded_before_its_first_request(core):
    warmer = Warmer(core)
    assert warmer.check() == []  # nothing registered, token unchanged
    key = register(core, "m", {"weights": np.arange(10.0)})
    assert warmer.check() == [key]
    served, from_cache = core.cache.get(key)
    assert from_cache and served.name == "m"
    assert warmer.check() == []  # once


def test_only_the_newest_version_of_a_name_is_warmed(core):
    warmer = Warmer(core)
    register(core, "m", {"v": 1})
    newest = register(core, "m", {"v": 2})
    other = register(core, "n", {"v": 3})
    assert warmer.check() == [newest, other]
    assert len(core.cache) == 2


def test_versions_present_at_start_and_models_larger_than_the_cache_are_left_cold(core):
    register(core, "old", {"v": 1})
    warmer = Warmer(core)
    register(core, "huge", {"weights": np.zeros(300_000)})  # 2.4 MB > the 1 MB cache
    assert warmer.check() == [] and len(core.cache) == 0


def test_the_thread_warms_in_the_background(core):
    warmer = Warmer(core).start()
    try:
        key = register(core, "m", {"v": 1})
        deadline = time.monotonic() + 10
        while len(core.cache) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert core.cache.get(key)[1] is True
    finally:
        warmer.stop()


def test_the_api_warms_when_told_to(tmp_path):
    from fastapi.testclient import TestClient

    from app.main import create_app

    url = f"sqlite:///{tmp_path / 'api.db'}"
    settings = Settings(database_url=url, model_dir=tmp_path / "store", warm_new_versions=True, warm_poll_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        core = client.app.state.core  # type: ignore[attr-defined]
        key = register(core, "m", {"v": 1})
        deadline = time.monotonic() + 10
        while len(core.cache) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert core.cache.get(key)[1] is True
