"""Warming through the API: with ``LABELSERVE_WARM_NEW_VERSIONS`` a new version is loaded before its first request."""

from __future__ import annotations

import time

from app.config import Settings
from tests.helpers import register_artifact


def test_the_api_warms_when_told_to(tmp_path):
    from fastapi.testclient import TestClient

    from app.main import create_app

    url = f"sqlite:///{tmp_path / 'api.db'}"
    settings = Settings(database_url=url, model_dir=tmp_path / "store", warm_new_versions=True, warm_poll_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        core = client.app.state.core  # type: ignore[attr-defined]
        key = register_artifact(core, "m", {"v": 1})
        deadline = time.monotonic() + 10
        while len(core.cache) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert core.cache.get(key)[1] is True
