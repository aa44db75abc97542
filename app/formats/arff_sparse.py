"""Sparse ARFF rows (``{index value, ...}``) into a CSR feature matrix and a 0/1 label table.

liac-arff's COO return type decodes the rows into three flat lists (values, rows, columns)
without expanding a row to every attribute, so a sparse file becomes a sparse matrix in time
and memory proportional to its non-zeros. The dense path (``arff_format._read_rows``) would
build every cell: 4880 x 1995 for bibtex's training part, 1.5 us per cell.

WEKA's rule for an omitted value is the attribute's first declared value (0 for a numeric
attribute). For a nominal attribute whose first value is not 0 (``{1,0}``, ``{yes,no}`` read as
1/0) the omitted cells are therefore not zeros; such columns are filled in full (n values each),
which keeps the result exact and costs only for the columns that need it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .common import DatasetFormatError

_DATA = re.compile(rb"@data\b", re.IGNORECASE)
# a sparse row of plain ``index value`` pairs: no quotes, escapes, braces or comments in a value
_SIMPLE_ROW = re.compile(rb"\{\s*(?:\d+\s+[^\s,{}'\"%]+\s*(?:,\s*\d+\s+[^\s,{}'\"%]+\s*)*)?\}")
_PAIR = re.compile(rb"(\d+)\s+([^\s,{}'\"%]+)")


@dataclass(frozen=True)
class DataLines:
    """Where the data rows of an ARFF file are: the @data line and each row's 1-based line."""

    data_line: int  # 1-based line of @data (0: none found)
    header_end: int  # byte offset just past the @data line
    rows: np.ndarray  # line number of each data row
    sparse: bool  # every data row is a sparse row ({...})


def data_lines(content: bytes) -> DataLines:
    """Scan the file once for its data rows (blank lines and ``%`` comments are not rows, as for
    liac-arff; lines are split as universal newlines split them)."""
    offset = 0
    data_line = 0
    lines = content.splitlines(keepends=True)
    for number, raw in enumerate(lines, start=1):
        offset += len(raw)
        stripped = raw.strip().lstrip(b"\xef\xbb\xbf") if number == 1 else raw.strip()
        if _DATA.match(stripped):
            data_line = number
            break
    if not data_line:
        return DataLines(0, len(content), np.empty(0, np.int64), False)
    rows: list[int] = []
    sparse = True
    for number, raw in enumerate(lines[data_line:], start=data_line + 1):
        stripped = raw.strip()
        if stripped and not stripped.startswith(b"%"):
            rows.append(number)
            sparse = sparse and stripped.startswith(b"{")
    return DataLines(data_line, offset, np.array(rows, dtype=np.int64), sparse and bool(rows))


