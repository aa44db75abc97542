"""A Python client for the labelserve HTTP API; the ``labelserve`` command line is built on it.

    from app.client import Client

    with Client("http://127.0.0.1:8000") as client:
        dataset = client.upload_dataset("samples/toy.csv", label_count=2)
        job = client.train("mlknn", dataset["id"], "toy-mlknn", params={"k": 3})
        job = client.wait(job["job_id"])
        client.predict("toy-mlknn", instances=[[0.85, 0.15, 0.2]])

Every method returns the server's JSON as plain dicts and lists (the shapes the HTTP API
documents), so nothing here has to change when the server adds a field. A 4xx or 5xx answer
raises :class:`ApiError` with the status and the server's ``detail``; an unreachable server
raises ``httpx.TransportError``. The server is ``url``, else ``LABELSERVE_URL``, else
``http://127.0.0.1:8000``; the key is ``api_key``, else ``LABELSERVE_API_KEY``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

import app as package

DEFAULT_URL = "http://127.0.0.1:8000"
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})

Json = Any


class ApiError(Exception):
    """The server answered with an error status; ``detail`` is its ``{"detail": ...}`` payload."""

    def __init__(self, status_code: int, detail: Json, method: str, url: str) -> None:
        self.status_code = status_code
        self.detail = detail
        self.method = method
        self.url = url
        super().__init__(f"{method} {url}: {status_code} {describe_detail(detail)}")


def describe_detail(detail: Json) -> str:
    """A FastAPI error detail as one readable line (validation lists become ``loc: msg; ...``)."""
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                loc = ".".join(str(part) for part in item.get("loc", ()) if part not in ("body", "query", "path"))
                parts.append(f"{loc}: {item['msg']}" if loc else str(item["msg"]))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)


class Client:
    """One connection pool to one labelserve server; use it as a context manager or call ``close``.

    ``http`` replaces the underlying ``httpx.Client`` (for instance FastAPI's ``TestClient``, to
    drive an app in-process); ``url`` and ``api_key`` are then ignored.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = (url or os.environ.get("LABELSERVE_URL") or DEFAULT_URL).rstrip("/")
        if http is None:
            key = api_key if api_key is not None else os.environ.get("LABELSERVE_API_KEY")
            headers = {"User-Agent": f"labelserve-client/{package.__version__}"}
            if key:
                headers["X-API-Key"] = key
            http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self.http = http

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # plumbing -------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send one request; raise :class:`ApiError` unless the status is 2xx."""
        response = self.http.request(method, path, **kwargs)
        if response.is_success:
            return response
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text or response.reason_phrase
        raise ApiError(response.status_code, detail, method, path)

    def _json(self, method: str, path: str, **kwargs: Any) -> Json:
        return self.request(method, path, **kwargs).json()

    @staticmethod
    def _page(limit: int, offset: int, **filters: Any) -> dict[str, Any]:
        return {"limit": limit, "offset": offset} | {k: v for k, v in filters.items() if v is not None}

    # operations and methods -----------------------------------------------------------------
    def health(self) -> Json:
        return self._json("GET", "/health")

    def ready(self) -> Json:
        return self._json("GET", "/ready")

    def methods(self, limit: int = 100, offset: int = 0) -> Json:
        return self._json("GET", "/methods", params=self._page(limit, offset))

    def method(self, method_id: str) -> Json:
        return self._json("GET", f"/methods/{method_id}")

    # datasets -------------------------------------------------------------------------------
    def upload_dataset(
        self,
        file: str | Path,
        *,
        labels_file: str | Path | None = None,
        name: str | None = None,
        format: str | None = None,
        label_count: int | None = None,
        label_location: str | None = None,
        label_columns: Sequence[str] | str | None = None,
        n_features: int | None = None,
        part: str | None = None,
    ) -> Json:
        """Upload a dataset file (and a Mulan XML label file); returns the dataset record.

        Options left at ``None`` are not sent, so the server's defaults apply.
        """
        if label_columns is not None and not isinstance(label_columns, str):
            label_columns = ",".join(label_columns)
        fields = {
            "name": name,
            "format": format,
            "label_count": label_count,
            "label_location": label_location,
            "label_columns": label_columns,
            "n_features": n_features,
            "part": part,
        }
        data = {key: str(value) for key, value in fields.items() if value is not None}
        paths = {"file": Path(file)} | ({"labels_file": Path(labels_file)} if labels_file is not None else {})
        handles = {key: path.open("rb") for key, path in paths.items()}
        try:
            files = {key: (paths[key].name, handle) for key, handle in handles.items()}
            return self._json("POST", "/datasets", data=data, files=files)
        finally:
            for handle in handles.values():
                handle.close()

    def datasets(self, limit: int = 100, offset: int = 0) -> Json:
        return self._json("GET", "/datasets", params=self._page(limit, offset))

    def dataset(self, dataset_id: str) -> Json:
        return self._json("GET", f"/datasets/{dataset_id}")

    def delete_dataset(self, dataset_id: str, *, force: bool = False) -> None:
        """Delete a dataset; ``force`` also when registered model versions were trained on it."""
        self.request("DELETE", f"/datasets/{dataset_id}", params={"force": "true"} if force else None)

    # training and jobs ----------------------------------------------------------------------
    def train(
        self,
        method: str,
        dataset_id: str,
        model_name: str,
        *,
        params: dict[str, Any] | None = None,
        random_state: int | None = None,
        feature_selector: dict[str, Any] | None = None,
    ) -> Json:
        """Queue a training; returns ``{"job_id", "status", "status_url"}`` (see :meth:`wait`)."""
        body: dict[str, Any] = {"method": method, "dataset_id": dataset_id, "model_name": model_name}
        body["params"] = params or {}
        if random_state is not None:
            body["random_state"] = random_state
        if feature_selector is not None:
            body["feature_selector"] = feature_selector
        return self._json("POST", "/train", json=body)

    def job(self, job_id: str) -> Json:
        return self._json("GET", f"/jobs/{job_id}")

    def jobs(self, status: str | None = None, limit: int = 100, offset: int = 0) -> Json:
        return self._json("GET", "/jobs", params=self._page(limit, offset, status=status))

    def cancel_job(self, job_id: str) -> Json:
        return self._json("DELETE", f"/jobs/{job_id}")

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        poll: float = 1.0,
        on_update: Callable[[Json], None] | None = None,
    ) -> Json:
        """Wait until the job ends and return its record, whatever the outcome.

        Each request is a long poll (``GET /jobs/{id}?wait=poll``): the server answers as soon as
        the job ends, else after ``poll`` seconds with its progress, which ``on_update`` sees (a
        progress display hangs off it). Raises ``TimeoutError`` when ``timeout`` seconds pass
        first; the job keeps running.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            hold = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            asked = time.monotonic()
            job = self._json("GET", f"/jobs/{job_id}", params={"wait": hold}, timeout=self._read_timeout(hold))
            if on_update is not None:
                on_update(job)
            if job["status"] in TERMINAL_STATUSES:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout} s")
            early = hold - (time.monotonic() - asked)
            if early > 0:  # a server that does not hold answers: do not spin
                time.sleep(early)

    def _read_timeout(self, hold: float) -> httpx.Timeout:
        """The client's timeouts, with the read one stretched by the time the server holds the answer."""
        base = self.http.timeout
        read = None if base.read is None else base.read + hold
        return httpx.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)

    def job_result(self, job_id: str) -> bytes:
        """The result file of a batch prediction or comparison job, as the server sends it."""
        return self.request("GET", f"/jobs/{job_id}/result").content

    # registry -------------------------------------------------------------------------------
    def models(self, limit: int = 100, offset: int = 0) -> Json:
        return self._json("GET", "/models", params=self._page(limit, offset))

    def model(self, name: str) -> Json:
        return self._json("GET", f"/models/{name}")

    def version(self, name: str, version: int) -> Json:
        return self._json("GET", f"/models/{name}/versions/{version}")

    def set_alias(self, name: str, alias: str, version: int) -> Json:
        return self._json("PUT", f"/models/{name}/aliases/{alias}", json={"version": version})

    def delete_alias(self, name: str, alias: str) -> None:
        self.request("DELETE", f"/models/{name}/aliases/{alias}")

    def delete_model(self, name: str, version: int | None = None) -> None:
        path = f"/models/{name}" if version is None else f"/models/{name}/versions/{version}"
        self.request("DELETE", path)

    # prediction and evaluation --------------------------------------------------------------
    def predict(
        self,
        model: str,
        instances: Sequence[Sequence[float]] | Sequence[dict[str, float]] | None = None,
        *,
        dataset_id: str | None = None,
        output: str | None = None,
        threshold: float | None = None,
        top_k: int | None = None,
        include_scores: bool = False,
    ) -> Json:
        """Predict feature vectors (or a stored dataset); a selector needs neither."""
        body: dict[str, Any] = {"model": model}
        options = {
            "instances": None if instances is None else list(instances),
            "dataset_id": dataset_id,
            "output": output,
            "threshold": threshold,
            "top_k": top_k,
        }
        body |= {key: value for key, value in options.items() if value is not None}
        if include_scores:
            body["include_scores"] = True
        return self._json("POST", "/predict", json=body)

    def evaluate(self, model: str, dataset_id: str, **options: Any) -> Json:
        """The task's standard metrics on a stored dataset (options: ``threshold``, ``top_k``...)."""
        body = {"model": model, "dataset_id": dataset_id} | {k: v for k, v in options.items() if v is not None}
        return self._json("POST", "/evaluate", json=body)

    # comparison -----------------------------------------------------------------------------
    def compare(
        self,
        dataset_id: str,
        *,
        methods: Sequence[str] | None = None,
        metric: str | None = None,
        cv: int | None = None,
        random_state: int | None = None,
    ) -> Json:
        """Queue a cross-validated comparison of methods on a dataset; returns the queued job."""
        body: dict[str, Any] = {"dataset_id": dataset_id, "methods": None if methods is None else list(methods)}
        options = {"metric": metric, "cv": cv, "random_state": random_state}
        body |= {key: value for key, value in options.items() if value is not None}
        return self._json("POST", "/compare", json=body)

    def compare_report(self, job_id: str) -> str:
        """The HTML report of a finished comparison."""
        return self.request("GET", f"/jobs/{job_id}/report").text
