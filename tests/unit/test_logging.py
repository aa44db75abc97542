"""The JSON log lines and the request log's batched handler."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from select import PIPE_BUF

import pytest

from app.runtime.observability import (
    BatchedLines,
    JsonFormatter,
    Metrics,
    access_log,
    configure_logging,
    record_request,
)

ROOT = Path(__file__).resolve().parents[2]


def _record(**extra: object) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "labelserve.test", "levelname": "INFO", "msg": "hello", **extra})


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def _handler(fd: int, delay: float = 0.05) -> BatchedLines:
    handler = BatchedLines(fd=fd, delay=delay)
    handler.setFormatter(JsonFormatter())
    return handler


def test_formatter_fields_and_values_orjson_cannot_encode():
    line = json.loads(JsonFormatter().format(_record(job_id="j1", big=2**70, thing=Path("/x"))))
    assert line["message"] == "hello" and line["logger"] == "labelserve.test" and line["level"] == "INFO"
    assert line["job_id"] == "j1" and line["big"] == 2**70 and line["thing"] == "/x"
    assert line["time"].endswith("+0000") or line["time"][-5] in "+-"


def test_outside_an_event_loop_each_line_is_written_at_once(pipe):
    r, w = pipe
    handler = _handler(w)
    handler.handle(_record(n=1))
    assert [json.loads(x)["n"] for x in _read_all(r).splitlines()] == [1]


def test_on_an_event_loop_lines_are_written_together_after_the_delay(pipe):
    r, w = pipe
    handler = _handler(w, delay=0.05)

    async def run() -> tuple[bytes, bytes]:
        for n in range(3):
            handler.handle(_record(n=n))
        before = _read_all(r)
        await asyncio.sleep(0.2)
        return before, _read_all(r)

    before, after = asyncio.run(run())
    assert before == b""  # kept, not written per line
    assert [json.loads(x)["n"] for x in after.splitlines()] == [0, 1, 2]


def test_flush_writes_what_is_kept_and_writes_hold_whole_lines(pipe, monkeypatch):
    r, w = pipe
    handler = _handler(w, delay=60.0)  # never due during the test: only flush writes
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    async def run() -> None:
        for n in range(40):
            handler.handle(_record(n=n, pad="x" * 500))
        assert writes == []
        monkeypatch.setattr(os, "write", spy)
        handler.flush()  # what logging.shutdown does at exit

    asyncio.run(run())
    assert len(writes) > 1 and all(len(chunk) <= PIPE_BUF and chunk.endswith(b"\n") for chunk in writes)
    assert [json.loads(x)["n"] for x in b"".join(writes).splitlines()] == list(range(40))
    assert len(_read_all(r).splitlines()) == 40


@pytest.fixture
def request_log(pipe):
    """The request log as ``configure_logging`` leaves it, writing to a pipe; restored afterwards."""
    r, w = pipe
    saved = access_log.handlers[:], access_log.propagate, access_log.level, logging.getLogger("labelserve").handlers[:]
    configure_logging("INFO")
    access_log.handlers[0].fd = w  # type: ignore[attr-defined]
    yield r
    access_log.handlers[:], access_log.propagate, access_log.level = saved[0], saved[1], saved[2]
    logging.getLogger("labelserve").handlers[:] = saved[3]


def test_a_request_line_written_directly_is_the_one_logging_writes(request_log, monkeypatch):
    """``record_request`` skips the logging module when the handler is the default one; the
    line must be the same, field for field and in order, as the one logging would write."""
    metrics = Metrics()
    record_request(metrics, "POST", "/predict", 200, 0.0012345)
    direct = _read_all(request_log)
    seen: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    access_log.addFilter(keep)  # a filter: now the logging module writes the line
    try:
        record_request(metrics, "POST", "/predict", 200, 0.0012345)
    finally:
        access_log.removeFilter(keep)
    via_logging = _read_all(request_log)
    assert len(seen) == 1 and direct.count(b"\n") == 1 and via_logging.count(b"\n") == 1
    a, b = json.loads(direct), json.loads(via_logging)
    assert list(a) == list(b) == ["time", "level", "logger", "message", "method", "route", "status", "duration_ms"]
    assert {**a, "time": None} == {**b, "time": None}
    assert a["duration_ms"] == 1.234 and a["logger"] == "labelserve.http" and a["level"] == "INFO"


def test_a_quiet_request_log_writes_nothing(request_log):
    access_log.setLevel(logging.WARNING)
    record_request(Metrics(), "POST", "/predict", 200, 0.001)
    assert _read_all(request_log) == b""


class _Stream:
    """A text stream writing to ``fd`` that records each write (the stream handler's target)."""

    def __init__(self, fd: int, writes: list[bytes]) -> None:
        self.fd, self.writes = fd, writes

    def write(self, text: str) -> int:
        self.writes.append(text.encode())
        return os.write(self.fd, self.writes[-1])

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_request_lines_are_written_in_batches_unless_switched_off(pipe, monkeypatch, batched):
    """The guard of ``LABELSERVE_BATCHED_LOGS``: five requests on an event loop cost one write in
    batches, one write each without; the lines are the same."""
    r, w = pipe
    root = logging.getLogger("labelserve")
    for logger in (root, access_log):  # restored afterwards
        monkeypatch.setattr(logger, "handlers", logger.handlers[:])
        monkeypatch.setattr(logger, "propagate", logger.propagate)
    configure_logging("INFO", batched=batched)
    writes: list[bytes] = []
    if batched:
        access_log.handlers[0].fd = w  # type: ignore[attr-defined]
        real_write = os.write

        def spy(fd: int, data: bytes) -> int:
            if fd == w:
                writes.append(bytes(data))
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", spy)
    else:
        assert access_log.handlers == [] and access_log.propagate
        root.handlers[0].setStream(_Stream(w, writes))  # type: ignore[attr-defined]
    metrics = Metrics()

    async def run() -> None:
        for _ in range(5):
            record_request(metrics, "POST", "/predict", 200, 0.001)
        await asyncio.sleep(0.2)

    asyncio.run(run())
    assert len(writes) == (1 if batched else 5)
    lines = [json.loads(line) for line in _read_all(r).splitlines()]
    assert [(e["logger"], e["route"], e["status"]) for e in lines] == [("labelserve.http", "/predict", 200)] * 5