def simple_columns(content: bytes, lines: DataLines, attributes: list[tuple[str, object]]) -> SparseColumns | None:
    """The triplets liac-arff's COO reader would give (string attributes left out), read with
    C-speed regular expressions, when every row is plain ``{index value, ...}`` pairs of numbers
    or declared (UTF-8) nominal values; None otherwise (quotes, escapes, an unknown index, an
    undeclared value: liac-arff then reads the file, and words any error). A repeated index is
    left for ``SparseColumns.first_repeat`` to find, whichever reader read the file.

    liac-arff converts each value through a Python call (1.5 us a value on bibtex); here only a
    nominal value costs a dictionary lookup.
    """
    body = content[lines.header_end :].splitlines()
    first = lines.data_line + 1  # the line number of body[0]
    pairs: list[tuple[bytes, bytes]] = []
    counts = np.empty(len(lines.rows), dtype=np.int64)
    for i, number in enumerate(lines.rows.tolist()):
        row = body[number - first].strip()
        if _SIMPLE_ROW.fullmatch(row) is None:
            return None
        found = _PAIR.findall(row)
        counts[i] = len(found)
        pairs.extend(found)
    n_attr = len(attributes)
    table = np.array(pairs, dtype=np.bytes_).reshape(-1, 2)
    cols = table[:, 0].astype(np.int64)
    tokens = table[:, 1]
    rows = np.repeat(np.arange(len(lines.rows)), counts)
    if cols.size and cols.max() >= n_attr:
        return None
    kinds = [kind for _, kind in attributes]
    kept = np.array([kind != "STRING" for kind in kinds], dtype=bool)[cols]
    nominal = np.array([isinstance(kind, list) for kind in kinds], dtype=bool)[cols]
    values = np.empty(cols.size)
    numeric_at = np.flatnonzero(kept & ~nominal)
    numeric = tokens[numeric_at]
    numeric[numeric == b"?"] = b"nan"
    try:
        values[numeric_at] = numeric.astype(np.float64)
    except ValueError:
        return None
    nominal_at = np.flatnonzero(nominal)
    if nominal_at.size:
        # few distinct nominal tokens: a (token x attribute) table of declaration indices
        distinct, inverse = np.unique(tokens[nominal_at], return_inverse=True)
        if distinct.size * n_attr > 10_000_000:
            return None
        codes = np.full((distinct.size, n_attr), -1.0)
        position = {token: t for t, token in enumerate(distinct.tolist())}
        for j, kind in enumerate(kinds):
            if isinstance(kind, list):
                for k, value in enumerate(kind):
                    t = position.get(str(value).encode())
                    if t is not None:
                        codes[t, j] = k
        if b"?" in position:
            codes[position[b"?"], :] = np.nan
        found_codes = codes[inverse.reshape(-1), cols[nominal_at]]
        if bool((found_codes < 0).any()):  # a value its attribute does not declare
            return None
        values[nominal_at] = found_codes
    return SparseColumns(values[kept], rows[kept], cols[kept], len(lines.rows))


