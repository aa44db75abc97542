"""Shared fixtures: generated datasets and API clients over SQLite and PostgreSQL.

Every API test runs once per database backend (the ``database_url`` parameter). The PostgreSQL run
(marked ``postgres``) creates a throw-away database on the server named by
``LABELSERVE_TEST_POSTGRES_URL`` (default: the local server, user postgres) and skips when no
server answers.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

import app.main
from app.config import Settings
from app.main import create_app
from app.runtime.observability import access_log, configure_logging
from app.storage.db import migrate
from tests.helpers import (
    BACKENDS,
    copy_sqlite,
    make_distribution,
    make_multilabel,
    release,
    throwaway_postgres,
    train_served_models,
    upload_csv,
)

# In-process apps are asked for as http://testserver (Starlette's TestClient): answered like the
# default Host names (LABELSERVE_ALLOWED_HOSTS). Servers the tests start get a clean environment.
os.environ.setdefault("LABELSERVE_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1,::1")

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

    def configure(level: str, *, batched: bool = True) -> None:
        configure_logging(level, batched=batched)
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


@pytest.fixture(scope="session")
def postgres_template(postgres_admin: str) -> Iterator[str]:
    """The name of a migrated database each PostgreSQL test's database is copied from: the
    migration runs once per session instead of once per test."""
    with throwaway_postgres(postgres_admin) as url:
        migrate(url)
        release(url)
        yield str(make_url(url).database)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database each SQLite test's database is copied from (the API's start-up
    then finds it current, as on every restart of the embedded set-up)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "registry.db"
    migrate(f"sqlite:///{path}")
    release(f"sqlite:///{path}")
    return path


@dataclass
class ServedRegistry:
    """A database and a store holding the four models of ``served_models``, trained once per
    backend and session; each test that uses them starts from a copy, so what one test changes
    (aliases, new versions, deletions) never reaches another."""

    database: str  # the SQLite file, or the PostgreSQL database used as a template
    store: Path
    info: dict


class ServedRegistries:
    """The ``ServedRegistry`` of each backend, trained the first time a test asks for it."""

    def __init__(self, request: pytest.FixtureRequest, tmp: pytest.TempPathFactory, stack: ExitStack) -> None:
        self._request, self._tmp, self._stack = request, tmp, stack
        self._trained: dict[str, ServedRegistry] = {}

    def get(self, backend: str) -> ServedRegistry:
        if backend not in self._trained:
            self._trained[backend] = self._train(backend)
        return self._trained[backend]

    def _train(self, backend: str) -> ServedRegistry:
        root = self._tmp.mktemp(f"served-{backend}")
        if backend == "sqlite":
            url = f"sqlite:///{root / 'registry.db'}"
        else:
            admin = self._request.getfixturevalue("postgres_admin")
            template = self._request.getfixturevalue("postgres_template")
            url = self._stack.enter_context(throwaway_postgres(admin, template=template))
        settings = Settings(database_url=url, model_dir=root / "store", max_upload_mb=1)
        with TestClient(create_app(settings)) as client:
            info = train_served_models(client)
        release(url)
        database = str(root / "registry.db") if backend == "sqlite" else str(make_url(url).database)
        return ServedRegistry(database=database, store=root / "store", info=info)


@pytest.fixture(scope="session")
def served_registries(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedRegistries]:
    with ExitStack() as stack:
        yield ServedRegistries(request, tmp_path_factory, stack)


def served_registry(request: pytest.FixtureRequest) -> ServedRegistry | None:
    """The registry a test's database and store start as a copy of: its backend's trained one
    when the test uses ``served_models``, none (they start empty) otherwise."""
    if "served_models" not in request.fixturenames:
        return None
    callspec = getattr(request.node, "callspec", None)
    backend = callspec.params.get("database_url", "sqlite") if callspec else "sqlite"
    registries: ServedRegistries = request.getfixturevalue("served_registries")
    return registries.get(backend)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of the backend the test is parametrised with.

    Both start migrated, a copy of a database migrated once per session (``sqlite_template``,
    ``postgres_template``), as ``labelserve migrate`` or an earlier start leaves it; the start-up
    migration of an empty database is tested in ``tests/integration/test_migrations.py``. A test
    using ``served_models`` gets a copy of its trained registry.
    """
    backend = getattr(request, "param", "sqlite")
    served = served_registry(request)
    if backend == "sqlite":
        source = Path(served.database) if served is not None else request.getfixturevalue("sqlite_template")
        copy_sqlite(source, tmp_path / "registry.db")
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    template = served.database if served is not None else request.getfixturevalue("postgres_template")
    with throwaway_postgres(request.getfixturevalue("postgres_admin"), template=template) as url:
        yield url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Benchmark data, browsers and the PostgreSQL half of the backend-parametrised tests are
    slow wherever they are used: out of the quick subset (the full suite runs them)."""
    for item in items:
        if any(item.get_closest_marker(marker) for marker in ("realdata", "browser", "postgres")):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """API tests (those using ``database_url``) run on SQLite and on PostgreSQL."""
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("database_url", BACKENDS, indirect=True)


@pytest.fixture
def settings(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> Settings:
    served = served_registry(request)
    if served is not None:  # the store that goes with the database's copy
        shutil.copytree(served.store, tmp_path / "store")
    # gc_freeze off: a test process starts hundreds of apps, and freezing at each start would keep
    # every earlier test's objects for good (tests/api/test_speed_switches.py tests it on)
    return Settings(database_url=database_url, model_dir=tmp_path / "store", max_upload_mb=1, gc_freeze=False)


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
def served_models(request: pytest.FixtureRequest, client: TestClient) -> dict:
    """A model of each output kind: ``clf`` (mlknn), ``dm`` (dmknn), ``sel`` (elcfs) on a generated
    multi-label dataset, ``dist`` (ldlkm) on a generated distribution dataset.

    Trained once per backend (``ServedRegistries``); the test's database and store are copies
    made before its ``client`` started (``database_url``, ``settings``)."""
    served = served_registry(request)
    assert served is not None
    return copy.deepcopy(served.info)
