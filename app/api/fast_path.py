"""The prediction hot path: ``POST /predict`` and the V2 ``.../infer`` routes answered in front
of the app's own middlewares.

A one-row prediction's own work costs a fraction of FastAPI's request machinery (middlewares,
route matching, dependency solving, JSON decoding), so ``PredictFastPath``, the outermost of the
app's middlewares, answers what it can: a request the gate admits (``RequestGate.admits``: a
declared length within the upload limit, an allowed ``Host``, the right key or, without one, no
other site's page), decoded with orjson and validated as
the route does, whose reference this process has resolved (``prediction.predict_cached``) or has
seen refused since the registry last changed; a large body (in a thread of its own) has its
reference resolved here as the route would. The service's refusals of such a request are
answered here too, shaped by ``app.api.errors.domain_error_response`` as the route would, so a
flood of them never queues for the shared thread pool. Everything else, every other error
included, goes to the full stack with the body replayed, so the gate, the upload limit and the
route stay the one place that rejects requests and resolves references; both paths give the same
answers (``tests/api/test_fast_path.py``). It counts, times and logs what it answers as
``RequestMetrics`` does, with the constant ``X-Content-Type-Options: nosniff`` that
``app.api.headers.SecurityHeaders`` adds to the others. Measured in docs/benchmarks.md (serving) and docs/reliability.md.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.to_thread
import orjson
from fastapi.routing import APIRoute
from starlette.datastructures import State
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import domain_error_response
from app.api.gate import RequestGate
from app.api.headers import NOSNIFF
from app.api.offload import INLINE_BYTES, INLINE_CELLS, large_body_limiter
from app.api.v2 import binary, inference
from app.core import Core
from app.errors import DomainError
from app.runtime.observability import record_request
from app.schemas import PredictRequest
from app.services.prediction import cached, predict_cached, served, work_cells

PATH = "/predict"
_JSON = b"application/json"
#: what a path answers: a JSON body, a body and its content headers (a V2 inference's framing),
#: or the error answer of a reference already refused
Answer = bytes | tuple[bytes, list[tuple[bytes, bytes]]] | Response
#: the V2 inference paths, as FastAPI matches ``/v2/models/{name}[/versions/{version}]/infer``
_INFER = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")
#: the templates of the routes it answers for: the prediction route, V2 inference without and with a version
_TEMPLATES = (PATH, "/v2/models/{name}/infer", "/v2/models/{name}/versions/{version}/infer")
log = logging.getLogger("labelserve.api")


class PredictFastPath:
    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]) -> None:
        """``routes``: the app's routes (``app.api.router.routes()``), among which the ones it
        answers for; handed in, so that this module and the routers never import each other."""
        self.app = app
        found = {r.path: r for r in routes if isinstance(r, APIRoute)}
        self.routes = {template: found[template] for template in _TEMPLATES}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        infer = None if path == PATH else _INFER.fullmatch(path)
        if path != PATH and infer is None:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        state: State = scope["app"].state
        if not _takes(path, scope["headers"], state.gate, json_only=infer is None):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # at most the declared length, which is within the upload limit
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        core: Core = state.core
        routes = self.routes
        work: Callable[[Core, bytes], Answer | None]
        if infer is None:
            work, route = _answer, routes[PATH]
        else:
            template = _TEMPLATES[2] if infer[2] is not None else _TEMPLATES[1]
            v2 = functools.partial(_infer, name=infer[1], version=infer[2], header_length=_header_length(scope))
            work, route = v2, routes[template]
        if len(body) > INLINE_BYTES:
            answer = await anyio.to_thread.run_sync(work, core, body, limiter=large_body_limiter(state))
        elif infer is None:
            answer = await _answer_by_work(core, body, state)
        else:
            answer = await _infer_by_work(core, body, state, infer[1], infer[2], _header_length(scope))
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        scope["route"] = route  # the route template, for the metrics, the log and FastAPI's telemetry
        if isinstance(answer, Response):
            answer.raw_headers.append(NOSNIFF)
            await answer(scope, receive, send)
            record_request(core.metrics, "POST", route.path, answer.status_code, time.perf_counter() - start)
            return
        content, headers = (answer, [(b"content-type", _JSON)]) if isinstance(answer, bytes) else answer
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(content)).encode()), NOSNIFF, *headers],
            }
        )
        await send({"type": "http.response.body", "body": content})
        record_request(core.metrics, "POST", route.path, 200, time.perf_counter() - start)


def _takes(path: str, headers: list[tuple[bytes, bytes]], gate: RequestGate, json_only: bool = True) -> bool:
    """A body the request gate admits (an allowed Host, declared length within the upload limit
    and, if the server has keys, a key whose role may call the route, else no other site's Origin:
    the gate's own checks, short of answering), and JSON when
    ``json_only`` (the V2 routes read any body themselves, and Triton's clients send none)."""
    content_type = length = None
    for name, value in headers:
        if name == b"content-type":
            content_type = value
        elif name == b"content-length":
            length = value
    if json_only and (content_type is None or content_type.split(b";", 1)[0].strip().lower() != _JSON):
        return False
    return gate.admits("POST", path, headers, length)


def _answer(core: Core, body: bytes) -> bytes | Response | None:
    """A large body's answer, in the large predictions' thread (see ``_respond``), or None for
    the route to answer (a stored dataset is named, or the body does not decode). Its reference
    is resolved here when this process has not yet (``prediction.served``, the route's own first
    step, in a reading session of its own): the first batch for a new version is then decoded
    once, not here and again by the route."""
    try:
        request = PredictRequest.model_validate(orjson.loads(body))
        if request.dataset_id is not None:
            return None
        found = served(core, request.model)
    except DomainError as exc:  # an unknown reference: the route's answer
        return domain_error_response(exc)
    except Exception as exc:  # any other error: the route answers it, in its proper form
        _fell_back(core, PATH, exc)
        return None
    return _respond(core, request, found)


def _refused(core: Core, request: PredictRequest) -> Response | None:
    """The route's answer to a request whose reference this process has seen refused since the
    registry last changed, if it is one: the route would raise that error before reading
    anything else of the request (``prediction.served`` is its first step)."""
    error = core.refs.refusal(request.model)
    return None if error is None else domain_error_response(error)


async def _answer_by_work(core: Core, body: bytes, state: State) -> bytes | Response | None:
    """A small body's answer: decoded on the event loop, computed there when its answer is at
    most ``INLINE_CELLS`` (rows x labels), else in the large predictions' thread; a refused
    reference's error answer on the event loop."""
    try:
        request = PredictRequest.model_validate(orjson.loads(body))
        found = cached(core, request)
        if found is None:
            return _refused(core, request)
    except Exception as exc:  # any error: the route answers it, in its proper form
        _fell_back(core, PATH, exc)
        return None
    if work_cells(found, request) <= INLINE_CELLS:
        return _respond(core, request, found)
    return await anyio.to_thread.run_sync(_respond, core, request, found, limiter=large_body_limiter(state))


def _respond(core: Core, request: PredictRequest, found: Any) -> bytes | Response | None:
    """The answer; or the error answer of the service's checks (the answer bound's 413, the
    features' 422, ...), which ``predict_cached`` makes as the route does, in its order; or None
    for the route to answer any other failure.

    The 14 KB body of issue 24 item 2 (2,000 rows, a 2,000-label ranking) was refused by the
    answer bound here, then decoded again by the route (``json.loads``, 4 ms on the event loop,
    and its validation): four connections sending it held ``/health`` to a p99 of 236 ms.
    """
    try:
        return predict_cached(core, request, found)
    except DomainError as exc:
        return domain_error_response(exc)
    except Exception as exc:  # anything else: the route answers it, and the fallback is logged
        _fell_back(core, PATH, exc)
        return None


def _infer(core: Core, body: bytes, name: str, version: str | None, header_length: str | None) -> Answer | None:
    """A V2 inference's response body and headers, as the route gives them for a resolved
    reference (JSON or binary tensor data), or None."""
    try:
        _, served = core.refs.get(inference.reference(name, version))
        if served is None:
            return None
        framed = binary.answer(served, body, header_length, core.settings.max_answer_cells)
        return framed.body, framed.headers()
    except Exception as exc:  # any error: the route answers it, in the protocol's shape
        _fell_back(core, _TEMPLATES[2] if version is not None else _TEMPLATES[1], exc)
        return None


async def _infer_by_work(
    core: Core, body: bytes, state: State, name: str, version: str | None, header_length: str | None
) -> Answer | None:
    """A small V2 body's answer: read on the event loop, computed there when its output has at
    most ``INLINE_CELLS`` (instances x labels), else in the large predictions' thread."""
    route = _TEMPLATES[2] if version is not None else _TEMPLATES[1]
    try:
        _, served = core.refs.get(inference.reference(name, version))
        if served is None:
            return None
        decoded = binary.read(body, header_length)
    except Exception as exc:  # any error: the route answers it, in the protocol's shape
        _fell_back(core, route, exc)
        return None
    shape = decoded.request.inputs[0].shape if decoded.request.inputs else []
    rows = shape[0] if shape and shape[0] > 0 else 1
    if rows * len(served.label_names) <= INLINE_CELLS:
        return _framed(core, route, served, decoded)
    return await anyio.to_thread.run_sync(_framed, core, route, served, decoded, limiter=large_body_limiter(state))


def _framed(core: Core, route: str, served: Any, decoded: binary.Decoded) -> Answer | None:
    try:
        cells = core.settings.max_answer_cells
        framed = binary.write(inference.infer(served, decoded.request, decoded.binary_inputs, max_cells=cells), decoded)
        return framed.body, framed.headers()
    except Exception as exc:  # any error: the route answers it, in the protocol's shape
        _fell_back(core, route, exc)
        return None


def _header_length(scope: Scope) -> str | None:
    """The ``Inference-Header-Content-Length`` of a request (the binary data extension), if any."""
    for name, value in scope["headers"]:
        if name == binary.HEADER_LENGTH:
            return value.decode("latin-1")
    return None


def _fell_back(core: Core, route: str, exc: Exception) -> None:
    """Log (WARNING, with the exception) and count a request the fast path could not answer.

    The route answers it all the same, so the client sees no difference; the line and the
    counter are how an operator learns that the fast path refuses requests it should take
    (a bug, or clients sending bodies the route then rejects), which it used to do silently.
    """
    core.metrics.fast_path_fallback(route, exc)
    log.warning("fast path fell back to the route", extra={"route": route}, exc_info=exc)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the route the body already read, then the client's later messages."""
    pending: list[Any] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
