"""A Python client for the labelserve HTTP API; the ``labelserve`` command line is built on it.

    from app.client import Client

    with Client("http://127.0.0.1:8000") as client:
        dataset = client.upload_dataset("samples/toy.csv", label_count=2)
        job = client.train("mlknn", dataset["id"], "toy-mlknn", params={"k": 3})
        job = client.wait(job["job_id"])
        client.predict("toy-mlknn", instances=[[0.85, 0.15, 0.2]])

Matrices (NumPy, SciPy sparse, pandas, by ``app.client.arrays``) go in as they are: to
``upload_arrays``, ``train(..., data=(X, Y))`` and ``predict``; ``predict_array`` answers with a
NumPy array. Every method returns the server's JSON as plain dicts and lists, so nothing here
changes when the server adds a field; a 4xx or 5xx answer raises :class:`ApiError`. The server is
``url``, else ``LABELSERVE_URL``, else ``http://127.0.0.1:8000``; the key is ``api_key``, else
``LABELSERVE_API_KEY``.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import app as package
from app.client import DEFAULT_URL, arrays
from app.upload_options import UPLOAD_OPTIONS, form_values

# httpx (and NumPy, in client_arrays) are imported when first needed: the command line imports
# this module, and a ``labelserve --help`` should not pay for them
if TYPE_CHECKING:
    import ssl

    import httpx
    import numpy as np

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


def _tls(url: str) -> ssl.SSLContext | bool:
    """The TLS verification of a client of ``url``: httpx's default (the CA bundle) for https.

    For a plain-http server the context is never used (the client follows no redirects), and
    loading the CA bundle is a fifth of a CLI call's start-up: a context that verifies against no
    CA at all (so it would fail, never trust, were it ever used) costs nothing.
    """
    if url.startswith("http://"):
        import ssl

        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


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
            import httpx

            key = api_key if api_key is not None else os.environ.get("LABELSERVE_API_KEY")
            headers = {"User-Agent": f"labelserve-client/{package.__version__}"}
            if key:
                headers["X-API-Key"] = key
            http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=_tls(self.url))
        self.http = http

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool (``with Client() as client:`` does it on leaving)."""
        self.http.close()

    # plumbing -------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send one request; raise :class:`ApiError` unless the status is 2xx."""
        return self._checked(method, path, self.http.request(method, path, **kwargs))

    @staticmethod
    def _checked(method: str, path: str, response: httpx.Response) -> httpx.Response:
        """``response`` if its status is 2xx, else :class:`ApiError`."""
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
        """``GET /health``: whether the server process answers."""
        return self._json("GET", "/health")

    def ready(self) -> Json:
        """``GET /ready``: whether the database and the model store are reachable."""
        return self._json("GET", "/ready")

    def methods(self, limit: int = 100, offset: int = 0) -> Json:
        """A page of the methods (``{"items", "next_offset"}``): hyperparameters as JSON schemas, outputs."""
        return self._json("GET", "/methods", params=self._page(limit, offset))

    def method(self, method_id: str) -> Json:
        """One method: its task, outputs and hyperparameters."""
        return self._json("GET", f"/methods/{method_id}")

    # datasets -------------------------------------------------------------------------------
    def upload_dataset(self, file: str | Path, *, labels_file: str | Path | None = None, **options: Any) -> Json:
        """Upload a dataset file (and a Mulan XML label file); returns the dataset record.

        ``options`` are the upload options of ``POST /datasets`` (the signature lists them; a list
        of ``label_columns`` is sent comma-separated). Options left at ``None`` are not sent, so the
        server's defaults apply.
        """
        return self.store_dataset(file, labels_file=labels_file, **options)[0]

    def store_dataset(
        self, file: str | Path, *, labels_file: str | Path | None = None, **options: Any
    ) -> tuple[Json, bool]:
        """``upload_dataset``, and whether this upload stored the dataset: ``False`` when the same
        upload was stored before (the server answers 200 instead of 201)."""
        data = form_values(options)
        paths = {"file": Path(file)} | ({"labels_file": Path(labels_file)} if labels_file is not None else {})
        handles = {key: path.open("rb") for key, path in paths.items()}
        try:
            files = {key: (paths[key].name, handle) for key, handle in handles.items()}
            response = self.request("POST", "/datasets", data=data, files=files)
        finally:
            for handle in handles.values():
                handle.close()
        return response.json(), response.status_code == 201

    def upload_arrays(
        self,
        X: Any,
        Y: Any,
        *,
        name: str | None = None,
        feature_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> Json:
        """Upload features ``X`` (n x d) and labels ``Y`` (n x q: 0/1, or distributions) as a dataset.

        Each may be a NumPy array, a SciPy sparse matrix, a pandas DataFrame (its column names are
        the names, unless given) or a list of rows. They travel as one CSV file (``name``.csv, or
        arrays.csv), so the dataset is stored and deduplicated like any upload.
        """
        content, fields = arrays.csv_upload(X, Y, feature_names, label_names)
        data = form_values({"name": name, **fields})
        files = {"file": (f"{name or 'arrays'}.csv", content)}
        return self._json("POST", "/datasets", data=data, files=files)

    def datasets(self, limit: int = 100, offset: int = 0) -> Json:
        """A page of the stored datasets (``{"items", "next_offset"}``)."""
        return self._json("GET", "/datasets", params=self._page(limit, offset))

    def dataset(self, dataset_id: str) -> Json:
        """One dataset record, by id or unique name."""
        return self._json("GET", f"/datasets/{dataset_id}")

    def delete_dataset(self, dataset_id: str, *, force: bool = False) -> None:
        """Delete a dataset; ``force`` also when registered model versions were trained on it."""
        self.request("DELETE", f"/datasets/{dataset_id}", params={"force": "true"} if force else None)

    def split_dataset(
        self,
        dataset: str,
        *,
        test_fraction: float = 0.2,
        random_state: int = 0,
        train_name: str | None = None,
        test_name: str | None = None,
    ) -> Json:
        """Split a stored dataset (id or unique name) into ``{"train": dataset, "test": dataset}``:
        stratified for multi-label, shuffled for distributions; the same arguments split the same way."""
        body: dict[str, Any] = {"test_fraction": test_fraction, "random_state": random_state}
        body |= {k: v for k, v in (("train_name", train_name), ("test_name", test_name)) if v is not None}
        return self._json("POST", f"/datasets/{dataset}/split", json=body)

    # training and jobs ----------------------------------------------------------------------
    def train(
        self,
        method: str,
        dataset_id: str | None,
        model_name: str,
        *,
        data: tuple[Any, Any] | None = None,
        params: dict[str, Any] | None = None,
        random_state: int | None = None,
        feature_selector: dict[str, Any] | None = None,
        max_seconds: float | None = None,
    ) -> Json:
        """Queue a training; returns the queued job: its record (as :meth:`job` shows it) with
        ``job_id`` and ``status_url``, the answer of every route that queues a job (see :meth:`wait`).

        Instead of a stored ``dataset_id`` (pass ``None``), ``data=(X, Y)`` sends a small dataset
        inline: arrays, sparse matrices or DataFrames (whose column names become the names).
        ``max_seconds``: the job is failed if it runs longer (at most the server's limit).
        """
        body: dict[str, Any] = {"method": method, "model_name": model_name}
        if dataset_id is not None:
            body["dataset_id"] = dataset_id
        if data is not None:
            body["data"] = arrays.inline_data(*data)
        body["params"] = params or {}
        if random_state is not None:
            body["random_state"] = random_state
        if feature_selector is not None:
            body["feature_selector"] = feature_selector
        if max_seconds is not None:
            body["max_seconds"] = max_seconds
        return self._json("POST", "/train", json=body)

    def job(self, job_id: str) -> Json:
        """One job record: status, progress, stage, the model it registered, its error."""
        return self._json("GET", f"/jobs/{job_id}")

    def jobs(self, status: str | None = None, limit: int = 100, offset: int = 0) -> Json:
        """A page of jobs, newest first; ``status`` keeps those in that status."""
        return self._json("GET", "/jobs", params=self._page(limit, offset, status=status))

    def cancel_job(self, job_id: str) -> Json:
        """Cancel a queued or running job; returns its record."""
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
        first; the job keeps running. A server holding its most waiting requests answers 429
        (``LABELSERVE_MAX_WAITERS``): the next request goes after its ``Retry-After``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            hold = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            asked = time.monotonic()
            response = self.http.get(f"/jobs/{job_id}", params={"wait": hold}, timeout=self._read_timeout(hold))
            if response.status_code == 429 and (deadline is None or time.monotonic() < deadline):
                time.sleep(float(response.headers.get("Retry-After", poll)))
                continue
            job = self._checked("GET", f"/jobs/{job_id}", response).json()
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
        import httpx

        base = self.http.timeout
        read = None if base.read is None else base.read + hold
        return httpx.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)

    def job_result(self, job_id: str) -> bytes:
        """The result file of a batch prediction or comparison job, as the server sends it."""
        return self.request("GET", f"/jobs/{job_id}/result").content

    # registry -------------------------------------------------------------------------------
    def models(self, limit: int = 100, offset: int = 0) -> Json:
        """A page of the registered models, each with its versions and aliases."""
        return self._json("GET", "/models", params=self._page(limit, offset))

    def model(self, name: str) -> Json:
        """A model's versions and aliases, by name (for one version: :meth:`model_version`)."""
        return self._json("GET", f"/models/{name}")

    def model_version(self, reference: str) -> Json:
        """The version record a reference names: ``name`` (the latest), ``name@3`` or ``name@alias``."""
        name, version = self.resolve(reference)
        return self.version(name, version)

    def resolve(self, reference: str) -> tuple[str, int]:
        """``(name, version)`` for a model reference; an unknown alias is an :class:`ApiError` 404
        naming the aliases the model has."""
        name, _, tail = reference.partition("@")
        if tail.isdigit():
            return name, int(tail)
        model = self.model(name)
        if not tail:
            return name, int(model["latest_version"])
        if tail not in model["aliases"]:
            known = ", ".join(sorted(model["aliases"])) or "none"
            raise ApiError(
                404, f"model: model '{name}' has no alias '{tail}' (its aliases: {known})", "GET", f"/models/{name}"
            )
        return name, int(model["aliases"][tail])

    def export_model(self, reference: str, path: str | Path | None = None) -> Path:
        """Download a version (``name``, ``name@3`` or ``name@alias``) as its zip: the artifact
        (``model.pkl``) and ``manifest.json`` (library versions, sha256, how to load it).

        ``path``: the file to write (default ``<name>-<version>.zip`` in the current directory);
        the zip is streamed to disk, so a large model is never held in memory. Returns the path.
        """
        name, version = self.resolve(reference)
        target = Path(path) if path is not None else Path(f"{name}-{version}.zip")
        route = f"/models/{name}/versions/{version}/artifact"
        with self.http.stream("GET", route) as response:
            if not response.is_success:
                response.read()
                try:
                    detail = response.json().get("detail", response.text)
                except ValueError:
                    detail = response.text or response.reason_phrase
                raise ApiError(response.status_code, detail, "GET", route)
            partial = target.with_name(f".{target.name}.part")
            with open(partial, "wb") as fh:
                for chunk in response.iter_bytes():
                    fh.write(chunk)
            partial.replace(target)
        return target

    def version(self, name: str, version: int) -> Json:
        """One version record by name and number (a reference string: :meth:`model_version`)."""
        return self._json("GET", f"/models/{name}/versions/{version}")

    def set_alias(self, name: str, alias: str, version: int) -> Json:
        """Point ``name@alias`` at a version; returns the model record."""
        return self._json("PUT", f"/models/{name}/aliases/{alias}", json={"version": version})

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove an alias (the version stays)."""
        self.request("DELETE", f"/models/{name}/aliases/{alias}")

    def audit(
        self,
        action: str | None = None,
        key_name: str | None = None,
        target: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Json:
        """A page of the audit (alias moves and deletes, who made them), newest first; an admin key's."""
        filters = {"action": action, "key_name": key_name, "target": target}
        return self._json("GET", "/audit", params=self._page(limit, offset, **filters))

    def delete_model(self, name: str, version: int | None = None) -> None:
        """Delete one version of a model, or the model with every version when ``version`` is None."""
        path = f"/models/{name}" if version is None else f"/models/{name}/versions/{version}"
        self.request("DELETE", path)

    # prediction and evaluation --------------------------------------------------------------
    def predict(
        self,
        model: str,
        instances: Any = None,
        *,
        dataset_id: str | None = None,
        output: str | None = None,
        threshold: float | None = None,
        top_k: int | None = None,
        include_scores: bool = False,
    ) -> Json:
        """Predict feature vectors (or a stored dataset); a selector needs neither.

        ``instances``: rows (lists, a NumPy array, a SciPy sparse matrix) in the training feature
        order, ``{feature: value}`` objects, or a pandas DataFrame whose column names are feature
        names (matched by name, in any order).
        """
        body: dict[str, Any] = {"model": model}
        options = {
            "instances": None if instances is None else arrays.instances_json(instances),
            "dataset_id": dataset_id,
            "output": output,
            "threshold": threshold,
            "top_k": top_k,
        }
        body |= {key: value for key, value in options.items() if value is not None}
        if include_scores:
            body["include_scores"] = True
        return self._json("POST", "/predict", json=body)

    def predict_array(
        self,
        model: str,
        instances: Any = None,
        *,
        output: str | None = None,
        threshold: float | None = None,
        top_k: int | None = None,
    ) -> np.ndarray:
        """:meth:`predict`, answered as a NumPy array with one column per label in the model's
        order (its version record's ``label_names``): ``labels`` 0/1 (int8), ``ranking`` the scores
        (NaN where ``top_k`` left a label out), ``distribution`` the probabilities; a selector's
        ``features`` are its feature indices, best first."""
        result = self.predict(model, instances, output=output, threshold=threshold, top_k=top_k)
        if "predictions" not in result and "features" not in result:
            raise ValueError(f"the server answered with job {result.get('id')} (a batch), not predictions")
        served = result["model"]
        label_names = self.version(served["name"], served["version"])["label_names"]
        return arrays.prediction_array(result, label_names)

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
        max_seconds: float | None = None,
    ) -> Json:
        """Queue a cross-validated comparison of methods on a dataset; returns the queued job (its
        record with ``job_id`` and ``status_url``, as :meth:`train` does)."""
        body: dict[str, Any] = {"dataset_id": dataset_id, "methods": None if methods is None else list(methods)}
        options = {"metric": metric, "cv": cv, "random_state": random_state, "max_seconds": max_seconds}
        body |= {key: value for key, value in options.items() if value is not None}
        return self._json("POST", "/compare", json=body)

    def compare_report(self, job_id: str) -> str:
        """The HTML report of a finished comparison."""
        return self.request("GET", f"/jobs/{job_id}/report").text


def _upload_signature(method: Callable[..., Any]) -> inspect.Signature:
    """An upload method's signature with one keyword per declared upload option (for ``help()``
    and editors; the method itself takes them as ``**options``)."""
    signature = inspect.signature(method)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    declared = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation="Sequence[str] | str | None" if option.listed else f"{option.kind.__name__} | None",
        )
        for option in UPLOAD_OPTIONS
    ]
    return signature.replace(parameters=[*fixed, *declared])


Client.upload_dataset.__signature__ = _upload_signature(Client.upload_dataset)  # type: ignore[attr-defined]
Client.store_dataset.__signature__ = _upload_signature(Client.store_dataset)  # type: ignore[attr-defined]
