"""The messages of the open inference protocol ("V2", KServe / Triton REST), as this service speaks it.

Only the REST JSON form: one input tensor ``input-0`` (FP32 or FP64, shape ``[n, d]``, data flat
in row-major order or nested) and named output tensors whose data is always flat.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

INPUT_NAME = "input-0"
TensorType = Literal["BOOL", "INT64", "FP32", "FP64"]


class TensorMetadata(BaseModel):
    name: str = Field(description="tensor name")
    datatype: TensorType = Field(description="element type")
    shape: list[int] = Field(description="dimensions; -1 is any number of instances")


class ModelMetadata(BaseModel):
    name: str = Field(description="model name")
    versions: list[str] = Field(description="the model's versions, oldest first")
    platform: Literal["labelserve"] = Field("labelserve", description="always labelserve")
    inputs: list[TensorMetadata] = Field(description="the input tensor: one row per instance, training feature order")
    outputs: list[TensorMetadata] = Field(description="the output tensors this model gives")


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
    shape: list[int] = Field(description="[n, d]: n instances of the model's d features")
    datatype: Literal["FP32", "FP64"] = Field(description="element type of data")
    data: list[Any] = Field(description="n * d numbers, flat in row-major order or nested as n rows")
    parameters: dict[str, Any] | None = Field(None, description="ignored")


class RequestedOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="an output of the model's metadata")
    parameters: dict[str, Any] | None = Field(None, description="ignored")


class InferRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = Field(None, description="echoed in the response")
    parameters: dict[str, Any] | None = Field(
        None, description="optional `threshold` (number): score above which a label is on, as in /predict"
    )
    inputs: list[InputTensor] = Field(description=f"exactly one tensor, '{INPUT_NAME}' (may be empty for selectors)")
    outputs: list[RequestedOutput] | None = Field(None, description="the outputs to return (default: all)")


class OutputTensor(BaseModel):
    name: str = Field(description="output name")
    shape: list[int] = Field(description="dimensions of data")
    datatype: TensorType = Field(description="element type of data")
    data: list[Any] = Field(description="the values, flat in row-major order")


class InferResponse(BaseModel):
    model_name: str = Field(description="model name")
    model_version: str = Field(description="the version that answered")
    id: str | None = Field(None, description="the request's id")
    outputs: list[OutputTensor] = Field(description="the requested outputs")


class ErrorOut(BaseModel):
    error: str = Field(description="what was wrong")
