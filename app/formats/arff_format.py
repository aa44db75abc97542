"""ARFF (Mulan / MEKA / WEKA), dense and sparse, read with liac-arff.

Which attributes are labels, in order of precedence:

1. a Mulan XML labels file (``<label name="...">`` elements, nested ones included); labels are
   matched to attributes **by name** (the XML order may differ from the ARFF order, as in yeast)
   after normalising the escaped quotes ``\\'`` and ``\\"`` that some ARFF headers keep in names
   (birds' ``'Swainson\\'s Thrush'``);
2. ``label_columns`` (attribute names);
3. ``label_count`` + ``label_location`` (the last / first attributes);
4. a MEKA header, ``@relation 'name: -C N'``: N > 0 means the first N attributes are the labels,
   N < 0 the last |N| (MEKA's convention).

Label columns keep the ARFF attribute order.

Attribute encoding:

* numeric / integer / real: as is;
* nominal: if every declared value is a number (``{0,1}``, flags' integer codes), the number;
  else if the two declared values are a yes/no pair (``{YES,NO}``, ``{true,false}``, ...), 1 for
  the yes-like value and 0 for the other; else the 0-based position in the declaration (ordinal,
  with a warning);
* string attributes are dropped with a warning, and so is an identifier-like nominal feature (no
  numeric values, more than two declared values, at least ``ID_MIN_ROWS`` rows and a different
  value in every row, as genbase's ``protein``);
* missing values (``?``) are rejected, naming the line and the attribute;
* sparse rows: omitted values are 0 for numeric attributes and the first declared value for
  nominal ones (WEKA's rule, as liac-arff implements it).

A file whose data rows are all sparse is read with liac-arff's COO return type into a CSR
feature matrix and a uint8 label table (``arff_sparse``): never expanded to its dense table,
and the limits count its stored values. Dense rows are streamed (liac-arff's generator mode)
into numpy blocks, so memory is about the size of the final float64 matrix, not of a list of
Python objects per value. The header is checked
against ``DatasetLimits`` (attribute and label counts) before the first row is read, and the
rows read so far times the columns kept are checked as the rows stream in, so a small sparse
file declaring many attributes is refused before it is expanded. Every check is linear in the
number of attributes and labels.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from operator import itemgetter

import arff
import numpy as np
import scipy.sparse as sp

from .arff_sparse import (
    DataLines,
    SparseColumns,
    data_lines,
    missing_error,
    repeat_error,
    repeated_in_text,
    simple_columns,
)
from .common import DatasetFormatError, ParsedDataset, ParseOptions
from .hints import binary_columns, label_count_hint
from .limits import DatasetLimits
from .validation import finalize

ID_MIN_ROWS = 10
BLOCK_ROWS = 4096
# values per block of decoded rows: they are Python floats until the block becomes an array
BLOCK_VALUES = 1 << 20

_BOOLEAN_PAIRS = {
    frozenset({"yes", "no"}): "yes",
    frozenset({"y", "n"}): "y",
    frozenset({"true", "false"}): "true",
    frozenset({"t", "f"}): "t",
    frozenset({"positive", "negative"}): "positive",
    frozenset({"pos", "neg"}): "pos",
    frozenset({"on", "off"}): "on",
}
_MEKA_C = re.compile(r"(?:^|[\s:])-C\s+(-?\d+)\b")


def normalise_name(name: str) -> str:
    """Undo the backslash escapes liac-arff leaves in quoted attribute names."""
    return name.replace("\\'", "'").replace('\\"', '"').strip()


def _nominal_codes(values: list[str]) -> tuple[np.ndarray, str]:
    """Numeric value of each declared nominal value, and how it was obtained."""
    try:
        return np.array([float(v) for v in values], dtype=np.float64), "numeric"
    except ValueError:
        pass
    lowered = [v.strip().lower() for v in values]
    truthy = _BOOLEAN_PAIRS.get(frozenset(lowered)) if len(values) == 2 else None
    if truthy is not None:
        return np.array([1.0 if v == truthy else 0.0 for v in lowered]), "boolean"
    return np.arange(len(values), dtype=np.float64), "ordinal"


# what each of liac-arff's errors means, in the service's words (its own texts are the library's)
_ARFF_FAULTS: dict[type[Exception], str] = {
    arff.BadRelationFormat: "the @relation line is malformed",
    arff.BadAttributeFormat: "an @attribute declaration is malformed",
    arff.BadAttributeName: "an attribute name is declared twice",
    arff.BadAttributeType: "an @attribute has an unknown type (numeric, real, integer, string, date or {a,b,...})",
    arff.BadDataFormat: "a data row does not match the declared attributes",
    arff.BadLayout: "the file is not laid out as @relation, @attribute lines, then @data",
    arff.BadNominalFormatting: "a nominal value holding a space is not quoted",
    arff.BadNominalValue: "a value is not among its nominal attribute's declared values",
    arff.BadNumericalValue: "a value of a numeric attribute is not a number",
    arff.BadStringValue: "a string value holding a space is not quoted",
}


_UNDECLARED = re.compile(r"^Data value (.+) not found in nominal declaration")


def _describe(exc: Exception, line: int) -> str:
    """What is wrong at ``line``, in the service's words: liac-arff's texts (and any other
    library's, such as ``could not convert string to float``) are never shown; the value at
    fault is, when it is a nominal value the header does not declare."""
    fault = next((text for kind, text in _ARFF_FAULTS.items() if isinstance(exc, kind)), "it cannot be read")
    value = _UNDECLARED.match(str(getattr(exc, "message", "") or ""))
    return f"{fault} (line {line}): {value.group(1)!r}" if value else f"{fault} (line {line})"


def _lines(content: bytes, encoding: str) -> Iterator[str]:
    return iter(io.TextIOWrapper(io.BytesIO(content), encoding=encoding, newline=None))


def parse_mulan_xml(labels_file: bytes) -> list[str]:
    """Label names of a Mulan XML labels file, in document order."""
    try:
        root = ET.fromstring(labels_file)
    except ET.ParseError as exc:
        line, column = exc.position
        raise DatasetFormatError(
            f"labels file is not valid XML (at line {line}, column {column + 1}); it must be Mulan's "
            '<labels><label name="..."/>...</labels>'
        ) from None
    names = [
        normalise_name(el.attrib["name"])
        for el in root.iter()
        if el.tag.rsplit("}", 1)[-1] == "label" and "name" in el.attrib
    ]
    if not names:
        raise DatasetFormatError("labels file lists no <label name=...> element")
    dupes = sorted(name for name, count in Counter(names).items() if count > 1)
    if dupes:
        raise DatasetFormatError(f"labels file lists {dupes[0]!r} more than once")
    return names


def _label_indices(names: list[str], relation: str, labels_file: bytes | None, options: ParseOptions) -> list[int]:
    """Attribute indices of the labels, in ARFF order (precedence: see the module docstring)."""
    n_attr = len(names)
    position = {name: j for j, name in enumerate(names)}

    def by_name(wanted: list[str], source: str) -> list[int]:
        missing = [w for w in wanted if w not in position]
        if missing:
            raise DatasetFormatError(
                f"{source} names {len(missing)} label(s) that are not attributes of the ARFF "
                f"file: {', '.join(repr(m) for m in missing[:5])}"
            )
        return sorted(position[w] for w in wanted)

    def by_count(count: int, at_end: bool, source: str) -> list[int]:
        if count >= n_attr:
            raise DatasetFormatError(
                f"{source} asks for {count} label attributes but the file has only {n_attr} "
                "attributes (at least one must remain a feature)"
            )
        return list(range(n_attr - count, n_attr)) if at_end else list(range(count))

    if labels_file is not None:
        return by_name(parse_mulan_xml(labels_file), "the labels file")
    if options.label_columns:
        wanted = [normalise_name(c) for c in options.label_columns]
        return by_name(wanted, "label_columns")
    if options.label_count is not None:
        return by_count(options.label_count, options.label_location == "end", "label_count")
    match = _MEKA_C.search(relation)
    if match:
        c = int(match.group(1))
        if c == 0:
            raise DatasetFormatError("MEKA header '-C 0' declares no label attributes")
        return by_count(abs(c), c < 0, f"the MEKA header (-C {c})")
    raise DatasetFormatError(
        "cannot tell which ARFF attributes are labels: upload a Mulan XML labels_file, give "
        "label_count (with label_location) or label_columns, or use a MEKA header "
        "(@relation 'name: -C N')"
    )


def _read_rows(
    rows: Iterator[list], decoder: arff.ArffDecoder, keep: list[int], limits: DatasetLimits
) -> tuple[list[np.ndarray], np.ndarray]:
    """Stream decoded rows into float64 blocks holding the ``keep`` columns (nominal values as
    their declaration index, missing as nan); also return each row's line number (for error
    messages). Blocks hold at most ``BLOCK_VALUES`` values, and the rows read so far are checked
    against the cell limit at every block."""
    pick = itemgetter(*keep) if len(keep) > 1 else (lambda row: (row[keep[0]],))
    block_rows = max(1, min(BLOCK_ROWS, BLOCK_VALUES // len(keep)))
    blocks: list[np.ndarray] = []
    lines: list[int] = []
    block: list[tuple] = []
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except (UnicodeDecodeError, MemoryError):
            raise
        except Exception as exc:  # liac-arff also lets ValueError/TypeError/... through
            raise DatasetFormatError(f"ARFF data: {_describe(exc, decoder._current_line)}") from exc
        block.append(pick(row))
        lines.append(decoder._current_line)
        if len(block) == block_rows:
            limits.check_cells(len(lines), len(keep), "at least ")
            blocks.append(np.array(block, dtype=np.float64))
            block = []
    if block:
        limits.check_cells(len(lines), len(keep))
        blocks.append(np.array(block, dtype=np.float64))
    return blocks, np.array(lines, dtype=np.int64)


def _decode(
    content: bytes, warnings: list[str], limits: DatasetLimits, check_header: Callable[[dict], None]
) -> tuple[dict, list[np.ndarray], np.ndarray, list[int]]:
    """Header, data blocks (string attributes left out), line numbers and kept attribute
    indices, retrying as Latin-1 when the file is not UTF-8. ``check_header`` sees the decoded
    header before any data row is read."""
    for encoding in ("utf-8-sig", "latin-1"):
        decoder = arff.ArffDecoder()
        try:
            obj = decoder.decode(_lines(content, encoding), encode_nominal=True, return_type=arff.DENSE_GEN)
            keep = [j for j, (_, kind) in enumerate(obj["attributes"]) if kind != "STRING"]
            if not keep:
                raise DatasetFormatError("the ARFF file has no numeric or nominal attribute")
            check_header(obj)
            # every line after the header can be at most one row: bound the rows before decoding
            # any (sparse rows of many attributes are slow to expand, even when the limit stops them)
            lines_after = max(content.count(b"\n"), content.count(b"\r")) + 1 - decoder._current_line
            limits.check_cells(lines_after, len(keep), "up to ")
            blocks, lines = _read_rows(obj["data"], decoder, keep, limits)
        except UnicodeDecodeError:
            continue
        except (DatasetFormatError, MemoryError):
            raise
        except Exception as exc:  # untrusted text: any library error is a format error
            raise DatasetFormatError(f"ARFF header: {_describe(exc, decoder._current_line)}") from exc
        if encoding == "latin-1":
            warnings.append("the file is not valid UTF-8; it was read as Latin-1")
        return obj, blocks, lines, keep
    raise AssertionError("latin-1 decodes any byte string")


def _decode_sparse(
    content: bytes,
    lines: DataLines,
    warnings: list[str],
    limits: DatasetLimits,
    check_header: Callable[[dict], None],
    n_labels: Callable[[], int],
) -> tuple[dict, SparseColumns]:
    """Header and stored values of a sparse file, retrying as Latin-1 when it is not UTF-8.

    The header is decoded alone first, so the limits see it (and a bound on the stored values:
    each is at most one comma or one row) before any value is read. Plain rows are read by
    ``arff_sparse.simple_columns``; any other file by liac-arff's COO reader.
    """
    for encoding in ("utf-8-sig", "latin-1"):
        decoder = arff.ArffDecoder()
        try:
            header = decoder.decode(
                _lines(content[: lines.header_end], encoding), encode_nominal=True, return_type=arff.COO
            )
            if all(kind == "STRING" for _, kind in header["attributes"]):
                raise DatasetFormatError("the ARFF file has no numeric or nominal attribute")
            check_header(header)
            n_rows = len(lines.rows)
            limits.check_sparse(n_rows, content.count(b",", lines.header_end) + n_rows, n_labels(), "up to ")
            attributes = header["attributes"]
            dropped = [j for j, (_, kind) in enumerate(attributes) if kind == "STRING"]
            columns = simple_columns(content, lines, attributes) if encoding == "utf-8-sig" else None
            if columns is None:
                decoder = arff.ArffDecoder()
                obj = decoder.decode(_lines(content, encoding), encode_nominal=True, return_type=arff.COO)
                columns = SparseColumns.from_coo(obj["data"], n_rows, dropped)
                repeat = repeated_in_text(content, lines, encoding)
                if repeat is not None:
                    row, j = repeat
                    raise repeat_error(row, j, normalise_name(attributes[j][0]), int(lines.rows[row]))
        except UnicodeDecodeError:
            continue
        except (DatasetFormatError, MemoryError):
            raise
        except Exception as exc:  # untrusted text: any library error is a format error
            where = "data" if decoder._current_line > lines.data_line else "header"
            raise DatasetFormatError(f"ARFF {where}: {_describe(exc, decoder._current_line)}") from exc
        if encoding == "latin-1":
            warnings.append("the file is not valid UTF-8; it was read as Latin-1")
        return header, columns
    raise AssertionError("latin-1 decodes any byte string")


class _HeaderCheck:
    """The decoders' ``check_header``: labels and sizes from the header alone, before any row is
    expanded. Keeps the label attribute indices of the last header it saw."""

    def __init__(self, labels_file: bytes | None, options: ParseOptions, limits: DatasetLimits) -> None:
        self.labels_file = labels_file
        self.options = options
        self.limits = limits
        self.label_idx: list[int] = []

    def __call__(self, header: dict) -> None:
        attributes = header["attributes"]
        self.limits.check_columns(len(attributes))
        label_idx = _label_indices(
            [normalise_name(name) for name, _ in attributes], header["relation"], self.labels_file, self.options
        )
        self.limits.check_labels(len(label_idx))
        self.limits.check_features(sum(1 for _, kind in attributes if kind != "STRING") - len(label_idx))
        self.label_idx = label_idx


def _string_attributes(
    attributes: list[tuple[str, object]], names: list[str], label_set: set[int], warnings: list[str]
) -> list[int]:
    """Indices of the string attributes, which are dropped with a warning; a label may not be one."""
    dropped = [j for j, (_, kind) in enumerate(attributes) if kind == "STRING"]
    for j in dropped:
        if j in label_set:
            raise DatasetFormatError(f"label attribute {names[j]!r} is a string attribute")
    if dropped:
        warnings.append(f"dropped string attribute(s): {', '.join(names[j] for j in dropped)}")
    return dropped


def _nominal_encodings(attributes: list[tuple[str, object]], names: list[str]) -> dict[int, tuple[np.ndarray, str]]:
    """Each nominal attribute's codes and how they were obtained (``_nominal_codes``), in
    attribute order; an empty or '?' declared value is refused."""
    encodings: dict[int, tuple[np.ndarray, str]] = {}
    for j, (_, kind) in enumerate(attributes):
        if not isinstance(kind, list):
            continue
        if any(value is None for value in kind):
            raise DatasetFormatError(f"ARFF header: attribute {names[j]!r} declares an empty or '?' nominal value")
        encodings[j] = _nominal_codes(kind)
    return encodings


def _identifiers(
    encodings: dict[int, tuple[np.ndarray, str]],
    label_set: set[int],
    names: list[str],
    n_rows: int,
    column: Callable[[int], np.ndarray],
    warnings: list[str],
) -> set[int]:
    """The identifier-like ordinal features (see the module docstring), given each encoded
    attribute's ``column``; warns about them and about the ordinal features kept."""
    identifiers: set[int] = set()
    ordinal: list[str] = []
    for j, (codes, how) in encodings.items():
        if how != "ordinal" or j in label_set:
            continue
        # one code per declared value
        if codes.size > 2 and n_rows >= ID_MIN_ROWS and np.unique(column(j)).size == n_rows:
            identifiers.add(j)
        else:
            ordinal.append(names[j])
    for j in sorted(identifiers):
        warnings.append(f"dropped identifier attribute {names[j]!r} (nominal with a different value in every row)")
    if ordinal:
        more = f" and {len(ordinal) - 10} more" if len(ordinal) > 10 else ""
        warnings.append(
            "nominal attribute(s) encoded as the 0-based position of their value in the "
            f"declaration: {', '.join(ordinal[:10])}{more}"
        )
    return identifiers


