"""Prometheus metrics (per app instance) and JSON structured logs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from select import PIPE_BUF
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class Metrics:
    """The process's Prometheus series. Collectors reading other sources (the job counts, from
    the database) are registered on ``registry`` by whoever owns those sources (``app.main``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "labelserve_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "labelserve_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.cache = Counter(
            "labelserve_model_cache_lookups", "Model cache lookups", ["result"], registry=self.registry
        )
        self.store_free_bytes = Gauge(
            "labelserve_store_free_bytes", "Free space on the model store's file system", registry=self.registry
        )
        self.fast_path_fallbacks = Counter(
            "labelserve_fast_path_fallbacks",
            "Requests the prediction fast path handed to the route because answering raised",
            ["route", "exception"],
            registry=self.registry,
        )
        # Label children resolved once: ``labels()`` costs a lock and a tuple key per call, a
        # noticeable part of a one-row prediction when it runs three times per request.
        self._cache_result = {True: self.cache.labels(result="hit"), False: self.cache.labels(result="miss")}
        self._request_series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def cache_lookup(self, hit: bool) -> None:
        self._cache_result[hit].inc()

    def fast_path_fallback(self, route: str, exc: BaseException) -> None:
        """Count one request the fast path gave up on because of ``exc`` (by route template and
        exception class: both bounded by the code, never by the request)."""
        self.fast_path_fallbacks.labels(route, type(exc).__name__).inc()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request and record its latency (series by method, route template, status)."""
        key = (method, route, status)
        series = self._request_series.get(key)
        if series is None:  # bounded: route templates x methods x statuses the app can answer
            series = (self.requests.labels(method, route, str(status)), self.latency.labels(method, route))
            self._request_series[key] = series
        series[0].inc()
        series[1].observe(seconds)


# one INFO line per HTTP request (route template, method, status, duration_ms)
access_log = logging.getLogger("labelserve.http")


def record_request(metrics: Metrics, method: str, route: str, status: int, seconds: float) -> None:
    """Count and time one answered request, and write its request log line (INFO).

    The one place both ``RequestMetrics`` and the prediction hot path (which answers in front of
    it) record a request, so the two cannot drift. The log costs one ``isEnabledFor`` check
    when INFO is off, and one line otherwise: its fields are values the metrics need anyway.
    """
    metrics.observe_request(method, route, status, seconds)
    if not access_log.isEnabledFor(logging.INFO):
        return
    fields = {"method": method, "route": route, "status": status, "duration_ms": round(seconds * 1000, 3)}
    batch = _own_batch()
    if batch is None:  # configured otherwise (other handlers, filters): the logging module decides
        access_log.info("request", extra=fields)
        return
    formatter: JsonFormatter = batch.formatter  # type: ignore[assignment]  # checked by _own_batch
    entry = formatter.entry(time.time(), "INFO", access_log.name, "request")
    entry.update(fields)
    batch.add(orjson.dumps(entry) + b"\n")


def _own_batch() -> BatchedLines | None:
    """The request log's handler when it is the one ``configure_logging`` installs, else None.

    Then a line can go straight to the batch: the same bytes the logging module would produce,
    without the ``LogRecord``, its dictionary walk and the logging module's dispatch (together
    two thirds of a request line's cost, which is paid on every prediction).
    """
    handlers = access_log.handlers
    if len(handlers) != 1 or access_log.filters or access_log.propagate:
        return None
    handler = handlers[0]
    if type(handler) is not BatchedLines or handler.filters or handler.level > logging.INFO:
        return None
    return handler if type(handler.formatter) is JsonFormatter else None


class RequestMetrics:
    """ASGI middleware: count and time requests by route template (not raw path), and log each
    one as a JSON line at INFO (``record_request``).

    The route template, not the raw path, keeps ids and query strings (possibly sensitive,
    unbounded) out of the log as out of the metric labels.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            record_request(scope["app"].state.metrics, scope["method"], template, status, time.perf_counter() - start)


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with any ``extra=`` fields (such as ``job_id``) included.

    Encoded by orjson, with the time stamp's text kept for the current second: the per-request
    line is written on every prediction, where ``json`` and ``strftime`` were a measurable part
    of a one-row request's CPU time. A value orjson cannot encode (an integer beyond 64 bits, a
    non-string key) falls back to the standard encoder; anything else unknown is ``str()``.
    """

    _standard = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
    _fallback = json.JSONEncoder(default=str)

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def _time(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # a benign race between threads: both compute the same text
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", self.converter(second))
            self._second = second
        return self._stamp

    def entry(self, created: float, level: str, logger: str, message: str) -> dict[str, Any]:
        """A line's standard fields, in order; the record's own fields follow them."""
        return {"time": self._time(created), "level": level, "logger": logger, "message": message}

    def format(self, record: logging.LogRecord) -> str:
        entry = self.entry(record.created, record.levelname, record.name, record.getMessage())
        standard = self._standard
        for key, value in vars(record).items():
            if key not in standard:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(entry, default=str).decode()
        except TypeError:
            return self._fallback.encode(entry)


class BatchedLines(logging.Handler):
    """The request log's handler: lines written in batches, as nginx's buffered access log.

    One write system call per request line was the largest single cost of logging a one-row
    prediction. On an event loop, a line is kept and a write of everything kept is scheduled
    ``delay`` seconds after the first kept line (so no line waits longer than that); anywhere
    else, and at shutdown (``flush``), lines are written at once. Each write holds whole lines
    and at most ``PIPE_BUF`` bytes when it can, so lines from several processes sharing
    one pipe or file never interleave mid-line. A hard kill loses at most ``delay`` of lines.
    """

    def __init__(self, fd: int = 2, delay: float = 0.05) -> None:
        super().__init__()
        self.fd, self.delay = fd, delay
        self._lines: list[bytes] = []
        self._scheduled = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode()
        except Exception:
            self.handleError(record)
            return
        self.add(line)

    def add(self, line: bytes) -> None:
        """Keep one encoded line (ending in a newline) for the next write."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self._lines.append(line)
            schedule = loop is not None and not self._scheduled
            self._scheduled = self._scheduled or schedule
        if loop is None:
            self.flush()
        elif schedule:
            loop.call_later(self.delay, self.flush)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            lines, self._lines, self._scheduled = self._lines, [], False
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            if chunk and size + len(line) > PIPE_BUF:
                self._write(b"".join(chunk))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        if chunk:
            self._write(b"".join(chunk))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:  # a closed or full stream must not fail the request being logged
            pass


def configure_logging(level: str, *, batched: bool = True) -> None:
    """JSON lines on stderr for the ``labelserve`` loggers; the request log's in batches
    (``BatchedLines``) when ``batched``, else through the same stream handler as every other line.

    Also switches off what every log record would otherwise collect and no line of ours shows
    (the caller's file and line, thread, process names): the standard library's documented
    switches for logging in a hot path ("Optimization" in the logging HOWTO).
    """
    logging._srcfile = None  # no sys._getframe walk per record
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("labelserve")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    if not batched:  # one write per line, by the root's handler (``record_request`` sees no batch)
        access_log.handlers[:] = []
        access_log.propagate = True
        return
    batch = BatchedLines()
    batch.setFormatter(JsonFormatter())
    access_log.handlers[:] = [batch]
    access_log.propagate = False  # its lines go through the batch, not the root's stream
