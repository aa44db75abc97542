"""The open inference protocol (V2) on the same registry, caches and model code as ``/predict``.

A V2 request names the model in the path (``name``, ``name@alias``, or ``name`` plus a
version) and carries the instances as one flat or nested tensor; the outputs are the same
numbers ``/predict`` gives, as tensors: ``scores`` and ``labels`` for classifiers,
``distribution`` for label distributions, ``features`` (indices, best first) for selectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api.v2.messages import (
    INPUT_NAME,
    InferRequest,
    InputTensor,
    ModelMetadata,
    TensorMetadata,
    TensorType,
)
from app.core import Core
from app.errors import InvalidInput, NotFound, PayloadTooLarge
from app.methods.base import Task
from app.registry.model_cache import Served
from app.registry.refs import ModelRef, is_version_number
from app.services.models import method_of
from app.services.prediction import answer_cells, served
from app.serving.answers import FEATURE_RULE, first_unbounded, label_matrix, shown_value
from app.storage.orm import ModelVersion

OUTPUTS: dict[Task, tuple[tuple[str, TensorType], ...]] = {
    "multilabel": (("scores", "FP64"), ("labels", "BOOL")),
    "distribution": (("distribution", "FP64"),),
    "selection": (("features", "INT64"),),
}
#: the little-endian element type of each input datatype, as the binary data extension lays it out
INPUT_DTYPES: dict[str, np.dtype[Any]] = {"FP32": np.dtype("<f4"), "FP64": np.dtype("<f8")}


@dataclass(frozen=True)
class Inference:
    """An inference's answer before it is framed: the output tensors, in the order asked."""

    model_name: str
    model_version: str
    id: str | None
    outputs: list[tuple[str, TensorType, np.ndarray]]


def reference(name: str, version: str | None) -> str:
    """The model reference of a V2 path: ``name`` (which may be ``name@alias``) or ``name@version``.

    A path that cannot name a model (not a reference, a version that is not a number) is 404,
    as the protocol answers for any model the server does not have.
    """
    if version is not None and "@" in name:
        # no model is named so (a name holds no '@'): a 404, as for any other path naming no model
        raise NotFound(f"no model '{name}' version '{version}': give name/versions/<number>, or name@alias alone")
    ref = name if version is None else f"{name}@{version}"
    try:
        ModelRef.parse(ref)
    except ValueError:
        raise NotFound(f"model '{ref}' not found") from None
    if version is not None and not is_version_number(version):
        raise NotFound(f"model '{name}' has no version '{version}'")
    return ref


def model_metadata(core: Core, ref: str) -> ModelMetadata:
    """The metadata of the version ``ref`` names (resolved, and loaded, as for an inference)."""
    found = served(core, ref)
    with core.database.reading() as session:
        return metadata(session, found)


def metadata(session: Session, served: Served) -> ModelMetadata:
    """The version's tensors, and the names of what their columns hold, so that a client that knows
    only the protocol can map an output column to a label (``parameters.labels``) and build the
    input's columns in training order (``parameters.features``)."""
    spec = method_of(served.method)
    versions = session.scalars(
        select(ModelVersion.version).where(ModelVersion.model_name == served.name).order_by(ModelVersion.version)
    ).all()
    labels, features = served.label_names, served.feature_names
    columns = {"scores": labels, "labels": labels, "distribution": labels, "features": features}
    axis = {"scores": "labels", "labels": "labels", "distribution": "labels", "features": "features"}
    return ModelMetadata(
        name=served.name,
        versions=[str(v) for v in versions],
        inputs=[
            TensorMetadata(
                name=INPUT_NAME, datatype="FP64", shape=[-1, len(features)], parameters={"features": features}
            )
        ],
        outputs=[
            TensorMetadata(
                name=n,
                datatype=t,
                shape=[len(columns[n])] if n == "features" else [-1, len(columns[n])],
                parameters={axis[n]: columns[n]},
            )
            for n, t in OUTPUTS[spec.task]
        ],
        parameters={"method": spec.id, "task": spec.task, "labels": labels, "features": features},
    )


