"""The messages of the open inference protocol ("V2", KServe / Triton REST), as this service speaks it.

One input tensor ``input-0`` (FP32 or FP64, shape ``[n, d]``), its data in JSON (flat in row-major
order, or nested) or, with the binary tensor data extension, as raw little-endian bytes after the
JSON header (``parameters.binary_data_size``); named output tensors, their data flat in JSON or
raw bytes when asked (``app.api.v2.binary`` reads and writes that framing).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.formats.validation import MAX_ABS_FEATURE
from app.schemas import Integer, Number

INPUT_NAME = "input-0"
TensorType = Literal["BOOL", "INT64", "FP32", "FP64"]
# An input's numbers as JSON gives them (``app.schemas``' request numbers): a boolean or a numeric
# string is refused, not read as 1 or as its number (pydantic's lax mode, and NumPy's conversion
# of the data, would), and so are NaN and infinity, which Python's json module reads.
Dimension = Integer
Element = Number


BINARY_EXTENSION = "binary_tensor_data"


class ServerMetadata(BaseModel):
    name: Literal["labelserve"] = Field("labelserve", description="always labelserve")
    version: str = Field(description="the labelserve version")
    extensions: list[str] = Field(description=f"the protocol extensions this server speaks: {BINARY_EXTENSION}")


class TensorMetadata(BaseModel):
    name: str = Field(description="tensor name")
    datatype: TensorType = Field(description="element type")
    shape: list[int] = Field(description="dimensions; -1 is any number of instances")
    parameters: dict[str, list[str]] = Field(
        description="what the last axis holds: `features` (the input's columns, the features output's "
        "indices) or `labels` (the columns of scores, labels and distribution)"
    )


class ModelMetadata(BaseModel):
    name: str = Field(description="model name")
    versions: list[str] = Field(description="the model's versions, oldest first")
    platform: Literal["labelserve"] = Field("labelserve", description="always labelserve")
    inputs: list[TensorMetadata] = Field(description="the input tensor: one row per instance, training feature order")
    outputs: list[TensorMetadata] = Field(description="the output tensors this model gives")
    parameters: dict[str, Any] = Field(
        description="`method` and `task` of the version, `labels` (label names, column order of the outputs) "
        "and `features` (feature names, column order of the input)"
    )


class ModelReady(BaseModel):
    name: str = Field(description="model name")
    ready: bool = Field(description="whether the version can answer an inference now")


class Live(BaseModel):
    live: bool = Field(description="the process answers")


class Ready(BaseModel):
    ready: bool = Field(description="the database and the model store are usable")


class InputTensor(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the protocol allows fields this server does not use

    name: str = Field(description=f"must be '{INPUT_NAME}'")
    shape: list[Dimension] = Field(description="[n, d]: n instances of the model's d features")
    datatype: Literal["FP32", "FP64"] = Field(description="element type of data")
    data: list[Element] | list[list[Element]] | None = Field(
        None,
        description="n * d numbers, flat in row-major order or nested as n rows (absent for binary data); "
        f"finite, within +-{MAX_ABS_FEATURE:g} as in /predict",
    )
    parameters: dict[str, Any] | None = Field(
        None, description="`binary_data_size`: the tensor's byte length after the JSON header (binary data extension)"
    )


class RequestedOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="an output of the model's metadata")
    parameters: dict[str, Any] | None = Field(
        None, description="`binary_data` (boolean): this output as raw bytes after the JSON header"
    )


class InferRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = Field(None, description="echoed in the response")
    parameters: dict[str, Any] | None = Field(
        None,
        description="optional `threshold` (number): score above which a label is on, as in /predict; "
        "`binary_data_output` (boolean): every output not asked otherwise as raw bytes after the JSON header",
    )
    inputs: list[InputTensor] = Field(description=f"exactly one tensor, '{INPUT_NAME}' (may be empty for selectors)")
    outputs: list[RequestedOutput] | None = Field(None, description="the outputs to return (default: all)")


class OutputTensor(BaseModel):
    name: str = Field(description="output name")
    shape: list[int] = Field(description="dimensions of data")
    datatype: TensorType = Field(description="element type of data")
    data: list[Any] | None = Field(None, description="the values, flat in row-major order (absent for binary data)")
    parameters: dict[str, Any] | None = Field(
        None, description="`binary_data_size`: the byte length of the tensor's raw data after the JSON header"
    )


class InferResponse(BaseModel):
    model_name: str = Field(description="model name")
    model_version: str = Field(description="the version that answered")
    id: str | None = Field(None, description="the request's id")
    outputs: list[OutputTensor] = Field(description="the requested outputs")


class ErrorOut(BaseModel):
    error: str = Field(description="what was wrong")