def _row_describer(line_numbers: np.ndarray) -> Callable[[int], str]:
    """Data row ``i`` and its line in the file, for the messages of ``finalize``."""

    def describe_row(i: int) -> str:
        return f"data row {i + 1} (line {int(line_numbers[i])})" if i < len(line_numbers) else f"row {i + 1}"

    return describe_row


def _parse_sparse(
    content: bytes,
    lines: DataLines,
    labels_file: bytes | None,
    options: ParseOptions,
    limits: DatasetLimits,
) -> ParsedDataset:
    """A file of sparse rows, kept sparse (see ``arff_sparse``)."""
    warnings: list[str] = []
    check_header = _HeaderCheck(labels_file, options, limits)
    header, columns = _decode_sparse(
        content, lines, warnings, limits, check_header, lambda: len(check_header.label_idx)
    )
    attributes = header["attributes"]
    names = [normalise_name(name) for name, _ in attributes]
    label_idx = check_header.label_idx
    label_set = set(label_idx)
    dropped = _string_attributes(attributes, names, label_set, warnings)
    repeat = columns.first_repeat()
    if repeat is not None:
        raise repeat_error(repeat[0], repeat[1], names[repeat[1]], int(lines.rows[repeat[0]]))
    missing = columns.first_missing()
    if missing is not None:
        raise missing_error(missing[0], names[missing[1]], int(lines.rows[missing[0]]))

    encodings = _nominal_encodings(attributes, names)
    columns.encode_nominal({j: codes for j, (codes, _) in encodings.items()})
    identifiers = _identifiers(encodings, label_set, names, len(lines.rows), columns.column, warnings)
    feature_idx = [
        j for j in range(len(attributes)) if j not in label_set and j not in identifiers and j not in dropped
    ]
    X = columns.features(feature_idx, len(attributes))
    Y = columns.labels(label_idx, len(attributes))
    del columns
    by_count = labels_file is None and not options.label_columns
    return _finalize(X, Y, names, attributes, feature_idx, label_idx, by_count, warnings, lines.rows, limits)


