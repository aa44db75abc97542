"""``app.runtime.gc_freeze``: the API's start-up objects are out of the full collections' walk.

In a process of its own (a freeze lasts as long as the process): before start-up nothing is
frozen; once the app's lifespan has started, what start-up made is frozen and a full collection
walks a small remainder of it. Without the freeze, one full collection walked every module the
service imports, 50-176 ms on the event loop (``app/runtime/gc_freeze.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Python subprocess

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import gc, json, sys
from fastapi.testclient import TestClient
from app.config import Settings
from app.main import create_app

api = create_app(Settings(database_url=f"sqlite:///{sys.argv[1]}/db.sqlite", model_dir=sys.argv[1] + "/models"))
before = gc.get_freeze_count()
with TestClient(api) as client:
    assert client.get("/health").status_code == 200
    gc.collect()
    print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "walked": len(gc.get_objects(2))}))
"""


def test_startup_freezes_what_lives_as_long_as_the_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["before"] == 0
    assert counts["frozen"] > 100_000  # the imported libraries: several hundred thousand objects
    assert counts["walked"] < counts["frozen"] / 10
