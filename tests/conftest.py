"""Shared fixtures: generated datasets and API clients over SQLite and PostgreSQL.

Every API test runs once per database backend (``db`` parameter). The PostgreSQL run creates a
throw-away database on the server named by ``LABELSERVE_TEST_POSTGRES_URL`` (default: the local
server, user postgres) and skips when no server answers.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.config import Settings
from app.main import create_app

POSTGRES_ADMIN_URL = os.environ.get(
    "LABELSERVE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def make_multilabel(n: int = 80, d: int = 6, q: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features in [0, 1]; label j is on when feature j (plus noise) is high."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = (X[:, :q] + 0.2 * rng.standard_normal((n, q)) > 0.5).astype(float)
    return X, Y


def make_distribution(n: int = 80, d: int = 5, c: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Label distributions that depend smoothly on the features."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    logits = X @ rng.standard_normal((d, c)) * 2
    D = np.exp(logits - logits.max(axis=1, keepdims=True))
    return X, D / D.sum(axis=1, keepdims=True)


def csv_bytes(X: np.ndarray, Y: np.ndarray, label_prefix: str = "label") -> bytes:
    features = [f"f{j}" for j in range(X.shape[1])]
    labels = [f"{label_prefix}{j}" for j in range(Y.shape[1])]
    out = io.StringIO()
    out.write(",".join(features + labels) + "\n")
    for x, y in zip(X, Y):
        out.write(",".join(repr(float(v)) for v in np.concatenate([x, y])) + "\n")
    return out.getvalue().encode()


def upload_csv(client: TestClient, X: np.ndarray, Y: np.ndarray, name: str = "data") -> dict:
    response = client.post(
        "/datasets",
        files={"file": (f"{name}.csv", csv_bytes(X, Y), "text/csv")},
        data={"label_count": str(Y.shape[1]), "name": name},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


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
    """A fresh empty database of the backend the test is parametrised with."""
    backend = getattr(request, "param", "sqlite")
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    with throwaway_postgres(request.getfixturevalue("postgres_admin")) as url:
        yield url


@contextmanager
def throwaway_postgres(admin_url: str) -> Iterator[str]:
    """Create an empty database on the admin URL's server, yield its URL, drop it afterwards."""
    from app.db import get_engine

    name = f"labelserve_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        get_engine.cache_clear()  # close pooled connections before dropping
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """API tests (those using ``database_url``) run on SQLite and on PostgreSQL."""
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)


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


def train(client: TestClient, method: str, dataset_id: str, name: str, **params: object) -> dict:
    response = client.post(
        "/train?wait=true",
        json={"method": method, "dataset_id": dataset_id, "model_name": name, "params": params},
    )
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["status"] == "succeeded", job
    return job
