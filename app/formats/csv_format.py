"""CSV with a header row: every column numeric; labels chosen by ``label_columns`` (names) or
``label_count`` (the last columns, or the first with ``label_location="start"``).

The delimiter is a comma unless the header has none and holds a tab or a semicolon. Lines
may end in LF, CRLF or a bare CR (old Mac tools); bare CRs are turned into LFs first. Before
any value is read, the header's column count and the number of lines bound the result
(``DatasetLimits``). Values are read by numpy's C ``loadtxt`` (memory about the size of the
result); when it fails, the file is re-scanned with the ``csv`` module only to name the
offending line and column. Every step is linear in the file size.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter

import numpy as np

from .common import DatasetFormatError, ParsedDataset, ParseOptions
from .hints import is_binary_column, label_count_hint, numeric_header_hint
from .limits import DatasetLimits
from .validation import finalize

_NON_SPACE = re.compile(rb"\S")
_BARE_CR = re.compile(rb"\r(?!\n)")
_LINE_END = re.compile(rb"\r\n?")


def _header(content: bytes) -> tuple[list[str], str, int]:
    """Column names, delimiter and the byte offset where the data starts."""
    end = content.find(b"\n")
    line = content[: end if end >= 0 else len(content)]
    try:
        text = line.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError as exc:
        raise DatasetFormatError(f"CSV header (line 1) is not valid UTF-8 (byte {exc.start + 1})") from None
    if not text.strip():
        raise DatasetFormatError("CSV: line 1 must be a header row with the column names")
    delimiter = ","
    if "," not in text:
        delimiter = "\t" if "\t" in text else ";" if ";" in text else ","
    try:
        names = [name.strip() for name in next(csv.reader([text], delimiter=delimiter))]
    except csv.Error:
        raise DatasetFormatError(
            "CSV header (line 1) cannot be split into column names (a quote left open, or a name longer than "
            f"{csv.field_size_limit()} characters)"
        ) from None
    for j, name in enumerate(names):
        if not name:
            raise DatasetFormatError(f"CSV header: column {j + 1} has no name")
    return names, delimiter, (end + 1 if end >= 0 else len(content))


def _locate_error(content: bytes, delimiter: str, names: list[str]) -> str:
    """Slow path, only after loadtxt failed: find the first bad line and column."""
    text = io.TextIOWrapper(io.BytesIO(content), encoding="utf-8-sig", errors="replace", newline="")
    reader = csv.reader(text, delimiter=delimiter)
    next(reader, None)
    for fields in reader:
        if not fields or all(not f.strip() for f in fields):
            continue
        line = reader.line_num
        if len(fields) != len(names):
            return f"CSV line {line} has {len(fields)} values, the header has {len(names)} columns"
        for j, value in enumerate(fields):
            try:
                float(value)
            except ValueError:
                return f"CSV line {line}, column {names[j]!r} (column {j + 1}): {value.strip()!r} is not a number"
    return ""


def _label_count_hint(X: np.ndarray, feature_names: list[str], options: ParseOptions) -> str | None:
    """The 0/1 features next to a block chosen by ``label_count`` (see ``hints.label_count_hint``)."""
    if options.label_count is None:
        return None
    return label_count_hint(
        feature_names,
        lambda j: is_binary_column(X[:, j]),
        options.label_count,
        at_end=options.label_location == "end",
    )


def _check_unique(names: list[str]) -> None:
    """Refuse a repeated column name (hinting at a header row that holds data)."""
    dupes = sorted(name for name, count in Counter(names).items() if count > 1)
    if dupes:
        numeric = numeric_header_hint(names)
        raise DatasetFormatError(
            f"CSV header: column name {dupes[0]!r} appears more than once" + (f"; {numeric}" if numeric else "")
        )


def _label_indices(names: list[str], options: ParseOptions) -> list[int]:
    """Column indices of the labels, in header order, from ``label_columns`` or ``label_count``."""
    if options.label_columns:
        present = set(names)
        missing = [c for c in options.label_columns if c not in present]
        if missing:
            raise DatasetFormatError(
                f"label_columns names column(s) not in the CSV header: {', '.join(repr(m) for m in missing[:5])}"
            )
        wanted = set(options.label_columns)
        return [j for j, name in enumerate(names) if name in wanted]
    if options.label_count is not None:
        if options.label_count >= len(names):
            raise DatasetFormatError(
                f"label_count={options.label_count} but the CSV has only {len(names)} columns "
                "(at least one must remain a feature)"
            )
        q = options.label_count
        return list(range(len(names) - q, len(names))) if options.label_location == "end" else list(range(q))
    raise DatasetFormatError("CSV needs label_columns (names) or label_count to find the labels")


def _load(content: bytes, start: int, delimiter: str, names: list[str]) -> np.ndarray:
    """The values after the header (byte offset ``start``), one row per line, as float64."""
    body = io.BytesIO(content)
    body.seek(start)
    try:
        data = np.loadtxt(
            body,
            delimiter=delimiter,
            dtype=np.float64,
            ndmin=2,
            comments=None,
            quotechar='"',
            encoding="utf-8",
        )
    except MemoryError:
        raise
    except Exception as exc:  # untrusted text: any loader error is a format error (never the loader's text)
        located = _locate_error(content, delimiter, names)
        raise DatasetFormatError(located or "CSV: the data rows cannot be read as numbers") from exc
    if data.shape[1] != len(names):
        raise DatasetFormatError(f"CSV rows have {data.shape[1]} values, the header has {len(names)} columns")
    return data


def parse_csv(content: bytes, *, options: ParseOptions, limits: DatasetLimits | None = None) -> ParsedDataset:
    limits = limits or DatasetLimits()
    if _BARE_CR.search(content):
        content = _LINE_END.sub(b"\n", content)
    names, delimiter, start = _header(content)
    limits.check_columns(len(names))  # before any per-column work
    _check_unique(names)
    label_idx = _label_indices(names, options)
    if not _NON_SPACE.search(content, start):
        raise DatasetFormatError("CSV has a header but no data rows; at least 2 samples are needed")
    limits.check_labels(len(label_idx))
    limits.check_features(len(names) - len(label_idx))
    limits.check_cells(content.count(b"\n", start) + 1, len(names), "up to ")
    data = _load(content, start, delimiter, names)

    label_set = set(label_idx)
    feature_idx = [j for j in range(len(names)) if j not in label_set]
    X, Y = data[:, feature_idx], data[:, label_idx]
    del data
    feature_names = [names[j] for j in feature_idx]
    warnings = [hint for hint in (numeric_header_hint(names), _label_count_hint(X, feature_names, options)) if hint]
    return finalize(
        X,
        Y,
        feature_names,
        [names[j] for j in label_idx],
        warnings,
        lambda i: f"data row {i + 1}",
        limits,
    )
