"""The open inference protocol (V2) on the same registry, caches and model code as ``/predict``.

A V2 request names the model in the path (``name``, ``name@alias``, or ``name`` plus a
version) and carries the instances as one flat or nested tensor; the outputs are the same
numbers ``/predict`` gives, as tensors: ``scores`` and ``labels`` for classifiers,
``distribution`` for label distributions, ``features`` (indices, best first) for selectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InvalidInput, NotFound
from app.methods.base import Task
from app.orm import ModelVersion
from app.prediction import label_matrix
from app.registry import ModelRef, Served, is_version_number
from app.schemas_v2 import (
    INPUT_NAME,
    InferRequest,
    InferResponse,
    InputTensor,
    ModelMetadata,
    OutputTensor,
    TensorMetadata,
    TensorType,
)
from app.services.registry import method_of

OUTPUTS: dict[Task, tuple[tuple[str, TensorType], ...]] = {
    "multilabel": (("scores", "FP64"), ("labels", "BOOL")),
    "distribution": (("distribution", "FP64"),),
    "selection": (("features", "INT64"),),
}


def reference(name: str, version: str | None) -> str:
    """The model reference of a V2 path: ``name`` (which may be ``name@alias``) or ``name@version``.

    A path that cannot name a model (not a reference, a version that is not a number) is 404,
    as the protocol answers for any model the server does not have.
    """
    if version is not None and "@" in name:
        raise InvalidInput(f"'{name}' version '{version}': give name/versions/<number>, or name@alias alone")
    ref = name if version is None else f"{name}@{version}"
    try:
        ModelRef.parse(ref)
    except ValueError:
        raise NotFound(f"model '{ref}' not found") from None
    if version is not None and not is_version_number(version):
        raise NotFound(f"model '{name}' has no version '{version}'")
    return ref


def metadata(session: Session, served: Served) -> ModelMetadata:
    spec = method_of(served.method)
    versions = session.scalars(
        select(ModelVersion.version).where(ModelVersion.model_name == served.name).order_by(ModelVersion.version)
    ).all()
    width = {"scores": len(served.label_names), "labels": len(served.label_names)}
    width |= {"distribution": len(served.label_names), "features": len(served.feature_names)}
    return ModelMetadata(
        name=served.name,
        versions=[str(v) for v in versions],
        inputs=[TensorMetadata(name=INPUT_NAME, datatype="FP64", shape=[-1, len(served.feature_names)])],
        outputs=[
            TensorMetadata(name=n, datatype=t, shape=[width[n]] if n == "features" else [-1, width[n]])
            for n, t in OUTPUTS[spec.task]
        ],
    )


def infer(served: Served, request: InferRequest) -> InferResponse:
    """The requested output tensors (all of the model's by default), computed as ``/predict`` does."""
    spec = method_of(served.method)
    available = dict(OUTPUTS[spec.task])
    wanted = [o.name for o in request.outputs] if request.outputs else list(available)
    unknown = [n for n in wanted if n not in available]
    if unknown:
        raise InvalidInput(f"a {spec.id} model has the outputs {', '.join(available)}; not {', '.join(unknown)}")
    threshold = _threshold(request.parameters)
    model = served.model
    tensors: dict[str, tuple[np.ndarray, TensorType]] = {}
    if spec.task == "selection":
        tensors["features"] = (np.asarray(model.ranking_, dtype=np.int64), "INT64")
    else:
        X = _matrix(request.inputs, len(served.feature_names))
        if spec.task == "distribution":
            tensors["distribution"] = (np.asarray(model._predict(X), dtype=np.float64), "FP64")
        else:
            if "scores" in wanted:
                tensors["scores"] = (np.asarray(model._decision_function(X), dtype=np.float64), "FP64")
            if "labels" in wanted:
                tensors["labels"] = (np.asarray(label_matrix(model, X, threshold)[0], dtype=bool), "BOOL")
    return InferResponse(
        model_name=served.name,
        model_version=str(served.version),
        id=request.id,
        outputs=[
            OutputTensor(
                name=n, shape=list(tensors[n][0].shape), datatype=tensors[n][1], data=tensors[n][0].ravel().tolist()
            )
            for n in wanted
        ],
    )


def _threshold(parameters: dict[str, Any] | None) -> float | None:
    value = (parameters or {}).get("threshold")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InvalidInput(f"parameters.threshold must be a finite number, not {value!r}")
    return float(value)


def _matrix(inputs: list[InputTensor], d: int) -> np.ndarray:
    """The (n, d) float64 matrix of the one input tensor, or InvalidInput saying what is wrong."""
    if len(inputs) != 1 or inputs[0].name != INPUT_NAME:
        raise InvalidInput(f"give exactly one input tensor, named '{INPUT_NAME}'")
    tensor = inputs[0]
    if len(tensor.shape) != 2 or tensor.shape[1] != d or tensor.shape[0] < 1:
        raise InvalidInput(f"input '{INPUT_NAME}' must have shape [n, {d}] with n >= 1, not {tensor.shape}")
    dtype = np.float32 if tensor.datatype == "FP32" else np.float64
    try:
        values = np.asarray(tensor.data, dtype=dtype)
    except (TypeError, ValueError):
        raise InvalidInput(f"input '{INPUT_NAME}': data must be numbers, flat or as rows of {d}") from None
    if values.size != tensor.shape[0] * d or values.ndim not in (1, 2):
        raise InvalidInput(f"input '{INPUT_NAME}': shape {tensor.shape} needs {tensor.shape[0] * d} numbers")
    X = values.reshape(tensor.shape[0], d).astype(np.float64)
    if not np.isfinite(X).all():
        i, j = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
        raise InvalidInput(f"input '{INPUT_NAME}': the value at [{i}, {j}] is not a finite number")
    return X
