"""Types shared by every format parser: options, the parsed result and the error."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.errors import InvalidInput, PayloadTooLarge
from app.upload_options import OPTIONS_BY_NAME, FormatName

DatasetKind = Literal["multilabel", "distribution"]


class DatasetFormatError(InvalidInput, ValueError):
    """The upload cannot be read as a dataset. The message names the problem and, where
    possible, where it is (line, row, column); the HTTP layer returns it as a 422."""


class DatasetTooLarge(PayloadTooLarge, DatasetFormatError):
    """The upload would become a dataset beyond a configured limit (413; see ``limits``).

    It is also a :class:`DatasetFormatError`, so code that catches every format error still
    rejects it; the domain error handlers answer it with its own status, 413.
    """


def _declared(name: str) -> Any:
    """The pydantic field of upload option ``name``: default, lower bound and description as
    ``app.upload_options`` declares them (the annotation below states the type for mypy;
    ``tests/unit/test_upload_options.py`` checks that the two agree)."""
    option = OPTIONS_BY_NAME[name]
    return Field(default=option.default, ge=option.minimum, description=option.description)


class ParseOptions(BaseModel):
    """The parser's options of ``POST /datasets`` (every field optional), declared in
    ``app.upload_options``.

    * ``format``: ``auto`` detects by file name extension, then by content.
    * ``label_count`` / ``label_location``: the labels are the last (``end``) or first
      (``start``) ``label_count`` columns (ARFF without a labels file or MEKA header; CSV).
    * ``label_columns``: label column names (CSV; also accepted for ARFF). A list, or a string
      holding a JSON array or comma-separated names (as a multipart form sends it).
    * ``n_features``: number of features of a LIBSVM file (default: the largest index seen).
    * ``part``: ``train`` or ``test`` half of a MAT file in the train/test layout.
    """

    model_config = ConfigDict(extra="forbid")

    format: FormatName = _declared("format")
    label_count: int | None = _declared("label_count")
    label_location: Literal["end", "start"] = _declared("label_location")
    label_columns: list[str] | None = _declared("label_columns")
    n_features: int | None = _declared("n_features")
    part: Literal["train", "test"] = _declared("part")

    @field_validator("label_columns", mode="before")
    @classmethod
    def _split_label_columns(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text:
            return None
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"label_columns is not a valid JSON array (it breaks at character {exc.pos + 1}); give names "
                    'separated by commas, or a JSON array such as ["y1", "y2"]'
                ) from None
            except RecursionError:  # "[[[[...]]]]": nesting deeper than the parser's stack
                raise ValueError("label_columns must be a flat JSON array of names, not nested arrays") from None
            return parsed
        return [name.strip() for name in text.split(",") if name.strip()]

    @field_validator("label_columns")
    @classmethod
    def _non_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            return None
        if value is not None and len(set(value)) != len(value):
            raise ValueError("label_columns lists a name more than once")
        return value


#: a feature table: dense float64, or CSR for sparse files
Features: TypeAlias = np.ndarray | sp.csr_matrix


@dataclass
class ParsedDataset:
    """A validated dataset: features, labels and names.

    ``X`` is float64, dense (C order) or ``scipy.sparse`` CSR (canonical: sorted indices, no
    explicit zeros) when the file was sparse (sparse ARFF, LIBSVM): a sparse file is never
    expanded to its dense table on the way to the store. ``Y`` is uint8 0/1 for
    ``kind == "multilabel"`` (one byte per cell, not eight) and float64 rows summing to 1 for
    ``kind == "distribution"``. ``warnings`` are what the parser changed or dropped (shown to
    the user in the upload response).
    """

    X: Features
    Y: np.ndarray
    feature_names: list[str]
    label_names: list[str]
    kind: DatasetKind
    warnings: list[str] = field(default_factory=list)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_labels(self) -> int:
        return int(self.Y.shape[1])

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)

    def dense(self) -> ParsedDataset:
        """The same dataset with dense float64 ``X`` and ``Y`` (for code that needs dense arrays:
        the benchmarks' loaders, until every method takes CSR)."""
        X = self.X if isinstance(self.X, np.ndarray) else self.X.toarray()
        return replace(self, X=np.ascontiguousarray(X, dtype=np.float64), Y=self.Y.astype(np.float64))


def generated_names(prefix: str, count: int) -> list[str]:
    """Names for formats without any (LIBSVM, MAT): ``f0, f1, ...`` and ``l0, l1, ...``,
    0-based like the feature indices of the API."""
    return [f"{prefix}{j}" for j in range(count)]
