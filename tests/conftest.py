"""Shared fixtures: generated datasets and API clients over SQLite and PostgreSQL.

Every API test runs once per database backend (the ``database_url`` parameter). The PostgreSQL run
(marked ``postgres``) creates a throw-away database on the server named by
``LABELSERVE_TEST_POSTGRES_URL`` (default: the local server, user postgres) and skips when no
server answers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

import app.main
from app.config import Settings
from app.db import migrate
from app.main import create_app
from app.observability import access_log, configure_logging
from tests.helpers import BACKENDS, make_distribution, make_multilabel, throwaway_postgres, train, upload_csv

POSTGRES_ADMIN_URL = os.environ.get(
    "LABELSERVE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(autouse=True)
def app_logs_to_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process apps log through pytest's log capture (shown in a failing test's report), not
    on file descriptor 2: the request log writes its batch up to 50 ms after a request, which can
    be after pytest stopped capturing the test, and the JSON line lands among pytest's own.

    Subprocess servers log to files of their own (``LiveServer.log``); ``tests/unit/test_logging.py``
    checks the real handlers (it calls ``configure_logging`` itself).
    """

    def configure(level: str) -> None:
        configure_logging(level)
        for logger in (logging.getLogger("labelserve"), access_log):
            logger.handlers[:] = []
            logger.propagate = True

    monkeypatch.setattr(app.main, "configure_logging", configure)


@pytest.fixture(scope="session")
def postgres_admin() -> str:
    try:
        engine = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # no server: the PostgreSQL half of the suite is skipped
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL}: {exc}")
    return POSTGRES_ADMIN_URL


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of the backend the test is parametrised with.

    SQLite starts empty (the API migrates it at start-up, as in the embedded set-up); PostgreSQL
    is migrated first, as ``labelserve migrate`` leaves it before a production API starts.
    """
    backend = getattr(request, "param", "sqlite")
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    with throwaway_postgres(request.getfixturevalue("postgres_admin")) as url:
        migrate(url)
        yield url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Benchmark data and browsers are slow wherever they are used: out of the quick subset."""
    for item in items:
        if item.get_closest_marker("realdata") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """API tests (those using ``database_url``) run on SQLite and on PostgreSQL."""
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("database_url", BACKENDS, indirect=True)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=database_url, model_dir=tmp_path / "store", max_upload_mb=1)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def multilabel_dataset(client: TestClient) -> dict:
    X, Y = make_multilabel()
    return upload_csv(client, X, Y, "ml")


@pytest.fixture
def distribution_dataset(client: TestClient) -> dict:
    X, D = make_distribution()
    return upload_csv(client, X, D, "ldl")


@pytest.fixture
def served_models(client: TestClient) -> dict:
    """A model of each output kind: ``clf`` (mlknn), ``dm`` (dmknn), ``sel`` (elcfs) on a generated
    multi-label dataset, ``dist`` (ldlkm) on a generated distribution dataset."""
    X, Y = make_multilabel()
    ml = upload_csv(client, X, Y, "ml")
    train(client, "mlknn", ml["id"], "clf", k=5)
    train(client, "dmknn", ml["id"], "dm")
    train(client, "elcfs", ml["id"], "sel", max_iter=50)
    Xd, D = make_distribution()
    ldl = upload_csv(client, Xd, D, "ldl")
    train(client, "ldlkm", ldl["id"], "dist", k=3)
    return {"X": X, "ml": ml, "Xd": Xd, "ldl": ldl}