def _check_missing(
    blocks: list[np.ndarray], names: list[str], keep: list[int], describe_row: Callable[[int], str]
) -> None:
    """Refuse the first missing value ('?', decoded as nan) in file order."""
    first_row = 0
    for block in blocks:
        missing = np.isnan(block)
        if missing.any():
            i, c = (int(v) for v in np.argwhere(missing)[0])
            raise DatasetFormatError(
                f"missing value '?' for attribute {names[keep[c]]!r} at "
                f"{describe_row(first_row + i)}; missing values are not supported"
            )
        first_row += block.shape[0]


def _encode_blocks(
    blocks: list[np.ndarray], encodings: dict[int, tuple[np.ndarray, str]], column: dict[int, int]
) -> None:
    """Replace each nominal attribute's declaration index by its numeric value, in place."""
    for j, (codes, _) in encodings.items():
        c = column[j]
        for block in blocks:
            block[:, c] = codes[block[:, c].astype(np.intp)]


def _split_blocks(
    blocks: list[np.ndarray], n_rows: int, feature_cols: list[int], label_cols: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The feature and label tables of the blocks, filled block by block and freeing each (the
    list is emptied), so the peak stays near one copy."""
    X = np.empty((n_rows, len(feature_cols)))
    Y = np.empty((n_rows, len(label_cols)))
    start = 0
    while blocks:
        block = blocks.pop(0)
        stop = start + block.shape[0]
        X[start:stop] = block[:, feature_cols]
        Y[start:stop] = block[:, label_cols]
        start = stop
    return X, Y


def _parse_dense(
    content: bytes, labels_file: bytes | None, options: ParseOptions, limits: DatasetLimits
) -> ParsedDataset:
    """A file with dense rows, streamed into float64 blocks (see ``_read_rows``)."""
    warnings: list[str] = []
    check_header = _HeaderCheck(labels_file, options, limits)
    obj, blocks, lines, keep = _decode(content, warnings, limits, check_header)
    attributes = obj["attributes"]
    names = [normalise_name(name) for name, _ in attributes]
    label_idx = check_header.label_idx
    label_set = set(label_idx)
    _string_attributes(attributes, names, label_set, warnings)
    _check_missing(blocks, names, keep, _row_describer(lines))

    column = {j: c for c, j in enumerate(keep)}  # attribute index -> block column
    encodings = _nominal_encodings(attributes, names)
    _encode_blocks(blocks, encodings, column)
    identifiers = _identifiers(
        encodings,
        label_set,
        names,
        len(lines),
        lambda j: np.concatenate([block[:, column[j]] for block in blocks]),
        warnings,
    )
    feature_idx = [j for j in keep if j not in label_set and j not in identifiers]
    X, Y = _split_blocks(blocks, len(lines), [column[j] for j in feature_idx], [column[j] for j in label_idx])
    by_count = labels_file is None and not options.label_columns
    return _finalize(X, Y, names, attributes, feature_idx, label_idx, by_count, warnings, lines, limits)


def _declared_binary(kind: object) -> bool:
    return isinstance(kind, list) and sorted(str(v).strip() for v in kind) == ["0", "1"]


def _label_count_hint(
    X: np.ndarray | sp.csr_matrix,
    feature_names: list[str],
    feature_idx: list[int],
    attributes: list[tuple[str, object]],
    label_idx: list[int],
) -> str | None:
    """Attributes declared ``{0,1}`` (or holding only 0/1) next to a label block chosen by
    ``label_count`` or a MEKA header: labels the count left out, most likely."""
    if not feature_idx:  # finalize refuses a dataset without features
        return None
    at_end = label_idx[-1] == len(attributes) - 1
    edge = feature_idx[-1] if at_end else feature_idx[0]
    holds_binary = binary_columns(X)
    return label_count_hint(
        feature_names,
        lambda j: _declared_binary(attributes[feature_idx[j]][1]) or holds_binary(j),
        len(label_idx),
        at_end=at_end,
        declared=" (declared {0,1})" if _declared_binary(attributes[edge][1]) else "",
    )


def _finalize(
    X: np.ndarray | sp.csr_matrix,
    Y: np.ndarray,
    names: list[str],
    attributes: list[tuple[str, object]],
    feature_idx: list[int],
    label_idx: list[int],
    by_count: bool,
    warnings: list[str],
    line_numbers: np.ndarray,
    limits: DatasetLimits,
) -> ParsedDataset:
    """``finalize`` the tables, after the label-count hint when the labels are a block chosen by
    a count (``by_count``)."""
    feature_names = [names[j] for j in feature_idx]
    if by_count:
        hint = _label_count_hint(X, feature_names, feature_idx, attributes, label_idx)
        if hint:
            warnings.append(hint)
    return finalize(X, Y, feature_names, [names[j] for j in label_idx], warnings, _row_describer(line_numbers), limits)


def parse_arff(
    content: bytes, *, labels_file: bytes | None, options: ParseOptions, limits: DatasetLimits | None = None
) -> ParsedDataset:
    limits = limits or DatasetLimits()
    layout = data_lines(content)
    if layout.sparse:
        return _parse_sparse(content, layout, labels_file, options, limits)
    return _parse_dense(content, labels_file, options, limits)
