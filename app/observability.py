"""Prometheus metrics (per app instance) and JSON structured logs."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db import session_scope
from app.jobs.base import JobStatus
from app.orm import Job


class JobCounts(Collector):
    """Job counts by status, read from the database at scrape time (it is the source of truth)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("labelserve_jobs", "Jobs by status", labels=["status"])
        with session_scope(self.database_url) as session:
            counts = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
        for status in JobStatus:
            family.add_metric([status.value], counts.get(status.value, 0))
        yield family


class Metrics:
    def __init__(self, database_url: str) -> None:
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
        self.registry.register(JobCounts(database_url))

    def cache_lookup(self, hit: bool) -> None:
        self.cache.labels(result="hit" if hit else "miss").inc()


# one INFO line per HTTP request (route template, method, status, duration_ms)
access_log = logging.getLogger("labelserve.http")


class RequestMetrics:
    """ASGI middleware: count and time requests by route template (not raw path), and log each
    one as a JSON line at INFO.

    The log costs one ``isEnabledFor`` check when INFO is off, and one record otherwise: the
    fields are values the metrics need anyway. The route template, not the raw path, keeps ids and
    query strings (possibly sensitive, unbounded) out of the log as out of the metric labels.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        logging_on = access_log.isEnabledFor(logging.INFO)
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope["method"]
            metrics: Metrics = scope["app"].state.metrics
            metrics.requests.labels(method, template, str(status)).inc()
            metrics.latency.labels(method, template).observe(elapsed)
            if logging_on:
                access_log.info(
                    "request",
                    extra={
                        "method": method,
                        "route": template,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                    },
                )


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with any ``extra=`` fields (such as ``job_id``) included."""

    _standard = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
    # one encoder for every line: json.dumps(..., default=str) builds a new one per call, which
    # is a good part of the cost of the per-request line
    _encoder = json.JSONEncoder(default=str)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._standard})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self._encoder.encode(entry)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("labelserve")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
