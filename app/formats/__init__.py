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
``@relation`` line, a LIBSVM first line (``[labels] idx:val ...``), otherwise CSV.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from .arff_format import parse_arff
from .common import DatasetFormatError, DatasetKind, DatasetTooLarge, ParsedDataset, ParseOptions
from .csv_format import parse_csv
from .libsvm_format import parse_libsvm
from .limits import DatasetLimits
from .mat_format import parse_mat

__all__ = [
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


def detect_format(content: bytes, filename: str | None) -> str:
    """``arff``, ``csv``, ``libsvm`` or ``mat`` for an upload (see the module docstring)."""
    if filename:
        by_ext = _EXTENSIONS.get(PurePath(filename).suffix.lower())
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
    try:
        if fmt == "arff":
            return parse_arff(content, labels_file=labels_file, options=options, limits=limits)
        if fmt == "csv":
            return parse_csv(content, options=options, limits=limits)
        if fmt == "libsvm":
            return parse_libsvm(content, options=options, limits=limits)
        return parse_mat(content, options=options, limits=limits)
    except MemoryError:  # the limits keep a dataset well below this; the machine is short of memory
        raise DatasetTooLarge(
            "the dataset does not fit in the memory available for parsing; upload a smaller one or "
            "lower the limits (LABELSERVE_MAX_DATASET_CELLS)"
        ) from None