@dataclass
class SparseColumns:
    """The decoded COO triplets, one entry per stored value, columns being attribute indices."""

    values: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    n_rows: int

    @classmethod
    def from_coo(cls, coo: tuple[list, list, list], n_rows: int, dropped: list[int]) -> SparseColumns:
        data, rows, cols = coo
        rows_a = np.array(rows, dtype=np.int64)
        cols_a = np.array(cols, dtype=np.int64)
        if dropped:  # string attributes: their values are text, left out before the conversion
            keep = ~np.isin(cols_a, dropped)
            data = [value for value, kept in zip(data, keep, strict=True) if kept]
            rows_a, cols_a = rows_a[keep], cols_a[keep]
        values = np.array(data, dtype=np.float64)  # None ('?') becomes nan
        return cls(values, rows_a, cols_a, n_rows)

    def first_repeat(self) -> tuple[int, int] | None:
        """(row, attribute) of the first index given twice in one row, in file order, or None:
        liac-arff takes ``{0 1, 0 2}`` as it is, and the CSR matrix would sum the two values."""
        if self.cols.size < 2:
            return None
        keys = self.rows * (int(self.cols.max()) + 1) + self.cols
        order = np.argsort(keys, kind="stable")  # equal keys keep their file order
        again = order[1:][keys[order][1:] == keys[order][:-1]]
        if again.size == 0:
            return None
        k = int(again.min())
        return int(self.rows[k]), int(self.cols[k])

    def first_missing(self) -> tuple[int, int] | None:
        """(row, attribute) of the first '?' in file order, or None."""
        missing = np.isnan(self.values)
        if not missing.any():
            return None
        k = int(np.argmax(missing))
        return int(self.rows[k]), int(self.cols[k])

    def encode_nominal(self, codes: dict[int, np.ndarray]) -> None:
        """Replace each nominal attribute's declaration index by its numeric value, and fill the
        omitted cells of attributes whose first declared value is not 0."""
        if not codes:
            return
        n_attr = int(max(codes)) + 1
        offsets = np.full(n_attr, -1, dtype=np.int64)
        table: list[np.ndarray] = []
        start = 0
        for j in sorted(codes):
            offsets[j] = start
            table.append(codes[j])
            start += codes[j].size
        lookup = np.concatenate(table)
        in_range = self.cols < n_attr
        nominal = np.zeros(self.cols.size, dtype=bool)
        nominal[in_range] = offsets[self.cols[in_range]] >= 0
        index = self.values[nominal].astype(np.intp)
        self.values[nominal] = lookup[offsets[self.cols[nominal]] + index]
        for j in sorted(j for j, c in codes.items() if c[0] != 0):
            self._fill_column(j, float(codes[j][0]))

    def _fill_column(self, j: int, default: float) -> None:
        here = self.cols == j
        column = np.full(self.n_rows, default)
        column[self.rows[here]] = self.values[here]
        rows = np.flatnonzero(column)
        self.values = np.concatenate([self.values[~here], column[rows]])
        self.rows = np.concatenate([self.rows[~here], rows])
        self.cols = np.concatenate([self.cols[~here], np.full(rows.size, j)])

    def column(self, j: int) -> np.ndarray:
        """Attribute ``j`` in full (n values)."""
        column = np.zeros(self.n_rows)
        here = self.cols == j
        column[self.rows[here]] = self.values[here]
        return column

    def features(self, feature_idx: list[int], n_attr: int) -> sp.csr_matrix:
        """The CSR matrix of the ``feature_idx`` attributes, in that order."""
        position = np.full(n_attr, -1, dtype=np.int64)
        position[feature_idx] = np.arange(len(feature_idx))
        new = position[self.cols]
        kept = (new >= 0) & (self.values != 0)
        return sp.csr_matrix((self.values[kept], (self.rows[kept], new[kept])), shape=(self.n_rows, len(feature_idx)))

    def labels(self, label_idx: list[int], n_attr: int) -> np.ndarray:
        """The label table: uint8 when every stored label value is 0 or 1 (the usual case), else
        float64 for the label checks to judge (distributions, -1/+1, bad values)."""
        position = np.full(n_attr, -1, dtype=np.int64)
        position[label_idx] = np.arange(len(label_idx))
        new = position[self.cols]
        here = new >= 0
        values = self.values[here]
        binary = bool(np.isin(values, (0.0, 1.0)).all())
        Y = np.zeros((self.n_rows, len(label_idx)), dtype=np.uint8 if binary else np.float64)
        Y[self.rows[here], new[here]] = values
        return Y


def missing_error(row: int, name: str, line: int) -> DatasetFormatError:
    return DatasetFormatError(
        f"missing value '?' for attribute {name!r} at data row {row + 1} (line {line}); missing values are not supported"
    )


def repeated_in_text(content: bytes, lines: DataLines, encoding: str) -> tuple[int, int] | None:
    """(data row, index) of the first index given twice in a row, read from the rows' text: for
    the rows liac-arff read (quoted values), since it keeps the last value of a repeated index
    without a word. Commas inside quotes do not split pairs."""
    body = content.splitlines()
    for i, number in enumerate(lines.rows.tolist()):
        seen: set[int] = set()
        for index in _pair_indices(body[number - 1].decode(encoding, "replace").strip()):
            if index in seen:
                return i, index
            seen.add(index)
    return None


def _pair_indices(row: str) -> list[int]:
    """The leading index of each ``index value`` pair of a sparse row ``{...}``."""
    found: list[int] = []
    start, quote, escaped = 1, "", False
    for i, ch in enumerate(row):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in ",}":
            head = row[start:i].split(maxsplit=1)
            if head and head[0].isdigit():
                found.append(int(head[0]))
            start = i + 1
    return found


def repeat_error(row: int, index: int, name: str, line: int) -> DatasetFormatError:
    return DatasetFormatError(
        f"ARFF data: attribute index {index} ({name!r}) is given twice in data row {row + 1} (line {line}); "
        "a sparse row gives each index at most once"
    )
