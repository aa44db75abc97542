"""The prediction hot path: ``POST /predict`` answered without FastAPI's request machinery.

For a one-row prediction the model's own work is tens of microseconds, while FastAPI's route
matching (linear over every route), dependency solving and JSON decoding (``json.loads``: about
20 microseconds per kilobyte of numbers) cost several times that. This ASGI middleware takes a
``POST /predict`` with a JSON body, decodes it with orjson (ten times faster; anything orjson
refuses goes to the route, whose ``json.loads`` then decides), validates it as the route does
(``PredictRequest.model_validate``) and answers it when ``prediction.predict_cached`` can: the
reference is already resolved in this process and the body gives instances. A small body is
answered on the event loop (cheaper than a hop to a worker thread), a larger one in a thread.

Everything else, every error included, is handed to the FastAPI route with the body replayed,
so the route stays the one place that resolves references, reads stored datasets and shapes
error answers; ``tests/api/test_fast_path.py`` checks that both paths give the same answers.

It sits inside the API key gate and the upload limit (both run first) and sets
``scope["route"]`` so that metrics and the request log name the route as usual.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import orjson
from starlette.datastructures import State
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.routes import predict as predict_route
from app.schemas import PredictRequest
from app.services.prediction import Predictor, predict_cached

PATH = "/predict"
#: bodies up to this size (about 600 rows of 10 features; 1-4 ms of work) are answered on the event
#: loop, larger ones in a thread of their own
INLINE_BYTES = 128 * 1024
_JSON = b"application/json"
_ROUTE = next(route for route in predict_route.router.routes if getattr(route, "path", None) == PATH)


def large_body_limiter(state: State) -> anyio.CapacityLimiter:
    """The app's one thread for predictions of large bodies (made on first use, in the event loop).

    Handing each large prediction to the shared thread pool let up to 40 threads fight for the
    GIL: 100-row bodies at 16 connections then served half the rate of answering them on the
    event loop, with a p99 of 147 ms instead of 10 ms. One thread keeps the loop responsive
    (the GIL switches every 5 ms) without the fight.
    """
    limiter: anyio.CapacityLimiter | None = getattr(state, "large_predictions", None)
    if limiter is None:
        limiter = state.large_predictions = anyio.CapacityLimiter(1)
    return limiter


class PredictFastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away (or the upload limit answered)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        predictor: Predictor = scope["app"].state.predictor
        if len(body) <= INLINE_BYTES:
            answer = _answer(predictor, body)
        else:
            limiter = large_body_limiter(scope["app"].state)
            answer = await anyio.to_thread.run_sync(_answer, predictor, body, limiter=limiter)
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        scope["route"] = _ROUTE
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(answer)).encode()), (b"content-type", _JSON)],
            }
        )
        await send({"type": "http.response.body", "body": answer})


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == _JSON
    return False


def _answer(predictor: Predictor, body: bytes) -> bytes | None:
    """The response body, or None for the route to answer (a database is needed, or any error)."""
    try:
        return predict_cached(predictor, PredictRequest.model_validate(orjson.loads(body)))
    except Exception:  # any error: the route answers it, in its proper form
        return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the route the body already read, then the client's later messages."""
    pending: list[Any] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