def infer(served: Served, request: InferRequest, binary: Sequence[bytes | None] = (), *, max_cells: int) -> Inference:
    """The requested output tensors (all of the model's by default), computed as ``/predict`` does:
    the one inference of the protocol's transports (the REST routes, their fast path, the gRPC service).

    ``binary`` holds, by position in ``request.inputs``, the raw bytes of an input sent with the
    binary data extension or in gRPC's ``raw_input_contents`` (None for one given as ``data``).
    The outputs' rows x labels are bounded by ``max_cells`` (``LABELSERVE_MAX_ANSWER_CELLS``,
    counted as for ``/predict``) before anything is computed: ``PayloadTooLarge`` above it.
    """
    spec = method_of(served.method)
    available = dict(OUTPUTS[spec.task])
    wanted = [o.name for o in request.outputs] if request.outputs else list(available)
    unknown = [n for n in wanted if n not in available]
    if unknown:
        raise InvalidInput(f"a {spec.id} model has the outputs {', '.join(available)}; not {', '.join(unknown)}")
    threshold = _threshold(request.parameters)
    model = served.model
    tensors: dict[str, np.ndarray] = {}
    if spec.task == "selection":
        tensors["features"] = np.asarray(model.ranking_, dtype=np.int64)
    else:
        X = _matrix(request.inputs, len(served.feature_names), binary)
        _check_answer(X.shape[0], len(served.label_names), wanted, max_cells)
        if spec.task == "distribution":
            tensors["distribution"] = np.asarray(model._predict(X), dtype=np.float64)
        else:
            if "scores" in wanted:
                tensors["scores"] = np.asarray(model._decision_function(X), dtype=np.float64)
            if "labels" in wanted:
                tensors["labels"] = np.asarray(label_matrix(model, X, threshold)[0], dtype=bool)
    return Inference(
        model_name=served.name,
        model_version=str(served.version),
        id=request.id,
        outputs=[(n, available[n], tensors[n]) for n in wanted],
    )


def _check_answer(rows: int, labels: int, outputs: list[str], max_cells: int) -> None:
    """``PayloadTooLarge`` for outputs of more than ``max_cells``, saying how many rows fit."""
    cells = sum(answer_cells(rows, labels, name, None) for name in outputs)
    if cells <= max_cells:
        return
    per_row = sum(answer_cells(1, labels, name, None) for name in outputs)
    hint = f"send at most {max(1, max_cells // max(per_row, 1))} instances per request"
    if outputs != ["scores"]:
        hint += ", or ask for the 'scores' output alone (16 scores count as one cell)"
    raise PayloadTooLarge(
        f"the answer would be {rows} rows x {labels} labels ({cells} cells of the outputs {', '.join(outputs)}), "
        f"more than LABELSERVE_MAX_ANSWER_CELLS = {max_cells}; {hint}"
    )


def _threshold(parameters: dict[str, Any] | None) -> float | None:
    value = (parameters or {}).get("threshold")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InvalidInput(f"parameters.threshold must be a finite number, not {value!r}")
    return float(value)


def _matrix(inputs: list[InputTensor], d: int, binary: Sequence[bytes | None]) -> np.ndarray:
    """The (n, d) float64 matrix of the one input tensor, or InvalidInput saying what is wrong."""
    if len(inputs) != 1 or inputs[0].name != INPUT_NAME:
        raise InvalidInput(f"give exactly one input tensor, named '{INPUT_NAME}'")
    tensor = inputs[0]
    if len(tensor.shape) != 2 or tensor.shape[1] != d or tensor.shape[0] < 1:
        raise InvalidInput(f"input '{INPUT_NAME}' must have shape [n, {d}] with n >= 1, not {tensor.shape}")
    n, dtype = tensor.shape[0], INPUT_DTYPES[tensor.datatype]
    raw = binary[0] if binary else None
    if raw is not None:
        if len(raw) != n * d * dtype.itemsize:  # checked before anything is allocated
            raise InvalidInput(
                f"input '{INPUT_NAME}': shape {tensor.shape} of {tensor.datatype} is {n * d * dtype.itemsize} "
                f"bytes of binary data, but its binary_data_size is {len(raw)}"
            )
        values = np.frombuffer(raw, dtype=dtype)
    else:
        if tensor.data is None:
            raise InvalidInput(f"input '{INPUT_NAME}' has no data: give data, or binary data with binary_data_size")
        try:  # numbers (the schema's), in rows of equal length or flat
            values = np.asarray(tensor.data, dtype=np.float64)
        except ValueError:
            raise InvalidInput(f"input '{INPUT_NAME}': data must be numbers, flat or as rows of {d}") from None
        if values.size != n * d or values.ndim not in (1, 2):
            raise InvalidInput(f"input '{INPUT_NAME}': shape {tensor.shape} needs {n * d} numbers")
    X = values.reshape(n, d).astype(np.float64)
    unbounded = first_unbounded(X)  # before an FP32 rounding, which would make 1e300 infinite
    if unbounded is not None:
        i, j = unbounded
        raise InvalidInput(f"input '{INPUT_NAME}': the value at [{i}, {j}] is {shown_value(X[i, j])}; {FEATURE_RULE}")
    return X if raw is not None or dtype == np.float64 else X.astype(dtype).astype(np.float64)
