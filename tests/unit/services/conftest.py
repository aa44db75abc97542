"""Services without HTTP: a ``Core`` over a copy of the SQLite file migrated once per session
(``sqlite_template``), and a job runner that only records what it was handed (no worker process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.core import Core
from app.jobs.events import JobEvents
from tests.helpers import copy_sqlite


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


@pytest.fixture
def core(sqlite_template: Path, tmp_path: Path) -> Core:
    copy_sqlite(sqlite_template, tmp_path / "services.db")
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'services.db'}", model_dir=tmp_path / "store")
    core = Core.open(settings)
    core.attach_runner(RecordingRunner())
    return core
