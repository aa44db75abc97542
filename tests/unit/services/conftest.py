"""Services without HTTP: a ``Core`` over a SQLite file migrated once per session, and a job
runner that only records what it was handed (no worker process)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.config import Settings
from app.core import Core
from app.jobs.events import JobEvents
from app.storage.db import migrate


class RecordingRunner:
    """A ``JobRunner`` that runs nothing: the ids it was handed, in order."""

    def __init__(self) -> None:
        self.events = JobEvents()
        self.submitted: list[str] = []
        self.cancelled: list[str] = []

    def submit(self, job_id: str) -> None:
        self.submitted.append(job_id)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def ended(self, job_id: str) -> None:
        pass

    def recover(self) -> None:
        pass

    def can_queue(self) -> bool:
        return True

    def shutdown(self) -> None:
        pass


@pytest.fixture(scope="session")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "services.db"
    migrate(f"sqlite:///{path}")
    return path


@pytest.fixture
def core(migrated: Path, tmp_path: Path) -> Core:
    shutil.copyfile(migrated, tmp_path / "services.db")
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'services.db'}", model_dir=tmp_path / "store")
    core = Core.open(settings)
    core.attach_runner(RecordingRunner())
    return core
