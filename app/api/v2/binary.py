"""The bodies of a V2 inference: plain JSON, or the binary tensor data extension's framing.

With the extension (KServe and Triton; Triton's clients use it by default) a body is a JSON
inference header, its length in the ``Inference-Header-Content-Length`` HTTP header, followed by
each binary input's raw bytes (``parameters.binary_data_size``) in the order of ``inputs``,
little-endian, row-major, unpadded (a BOOL is one byte). Outputs are binary when asked
(``binary_data`` on an output, else ``binary_data_output`` of the request). Binary tensors skip
parsing and formatting decimal numbers (docs/benchmarks.md). The route and the fast path both
answer through ``answer``, so both read, check and frame a body alike; every fault is an
``InvalidInput`` in the protocol's terms.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from app.api.v2 import inference
from app.api.v2.messages import InferRequest, TensorType
from app.errors import InvalidInput
from app.registry.model_cache import Served

log = logging.getLogger("labelserve.api")
#: a JSON number where the parser stopped (one too large for a double is infinite)
_NUMBER = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_WORD = re.compile(rb"-?[A-Za-z_]+")
#: the HTTP header that gives the JSON header's length, as the fast path sees header names
HEADER_LENGTH = b"inference-header-content-length"
_JSON = b"application/json"
_BINARY = b"application/octet-stream"
#: the byte layout of each output datatype in the binary data extension (and gRPC's raw contents)
LAYOUT: dict[TensorType, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "INT64": np.dtype("<i8"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}
_JSON_TYPES = {
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "float_type": "a number",
    "finite_number": "a finite number",
}


@dataclass(frozen=True)
class Framed:
    """A response body and how it is framed: ``header_length`` is None for a body that is all JSON."""

    body: bytes
    header_length: int | None = None

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The content type (and the JSON header's length) of this body, as ASGI headers."""
        if self.header_length is None:
            return [(b"content-type", _JSON)]
        return [(b"content-type", _BINARY), (HEADER_LENGTH, str(self.header_length).encode())]


@dataclass(frozen=True)
class Decoded:
    """A request read from its body: the message, the raw bytes of each binary input (None for
    JSON data, by position in ``inputs``) and which outputs are to be binary."""

    request: InferRequest
    binary_inputs: list[bytes | None]
    binary_default: bool = False
    binary_outputs: Mapping[str, bool] = field(default_factory=dict)

    def binary(self, output: str) -> bool:
        return self.binary_outputs.get(output, self.binary_default)


def answer(served: Served, body: bytes, header_length: str | None, max_cells: int) -> Framed:
    """The framed response to an inference body for a resolved version (InvalidInput if it is
    wrong; PayloadTooLarge for an answer of more than ``max_cells``)."""
    decoded = read(body, header_length)
    return write(inference.infer(served, decoded.request, decoded.binary_inputs, max_cells=max_cells), decoded)


def read(body: bytes, header_length: str | None) -> Decoded:
    """The request of a body, JSON alone (no ``header_length``) or a JSON header and binary data."""
    view = memoryview(body)
    if header_length is None:
        header, rest = view, view[len(view) :]
    else:
        split = _header_size(header_length, len(body))
        header, rest = view[:split], view[split:]
    try:
        document = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(_not_json(bytes(header), exc, header_length is not None)) from None
    if not isinstance(document, dict):
        raise InvalidInput("the inference request must be a JSON object with 'inputs'")
    try:
        request = InferRequest.model_validate(document)
    except ValidationError as exc:
        raise InvalidInput(describe(exc)) from None
    chunks: list[bytes | None] = []
    offset = 0
    for i, tensor in enumerate(request.inputs):
        size = _size(tensor.parameters, f"inputs[{i}].parameters.binary_data_size")
        if size is None:
            chunks.append(None)
            continue
        if tensor.data is not None:
            raise InvalidInput(f"inputs[{i}] ('{tensor.name}') has both data and binary_data_size: give one of them")
        if header_length is None:
            raise InvalidInput(
                f"inputs[{i}] ('{tensor.name}') has a binary_data_size, but the request has no "
                "Inference-Header-Content-Length header (the JSON inference header's length in bytes)"
            )
        if offset + size > len(rest):
            raise InvalidInput(
                f"inputs[{i}] ('{tensor.name}'): binary_data_size {size} goes past the end of the body "
                f"({len(rest)} bytes of binary data follow the inference header)"
            )
        chunks.append(rest[offset : offset + size].tobytes())
        offset += size
    if offset != len(rest):
        raise InvalidInput(
            f"{len(rest)} bytes follow the inference header, but the inputs' binary_data_size add up to {offset}"
        )
    outputs = {
        o.name: flag
        for i, o in enumerate(request.outputs or [])
        if (flag := _flag(o.parameters, "binary_data", f"outputs[{i}].parameters.binary_data")) is not None
    }
    default = _flag(request.parameters, "binary_data_output", "parameters.binary_data_output")
    return Decoded(request, chunks, bool(default), outputs)


