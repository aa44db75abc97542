"""Guards of the speed machinery: each piece is at work with its switch on (a test fails if it
silently stops), and its switch turns it off without changing an answer.

The store's pickle rewriting (through ``Core.open``) and the request log's batches are guarded in
``tests/unit/test_pickle_memo.py`` and ``tests/unit/test_logging.py``; here, that the app hands
the log its switch.
"""

from __future__ import annotations

import gc
import logging
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app import main
from app.api.routes import predict as predict_route
from app.api.v2 import routes as v2_routes
from app.config import Settings
from app.main import create_app
from app.runtime import allocator
from app.runtime.observability import BatchedLines, access_log, configure_logging


@contextmanager
def _app(settings: Settings, **switches: bool) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update=switches))) as client:
        yield client


@contextmanager
def _queries(client: TestClient) -> Iterator[list[str]]:
    """The statements requests run on the app's database meanwhile (not those of the service's
    own threads, the sweeper and the reaper, which run when they are due)."""
    engine = client.app.state.core.database.engine  # type: ignore[attr-defined]
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not threading.current_thread().name.startswith("labelserve-"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _tensor(rows: Any) -> dict:
    tensor = {"name": "input-0", "shape": list(rows.shape), "datatype": "FP64", "data": rows.ravel().tolist()}
    return {"inputs": [tensor]}


def test_the_fast_path_answers_resolved_predictions_and_its_switch_turns_it_off(settings, served_models, monkeypatch):
    X = served_models["X"]
    bodies = [{"model": "clf", "instances": X[i : i + 2].tolist()} for i in range(4)]
    tensors = [_tensor(X[i : i + 2]) for i in range(4)]
    routed: list[str] = []  # the requests the routes answered
    predict, infer = predict_route._predict, v2_routes._infer

    def routed_predict(*args: Any) -> Any:
        routed.append("/predict")
        return predict(*args)

    async def routed_infer(*args: Any) -> Any:
        routed.append("infer")
        return await infer(*args)

    monkeypatch.setattr(predict_route, "_predict", routed_predict)
    monkeypatch.setattr(v2_routes, "_infer", routed_infer)
    answers, by_route = {}, {}
    for on in (True, False):
        routed.clear()
        with _app(settings, fast_path=on) as client:
            answers[on] = [client.post("/predict", json=body).json() for body in bodies]
            answers[on] += [client.post("/v2/models/clf/infer", json=body).json() for body in tensors]
        by_route[on] = routed[:]
    assert answers[True] == answers[False]
    assert by_route[True] == ["/predict"]  # the first resolved the reference; the fast path answered the rest
    assert by_route[False] == ["/predict"] * 4 + ["infer"] * 4


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "routes"])
def test_resolved_references_spare_the_database_and_their_switch_turns_them_off(settings, served_models, fast_path):
    bodies = [
        {"model": "clf", "instances": served_models["X"][:2].tolist()},
        {"model": "nope", "instances": served_models["X"][:2].tolist()},  # a refusal is kept too
    ]
    answers = {}
    for on in (True, False):
        with _app(settings, fast_path=fast_path, resolved_refs=on) as client:
            first = [(r.status_code, r.json()) for r in (client.post("/predict", json=body) for body in bodies)]
            for body in bodies:
                with _queries(client) as seen:
                    again = client.post("/predict", json=body)
                assert bool(seen) is not on, (body, seen)
            assert (again.status_code, again.json()) == first[-1]
            answers[on] = first
    assert answers[True] == answers[False]
    assert [status for status, _ in answers[True]] == [200, 404]


def test_kept_model_pages_spare_the_database_and_their_switch_turns_them_off(settings, served_models):
    pages = {}
    for on in (True, False):
        with _app(settings, kept_model_pages=on) as client:
            first = client.get("/models/clf")
            assert first.status_code == 200, first.text
            with _queries(client) as seen:
                again = client.get("/models/clf")
            assert bool(seen) is not on, seen
            assert again.json() == first.json()
            pages[on] = first.json()
    assert pages[True] == pages[False]


def _bare(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's")
def test_the_allocator_settings_are_applied_at_start_up_unless_switched_off(tmp_path, monkeypatch):
    """In the API process and in its job pool's processes."""
    for on in (False, True):
        monkeypatch.setattr(allocator, "_applied", {})  # as in a fresh process
        with _app(_bare(tmp_path), tune_allocator=on) as client:
            assert bool(allocator.applied()) is on
            pool = client.app.state.core.runner._slots[0]  # type: ignore[attr-defined]
            assert bool(pool.submit(allocator.applied).result(timeout=60)) is on


def test_start_up_objects_are_frozen_unless_switched_off(tmp_path):
    for on in (False, True):
        gc.unfreeze()  # as in a fresh process
        with _app(_bare(tmp_path), gc_freeze=on):
            assert (gc.get_freeze_count() > 0) is on


def test_the_request_log_is_batched_unless_switched_off(tmp_path, monkeypatch):
    monkeypatch.setattr(main, "configure_logging", configure_logging)  # the real one, not conftest's
    for logger in (logging.getLogger("labelserve"), access_log):  # restored afterwards
        monkeypatch.setattr(logger, "handlers", logger.handlers[:])
        monkeypatch.setattr(logger, "propagate", logger.propagate)
    for on in (False, True):
        with _app(_bare(tmp_path), batched_logs=on):
            assert [type(handler) for handler in access_log.handlers] == ([BatchedLines] if on else [])
