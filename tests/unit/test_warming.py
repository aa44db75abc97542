"""Warming: a newly registered version is in the model cache before any request asks for it."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.core import Core
from app.services.warming import Warmer
from app.storage.db import migrate
from tests.helpers import register_artifact


@pytest.fixture
def core(tmp_path: Path) -> Core:
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    migrate(url)
    settings = Settings(database_url=url, model_dir=tmp_path / "store", model_cache_mb=1, warm_poll_seconds=0.05)
    return Core.open(settings)


def test_a_new_version_is_loaded_before_its_first_request(core):
    warmer = Warmer(core)
    assert warmer.check() == []  # nothing registered, token unchanged
    key = register_artifact(core, "m", {"weights": np.arange(10.0)})
    assert warmer.check() == [key]
    served, from_cache = core.cache.get(key)
    assert from_cache and served.name == "m"
    assert warmer.check() == []  # once


def test_only_the_newest_version_of_a_name_is_warmed(core):
    warmer = Warmer(core)
    register_artifact(core, "m", {"v": 1})
    newest = register_artifact(core, "m", {"v": 2})
    other = register_artifact(core, "n", {"v": 3})
    assert warmer.check() == [newest, other]
    assert len(core.cache) == 2


def test_versions_present_at_start_and_models_larger_than_the_cache_are_left_cold(core):
    register_artifact(core, "old", {"v": 1})
    warmer = Warmer(core)
    register_artifact(core, "huge", {"weights": np.zeros(300_000)})  # 2.4 MB > the 1 MB cache
    assert warmer.check() == [] and len(core.cache) == 0


def test_the_thread_warms_in_the_background(core):
    warmer = Warmer(core).start()
    try:
        key = register_artifact(core, "m", {"v": 1})
        deadline = time.monotonic() + 10
        while len(core.cache) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert core.cache.get(key)[1] is True
    finally:
        warmer.stop()
