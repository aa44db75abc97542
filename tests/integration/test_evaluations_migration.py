"""Revision 0003 moves the metrics written onto versions into the evaluations table, and back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from app.storage.db import alembic_config, get_engine, migrate
from tests.helpers import BACKENDS, throwaway_postgres


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    with throwaway_postgres(request.getfixturevalue("postgres_admin")) as url:
        yield url


def add_version(url: str, version: int, metrics: object) -> None:
    """A version row as revision 0002 stores it (``metrics`` NULL, JSON null or an object)."""
    row = {
        "name": "m",
        "version": version,
        "params": "{}",
        "names": "[]",
        "lib": "{}",
        "metrics": None if metrics is None else json.dumps(metrics),
        "now": datetime(2026, 1, version, tzinfo=timezone.utc),
    }
    with get_engine(url).begin() as conn:
        if version == 1:
            conn.execute(text("INSERT INTO models (name, created_at) VALUES (:name, :now)"), row)
        conn.execute(
            text(
                "INSERT INTO model_versions (model_name, version, method, params, dataset_sha256, feature_names, "
                "label_names, metrics, training_seconds, library_versions, artifact_sha256, created_at) VALUES "
                "(:name, :version, 'mlknn', :params, 'abc', :names, :names, :metrics, 1.0, :lib, 'def', :now)"
            ),
            row,
        )


def test_version_metrics_become_evaluations_and_come_back(database: str) -> None:
    migrate(database, "0002")
    add_version(database, 1, {"d1": {"hamming_loss": 0.1}, "d2": {"hamming_loss": 0.2}})
    add_version(database, 2, None)
    add_version(database, 3, "null")  # the JSON null an ORM write of None leaves
    migrate(database)
    with get_engine(database).connect() as conn:
        rows = conn.execute(
            text(
                "SELECT v.version, e.dataset_id, e.metrics, e.options FROM evaluations e "
                "JOIN model_versions v ON v.id = e.version_id ORDER BY e.id"
            )
        ).all()
        columns = conn.execute(text("SELECT * FROM model_versions")).keys()
    decoded = [
        (v, d, m if isinstance(m, dict) else json.loads(m), o if isinstance(o, dict) else json.loads(o))
        for v, d, m, o in rows
    ]
    assert sorted(decoded) == [(1, "d1", {"hamming_loss": 0.1}, {}), (1, "d2", {"hamming_loss": 0.2}, {})]
    assert "metrics" not in columns  # versions no longer change after registration
    command.downgrade(alembic_config(database), "0002")
    with get_engine(database).connect() as conn:
        restored = dict(conn.execute(text("SELECT version, metrics FROM model_versions")).all())
    parse = {k: v if not isinstance(v, str) else json.loads(v) for k, v in restored.items()}
    assert parse[1] == {"d1": {"hamming_loss": 0.1}, "d2": {"hamming_loss": 0.2}}
    assert parse[2] is None
