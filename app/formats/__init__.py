"""Dataset upload parsers: ARFF, CSV, multi-label LIBSVM and MATLAB .mat.

``parse_dataset(content, filename=..., labels_file=..., options=..., limits=...)`` returns a
validated :class:`ParsedDataset` or raises :class:`DatasetFormatError` (an ``InvalidInput`` and a
``ValueError`` whose message names the problem and its line/row/column: a 422), or its subclass
:class:`DatasetTooLarge` (a ``PayloadTooLarge``: a 413 stating the limit) when the dataset would
exceed :class:`DatasetLimits`; the limits are checked before the dense arrays are allocated. The
benchmarks load the real datasets through the same function, so they exercise the service's
parser.

Parsing is CPU-bound and synchronous: callers on an event loop run it in a worker thread
(``run_in_threadpool``), and every step is linear in the size of the upload.

Format detection (``format="auto"``): the file name extension (``.arff``; ``.csv``/``.tsv``;
``.svm``/``.libsvm``/``.svmlight``; ``.mat``), else the content: a MATLAB header, an ARFF
``@relation`` line, a LIBSVM first line (``[labels] idx:val ...``), otherwise CSV. When that
last guess fails too (a JSON file, prose in a ``.txt``), the error says which formats are
accepted rather than only what the CSV parser stumbled on.

Options that contradict each other (``label_count`` with ``label_columns``, either with a
``labels_file``) or that the format would ignore (``n_features`` for a CSV) are refused with
:class:`ConflictingOptions` naming the fields, instead of being silently resolved.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from app.upload_options import PARSE_OPTIONS

from .arff_format import parse_arff
from .common import DatasetFormatError, DatasetKind, DatasetTooLarge, ParsedDataset, ParseOptions
from .csv_format import parse_csv
from .libsvm_format import parse_libsvm
from .limits import DatasetLimits
from .mat_format import parse_mat

__all__ = [
    "ConflictingOptions",
    "DatasetFormatError",
    "DatasetKind",
    "DatasetLimits",
    "DatasetTooLarge",
    "ParseOptions",
    "ParsedDataset",
    "detect_format",
    "parse_dataset",
]

_EXTENSIONS = {
    ".arff": "arff",
    ".csv": "csv",
    ".tsv": "csv",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
    ".mat": "mat",
}
# optional label list ("0,3" or "1"), then idx:val pairs; matched on the stripped line
_LIBSVM_LINE = re.compile(rb"^(-?\d+(\.\d*)?(\s*,\s*-?\d+(\.\d*)?)*\s+)?\d+:\S+(\s+\d+:\S+)*$")


ACCEPTED_FORMATS = (
    "ARFF (.arff), CSV with a header row (.csv, .tsv), multi-label LIBSVM (.svm, .libsvm, .svmlight) or MATLAB (.mat)"
)


class ConflictingOptions(DatasetFormatError):
    """Upload options that contradict each other or do not apply to the file's format.

    ``fields`` are the options at fault (and the ``labels_file`` or ``format`` they clash with),
    so the HTTP layer can locate the 422 at each of them.
    """

    def __init__(self, message: str, fields: tuple[str, ...]) -> None:
        super().__init__(message)
        self.fields = fields


def _by_extension(filename: str | None) -> str | None:
    return _EXTENSIONS.get(PurePath(filename).suffix.lower()) if filename else None


def detect_format(content: bytes, filename: str | None) -> str:
    """``arff``, ``csv``, ``libsvm`` or ``mat`` for an upload (see the module docstring)."""
    by_ext = _by_extension(filename)
    if by_ext:
        return by_ext
    if content[:6] == b"MATLAB" or content[:4] == b"\x00\x00\x00\x00":
        return "mat"
    head = content[:65536].lstrip(b"\xef\xbb\xbf")
    for raw in head.splitlines():
        line = raw.strip()
        if not line or line.startswith(b"%"):
            continue
        if line[:9].lower() == b"@relation":
            return "arff"
        if _LIBSVM_LINE.match(line):
            return "libsvm"
        break
    return "csv"


def parse_dataset(
    content: bytes,
    *,
    filename: str | None = None,
    labels_file: bytes | None = None,
    options: ParseOptions | None = None,
    limits: DatasetLimits | None = None,
) -> ParsedDataset:
    """Parse and validate one uploaded dataset (``limits``: the defaults of :class:`DatasetLimits`)."""
    options = options or ParseOptions()
    limits = limits or DatasetLimits()
    if not content:
        raise DatasetFormatError("the uploaded file is empty")
    fmt = options.format if options.format != "auto" else detect_format(content, filename)
    if labels_file is not None and fmt != "arff":
        raise DatasetFormatError(f"labels_file (Mulan XML) applies to ARFF only, not {fmt}")
    check_options(options, fmt, has_labels_file=labels_file is not None)
    try:
        if fmt == "arff":
            return parse_arff(content, labels_file=labels_file, options=options, limits=limits)
        if fmt == "csv":
            if options.format == "auto" and _by_extension(filename) is None:
                return _guessed_csv(content, filename, options, limits)
            return parse_csv(content, options=options, limits=limits)
        if fmt == "libsvm":
            return parse_libsvm(content, options=options, limits=limits)
        return parse_mat(content, options=options, limits=limits)
    except MemoryError:  # the limits keep a dataset well below this; the machine is short of memory
        raise DatasetTooLarge(
            "the dataset does not fit in the memory available for parsing; upload a smaller one or "
            "lower the limits (LABELSERVE_MAX_DATASET_CELLS)"
        ) from None


def check_options(options: ParseOptions, fmt: str, *, has_labels_file: bool) -> None:
    """ConflictingOptions for options that contradict each other or that ``fmt`` would ignore.

    Silently preferring one of two contradictory options (or dropping one the format has no use
    for) stores a dataset other than the one the user described. Which formats read an option,
    and which value is its default (what a form sends unasked, so no choice of the user's), is
    declared with the option in ``app.upload_options``.
    """
    if options.label_count is not None and options.label_columns:
        raise ConflictingOptions(
            "label_count and label_columns both choose the label columns; give only one of them",
            ("label_count", "label_columns"),
        )
    chosen = "label_count" if options.label_count is not None else "label_columns" if options.label_columns else None
    if has_labels_file and chosen:
        raise ConflictingOptions(
            f"labels_file names the label attributes and {chosen} chooses them too; give only one of them",
            ("labels_file", chosen),
        )
    given = {option.name for option in PARSE_OPTIONS if option.given(getattr(options, option.name))}
    for option in PARSE_OPTIONS:
        if option.name in given and fmt not in option.formats:
            requested = options.format != "auto"
            raise ConflictingOptions(
                f"{option.name} applies to {', '.join(f.upper() for f in option.formats)} files only; this file is "
                f"read as {fmt.upper()} ({'format=' + fmt if requested else 'detected from its name or content'})",
                (option.name, "format") if requested else (option.name,),
            )
    if "label_location" in given and options.label_count is None:
        raise ConflictingOptions(
            "label_location only applies with label_count (the labels are the last or first label_count columns)",
            ("label_location", "label_count"),
        )


def _guessed_csv(content: bytes, filename: str | None, options: ParseOptions, limits: DatasetLimits) -> ParsedDataset:
    """CSV was only the last guess (no known extension, no recognisable content): when it does not
    parse either, the error says which formats are accepted, and what the file looks like."""
    try:
        return parse_csv(content, options=options, limits=limits)
    except DatasetTooLarge:
        raise
    except DatasetFormatError as exc:
        raise DatasetFormatError(
            f"the file's format is not recognised: {_looks_like(content, filename)}. Accepted formats: "
            f"{ACCEPTED_FORMATS}; name it with the file's extension or the format field "
            f"(read as CSV, it fails: {exc.message})"
        ) from None


def _looks_like(content: bytes, filename: str | None) -> str:
    """What an unrecognised upload seems to be, for the error message."""
    extension = PurePath(filename).suffix.lower() if filename else ""
    named = f"'{extension}' is not a dataset extension" if extension else "the file name has no extension"
    head = content[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if b"\x00" in head:
        return f"{named}, and the content is binary but not a MATLAB file"
    if head[:1] in (b"{", b"["):
        return f"{named}, and the content looks like JSON, which is not a dataset format"
    return f"{named}, and the content is not ARFF (no @relation line), LIBSVM (idx:val pairs) or CSV"
