"""The request's database sessions end before its response is sent: FastAPI ends a dependency with
``yield`` after the response by default, so a read session's end that failed (its PostgreSQL
backend terminated) logged "Exception in ASGI application" after a 200, and a write session
committed after the client had been told it succeeded."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, text

from app.config import Settings
from app.main import create_app
from app.services import datasets
from tests.helpers import make_multilabel, upload_csv


def test_sessions_end_before_the_response_starts(settings: Settings) -> None:
    app = create_app(settings)
    order: list[str] = []

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                order.append("response")
            await send(message)

        await app(scope, receive, sending)

    with TestClient(recorded) as client:
        X, Y = make_multilabel(n=30)
        dataset = upload_csv(client, X, Y)
        engine = app.state.core.database.engine
        for ending in ("commit", "rollback"):
            event.listen(engine, ending, lambda connection: order.append("session ended"))
        for method, path in (
            ("GET", "/datasets"),
            ("GET", f"/datasets/{dataset['id']}"),
            ("DELETE", f"/datasets/{dataset['id']}"),
        ):
            order.clear()
            assert client.request(method, path).status_code in (200, 204)
            assert order and order[-1] == "response", (method, path, order)


def test_a_read_session_whose_backend_dies_after_its_reads_still_answers(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = settings.resolved_database_url
    if not url.startswith("postgresql"):
        pytest.skip("terminates a PostgreSQL backend")
    X, Y = make_multilabel(n=30)
    upload_csv(client, X, Y, "toy")
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    listed = datasets.list_datasets

    def then_killed(session, params):  # the listing is read, then its backend is terminated
        found = listed(session, params)
        pid = session.execute(text("SELECT pg_backend_pid()")).scalar()
        with admin.connect() as killer:
            killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        return found

    monkeypatch.setattr(datasets, "list_datasets", then_killed)
    try:
        r = client.get("/datasets")  # the test client raises what the app raised after its response
    finally:
        admin.dispose()
    assert r.status_code == 200 and [d["name"] for d in r.json()["items"]] == ["toy"], r.text
    monkeypatch.undo()
    assert client.get("/datasets").status_code == 200  # the lost connection left the pool