def write(result: inference.Inference, decoded: Decoded) -> Framed:
    """The response: JSON outputs in the header, binary ones as raw bytes after it, in output order."""
    outputs: list[dict[str, Any]] = []
    raw: list[bytes] = []
    for name, datatype, array in result.outputs:
        tensor: dict[str, Any] = {"name": name, "shape": list(array.shape), "datatype": datatype}
        flat = np.ascontiguousarray(array).ravel()
        if decoded.binary(name):
            data = flat.astype(LAYOUT[datatype], copy=False).tobytes()
            tensor["parameters"] = {"binary_data_size": len(data)}
            raw.append(data)
        else:
            tensor["data"] = flat
        outputs.append(tensor)
    head: dict[str, Any] = {"model_name": result.model_name, "model_version": result.model_version}
    if result.id is not None:
        head["id"] = result.id
    head["outputs"] = outputs
    header = orjson.dumps(head, option=orjson.OPT_SERIALIZE_NUMPY)
    if not raw:
        return Framed(header)
    return Framed(b"".join([header, *raw]), len(header))


def _header_size(value: str, body_length: int) -> int:
    if not value.strip().isdigit() or int(value) > body_length:
        raise InvalidInput(
            f"Inference-Header-Content-Length must be the byte length of the JSON inference header, "
            f"a whole number from 0 to the body's {body_length} bytes, not '{value}'"
        )
    return int(value)


def _size(parameters: dict[str, Any] | None, where: str) -> int | None:
    value = (parameters or {}).get("binary_data_size")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{where} must be a whole number of bytes, not {value!r}")
    return value


def _flag(parameters: dict[str, Any] | None, name: str, where: str) -> bool | None:
    value = (parameters or {}).get(name)
    if value is not None and not isinstance(value, bool):
        raise InvalidInput(f"{where} must be true or false, not {value!r}")
    return value


def _not_json(header: bytes, exc: orjson.JSONDecodeError, framed: bool) -> str:
    """What is wrong with a header that is not JSON, in the protocol's terms and the service's
    words; the parser's own text (``unexpected character: line 1 column 2 (char 1)``) goes to the
    log only, beside the message the client gets."""
    message = _not_json_message(header, exc, framed)
    log.info("inference body is not JSON", extra={"error": message, "parser": str(exc)})
    return message


def _not_json_message(header: bytes, exc: orjson.JSONDecodeError, framed: bool) -> str:
    fault = _fault(header, exc.pos, f"line {exc.lineno}, column {exc.colno}")
    if framed:
        return (
            f"the first {len(header)} bytes of the body (Inference-Header-Content-Length) are not a JSON "
            f"inference request: {fault}"
        )
    if _binary_after_json(header, exc.pos):
        return (
            "the body is not JSON alone: binary tensor data after the JSON inference request needs the "
            "Inference-Header-Content-Length header (the JSON part's length in bytes)"
        )
    if not header.strip():
        return "the body is empty: send a JSON inference request"
    if header[exc.pos : exc.pos + 3] in (b"NaN", b"Inf", b"-In"):
        return f"the body is not JSON: {fault} (JSON has no NaN or Infinity, and every value must be finite)"
    return f"the body is not JSON: {fault}"


def _fault(header: bytes, pos: int, where: str) -> str:
    """What the parser met at ``pos`` (``where``: its line and column), told from the bytes
    themselves, never from the parser's message."""
    if not header[pos:].strip():
        return f"it ends at {where}, before the JSON is complete"
    number = _NUMBER.match(header, pos)
    if number is not None and math.isinf(float(number[0])):
        return f"the number {number[0].decode()} at {where} is too large (every value must be a finite number)"
    word = _WORD.match(header, pos)
    if word is not None:  # a misspelt literal (tru), or a token JSON does not have (NaN, None)
        return f"unexpected '{word[0].decode()}' at {where}"
    found = bytes(header[pos : pos + 4]).decode("utf-8", errors="replace")[:1]
    if found.isprintable() and found != "\ufffd":
        return f"unexpected {found!r} at {where}"
    return f"unexpected byte 0x{header[pos]:02x} at {where}"


def _binary_after_json(body: bytes, pos: int) -> bool:
    """Whether the body is a JSON document followed by other bytes, or is not text at all."""
    try:
        body.decode()
    except UnicodeDecodeError:
        return True
    try:
        orjson.loads(body[:pos])
    except orjson.JSONDecodeError:
        return False
    return 0 < pos < len(body)


def describe(exc: ValidationError) -> str:
    """The first schema fault of a request, located as the protocol names its fields (both transports')."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    member = _member(first["loc"])
    if member is not None:  # a value no member of a union takes: say what the one that got furthest found
        union = [e for e in errors if _member(e["loc"]) == member]
        first = max(union, key=lambda e: len(e["loc"]))
        errors = [e for e in errors if e not in union or e is first]
    where = _where(first["loc"])
    kind = first["type"]
    if kind == "missing":
        text = f"{where} is required"
    elif kind == "literal_error":
        text = f"{where} is {first['input']!r}; this server takes {first.get('ctx', {}).get('expected', '')}"
    elif kind in _JSON_TYPES:
        text = f"{where} must be {_JSON_TYPES[kind]}"
    else:
        text = f"{where} is not valid"
    more = len(errors) - 1
    return text + (f" (and {more} more fault{'s' * (more > 1)})" if more else "")


def _member(loc: Sequence[int | str]) -> tuple[int | str, ...] | None:
    """The field a union member's error is about, or None: pydantic names the member in ``loc``
    (``('inputs', 0, 'data', 'list[float]', 3)``), a part no field name looks like."""
    for i, part in enumerate(loc):
        if isinstance(part, str) and "[" in part:
            return tuple(loc[:i])
    return None


def _where(loc: Sequence[int | str]) -> str:
    """``('inputs', 0, 'datatype')`` as ``inputs[0].datatype`` (without a union member's name)."""
    out = ""
    for part in loc:
        if isinstance(part, str) and "[" in part:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the request"
