"""The open inference protocol (V2) over gRPC: ``inference.GRPCInferenceService`` (``ServerLive``,
``ServerReady``, ``ServerMetadata``, ``ModelReady``, ``ModelMetadata``, ``ModelInfer``).

The servicer only converts messages, as KServe's gRPC servicer does in front of its ``DataPlane``:
it calls the functions the REST routes call (``inference.reference``, ``prediction.served``,
``inference.model_metadata``, ``inference.infer``, ``maintenance.readiness``), so both transports
give the same answers and the same errors, mapped to gRPC status codes (``CODES``). A request is
admitted by the same keys and roles as its REST route (``ROUTE_ROLES``), the key read from the
call's metadata (``authorization: Bearer <key>`` or ``x-api-key: <key>``). Inputs come as
``raw_input_contents`` (little-endian bytes, what Triton's client sends) or as typed
``contents``; outputs always go back as ``raw_output_contents``, as Triton answers.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import anyio.to_thread
import grpc
import numpy as np
import orjson
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import State

from app import __version__
from app.api.access import ROUTE_ROLES
from app.api.gate import RequestGate, given_key
from app.api.offload import INLINE_CELLS, large_body_limiter
from app.api.v2 import inference
from app.api.v2.binary import LAYOUT, describe
from app.api.v2.messages import BINARY_EXTENSION, InferRequest, ModelMetadata, TensorMetadata
from app.api.v2.proto import grpc_predict_v2_pb2 as pb
from app.api.v2.proto import grpc_predict_v2_pb2_grpc as pb_grpc
from app.core import Core
from app.errors import DomainError, InvalidInput
from app.runtime.observability import record_request
from app.services.keys import Role
from app.services.maintenance import readiness
from app.services.prediction import served as lookup
from app.storage.db_errors import is_transient

log = logging.getLogger("labelserve.api")
#: the service's path: a call's is ``PATH/<call>``
PATH = "/inference.GRPCInferenceService"
T = TypeVar("T")
Code = grpc.StatusCode
#: the gRPC status of each domain error's HTTP status (the REST routes' answer to the same fault)
CODES: dict[int, Any] = {
    400: Code.INVALID_ARGUMENT,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    409: Code.FAILED_PRECONDITION,
    413: Code.RESOURCE_EXHAUSTED,
    422: Code.INVALID_ARGUMENT,
    429: Code.RESOURCE_EXHAUSTED,
    503: Code.UNAVAILABLE,
    507: Code.RESOURCE_EXHAUSTED,
}
#: the role each guarded call needs: its REST route's (the others, the server's health and metadata, are open, as there)
ROLES: dict[str, Role] = {
    "ModelMetadata": ROUTE_ROLES[("GET", "/v2/models/{name}")],
    "ModelReady": ROUTE_ROLES[("GET", "/v2/models/{name}/ready")],
    "ModelInfer": ROUTE_ROLES[("POST", "/v2/models/{name}/infer")],
}
MISSING = "missing API key: send the metadata 'authorization: Bearer <key>' or 'x-api-key: <key>'"
INVALID = "invalid API key (unknown or revoked)"
#: the typed contents field that holds an input of each datatype this server takes
_CONTENTS = {"FP32": "fp32_contents", "FP64": "fp64_contents"}


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    """The protocol's six calls on this process's ``Core`` (the one the HTTP API serves)."""

    def __init__(self, core: Core, gate: RequestGate, state: State) -> None:
        self._core = core
        self._gate = gate
        self._state = state  # the app's state: its one thread for large predictions

    async def ServerLive(self, request: Any, context: Any) -> Any:
        return await self._answer(context, "ServerLive", _returning(pb.ServerLiveResponse(live=True)))

    async def ServerReady(self, request: Any, context: Any) -> Any:
        checks = await self._answer(context, "ServerReady", lambda: anyio.to_thread.run_sync(readiness, self._core))
        return pb.ServerReadyResponse(ready=checks.ready)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        answer = pb.ServerMetadataResponse(name="labelserve", version=__version__, extensions=[BINARY_EXTENSION])
        return await self._answer(context, "ServerMetadata", _returning(answer))

    async def ModelReady(self, request: Any, context: Any) -> Any:
        async def ready() -> Any:
            ref = inference.reference(request.name, request.version or None)
            _, found = self._core.refs.get(ref)
            return found if found is not None else await self._in_thread(ref, functools.partial(lookup, self._core))

        await self._answer(context, "ModelReady", ready)
        return pb.ModelReadyResponse(ready=True)

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        async def metadata() -> ModelMetadata:
            ref = inference.reference(request.name, request.version or None)
            return await self._in_thread(ref, functools.partial(inference.model_metadata, self._core))

        return _metadata_message(await self._answer(context, "ModelMetadata", metadata))

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        return _infer_message(await self._answer(context, "ModelInfer", lambda: self._infer(request)))

    async def _infer(self, message: Any) -> inference.Inference:
        """As the REST route: a resolved reference with a small answer on the event loop, a larger
        one in the app's thread for large predictions, an unresolved one in a worker thread."""
        core, cells = self._core, self._core.settings.max_answer_cells
        ref = inference.reference(message.model_name, message.model_version or None)
        request, raw = infer_request(message)
        _, found = core.refs.get(ref)
        if found is None:
            return await self._in_thread(ref, lambda r: inference.infer(lookup(core, r), request, raw, max_cells=cells))
        shape = request.inputs[0].shape if request.inputs else []
        if (shape[0] if shape else 1) * len(found.label_names) <= INLINE_CELLS:
            return inference.infer(found, request, raw, max_cells=cells)
        work = functools.partial(inference.infer, found, request, raw, max_cells=cells)
        return await anyio.to_thread.run_sync(work, limiter=large_body_limiter(self._state))

    async def _in_thread(self, ref: str, work: Callable[[str], T]) -> T:
        """``work(ref)`` in a worker thread, unless the reference was refused since the registry
        last changed (answered on the event loop, as the REST routes do)."""
        refused = self._core.refs.refusal(ref)
        if refused is not None:
            raise refused
        return await anyio.to_thread.run_sync(work, ref)

    async def _answer(self, context: Any, call: str, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s result once the caller is admitted to ``call``, or the call aborted with the
        status of what went wrong. Either way the call is counted, timed and logged as the HTTP
        requests are (``record_request``: method ``GRPC``, the call's path, the REST status its
        answer stands for)."""
        started, status = time.perf_counter(), 500
        try:
            refusal = self.refusal(context, call)
            if refusal is None:
                result = await work()
                status = 200
                return result
            status, code, details = refusal
        except DomainError as exc:
            status = 400 if exc.status_code == 422 else exc.status_code
            code, details = CODES.get(exc.status_code, Code.UNKNOWN), exc.message
        except (SQLAlchemyError, OSError) as exc:
            status, code, details = _storage_status(exc)
        finally:
            record_request(self._core.metrics, "GRPC", f"{PATH}/{call}", status, time.perf_counter() - started)
        await _abort(context, code, details)

    def refusal(self, context: Any, call: str) -> tuple[int, Any, str] | None:
        """Why the call's metadata does not admit it (401 UNAUTHENTICATED, 403 PERMISSION_DENIED), or
        None: a server without keys, an open call, or a key whose role may make it."""
        keys, needed = self._gate.keys, ROLES.get(call)
        if keys is None or needed is None:
            return None
        given = given_key(_headers(context.invocation_metadata()))
        if given is None:
            return 401, Code.UNAUTHENTICATED, MISSING
        key = keys.identify(given)
        if key is None:
            return 401, Code.UNAUTHENTICATED, INVALID
        if key.role.allows(needed):
            return None
        return (
            403,
            Code.PERMISSION_DENIED,
            f"this key (name '{key.name}', role '{key.role.value}') may not call {call}: "
            f"it needs the '{needed.value}' role",
        )


def _returning(answer: T) -> Callable[[], Awaitable[T]]:
    async def work() -> T:
        return answer

    return work


async def _abort(context: Any, code: Any, details: str) -> NoReturn:
    await context.abort(code, details)
    raise AssertionError("context.abort returned")  # it raises: the call ends there


def _headers(metadata: Any) -> list[tuple[bytes, bytes]]:
    """A call's metadata as the request gate reads HTTP headers (lower-case names, bytes)."""
    return [
        (key.lower().encode(), value if isinstance(value, bytes) else value.encode()) for key, value in metadata or ()
    ]


def _storage_status(exc: BaseException) -> tuple[int, Any, str]:
    """A database or file system failure: UNAVAILABLE when it is transient (the same call succeeds
    soon, as the REST routes' 503), else INTERNAL without its internals."""
    if is_transient(exc):
        log.warning("transient database error", exc_info=(type(exc), exc, exc.__traceback__))
        return 503, Code.UNAVAILABLE, "the database is briefly unavailable (connection lost or busy): retry shortly"
    log.error("unexpected error", exc_info=(type(exc), exc, exc.__traceback__))
    return 500, Code.INTERNAL, "internal error; the server log has the details"


def _parameters(entries: Any) -> dict[str, Any] | None:
    """A message's ``map<string, InferParameter>`` as the REST message's ``parameters`` object."""
    out = {}
    for name, value in entries.items():
        choice = value.WhichOneof("parameter_choice")
        if choice is not None:
            out[name] = getattr(value, choice)
    return out or None


def infer_request(message: Any) -> tuple[InferRequest, list[bytes | None]]:
    """A ``ModelInferRequest`` as the REST transport's ``InferRequest``, and the raw bytes of each
    input (``raw_input_contents``; none when the inputs have typed ``contents``)."""
    raw: list[bytes | None] = list(message.raw_input_contents)
    if raw and len(raw) != len(message.inputs):
        raise InvalidInput(
            f"raw_input_contents holds {len(raw)} tensors for {len(message.inputs)} inputs: give one for each "
            "input, or give every input's contents"
        )
    inputs = []
    for i, tensor in enumerate(message.inputs):
        entry: dict[str, Any] = {
            "name": tensor.name,
            "shape": list(tensor.shape),
            "datatype": tensor.datatype,
            "parameters": _parameters(tensor.parameters),
        }
        has_contents = tensor.HasField("contents") and tensor.contents.ByteSize() > 0
        if raw and has_contents:
            raise InvalidInput(f"inputs[{i}] ('{tensor.name}') has contents and raw_input_contents: give one of them")
        if has_contents and tensor.datatype in _CONTENTS:
            entry["data"] = list(getattr(tensor.contents, _CONTENTS[tensor.datatype]))
        inputs.append(entry)
    outputs = [{"name": o.name, "parameters": _parameters(o.parameters)} for o in message.outputs]
    document = {
        "id": message.id or None,
        "parameters": _parameters(message.parameters),
        "inputs": inputs,
        "outputs": outputs or None,
    }
    try:
        return InferRequest.model_validate(document), raw
    except ValidationError as exc:
        raise InvalidInput(describe(exc)) from None


def _infer_message(result: inference.Inference) -> Any:
    """The response: every output's raw little-endian bytes in ``raw_output_contents``, in order."""
    outputs, raw = [], []
    for name, datatype, array in result.outputs:
        outputs.append(pb.ModelInferResponse.InferOutputTensor(name=name, datatype=datatype, shape=array.shape))
        raw.append(np.ascontiguousarray(array, dtype=LAYOUT[datatype]).tobytes())
    return pb.ModelInferResponse(
        model_name=result.model_name,
        model_version=result.model_version,
        id=result.id or "",
        outputs=outputs,
        raw_output_contents=raw,
    )


def _parameter(value: Any) -> Any:
    """One metadata parameter; a list (label or feature names) as its JSON text."""
    if isinstance(value, bool):
        return pb.InferParameter(bool_param=value)
    if isinstance(value, int):
        return pb.InferParameter(int64_param=value)
    if isinstance(value, float):
        return pb.InferParameter(double_param=value)
    if isinstance(value, str):
        return pb.InferParameter(string_param=value)
    return pb.InferParameter(string_param=orjson.dumps(value).decode())


def _tensor(tensor: TensorMetadata) -> Any:
    return pb.ModelMetadataResponse.TensorMetadata(
        name=tensor.name,
        datatype=tensor.datatype,
        shape=tensor.shape,
        parameters={k: _parameter(v) for k, v in tensor.parameters.items()},
    )


def _metadata_message(meta: ModelMetadata) -> Any:
    return pb.ModelMetadataResponse(
        name=meta.name,
        versions=meta.versions,
        platform=meta.platform,
        inputs=[_tensor(t) for t in meta.inputs],
        outputs=[_tensor(t) for t in meta.outputs],
        parameters={k: _parameter(v) for k, v in meta.parameters.items()},
    )
