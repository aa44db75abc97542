"""Multi-label LIBSVM / svmlight (``l1,l2 idx:val idx:val ...``), read with scikit-learn's
``load_svmlight_file(multilabel=True)``.

Feature indices may be 0- or 1-based (scikit-learn's ``zero_based="auto"``). Label ids must be
non-negative integers and are 0-based label columns: ``q`` is ``label_count`` when given, else
the largest id + 1. A line with no label id is an empty label set. Names are generated:
``f0, f1, ...`` for features and ``l0, l1, ...`` for labels (``l<id>``).

The features stay the sparse (CSR) matrix the loader reads (memory proportional to the file);
the declared ``n_features`` / ``label_count`` and the discovered dimensions (largest index,
largest label id) and the stored values (non-zeros, plus the 0/1 label table) are checked
against ``DatasetLimits`` before the label table is built: one line ``0 1:1 30000000:1`` must
not become a 30-million-column table.
"""

from __future__ import annotations

import io
import re

import numpy as np
from sklearn.datasets import load_svmlight_file

from .common import DatasetFormatError, ParsedDataset, ParseOptions, generated_names
from .limits import DatasetLimits, check_dimensions
from .validation import finalize

_INDEX = re.compile(rb"(\d+):")


def parse_libsvm(content: bytes, *, options: ParseOptions, limits: DatasetLimits | None = None) -> ParsedDataset:
    limits = limits or DatasetLimits()
    if options.n_features is not None:
        limits.check_features(options.n_features, "features (n_features)")
    if options.label_count is not None:
        limits.check_labels(options.label_count, "labels (label_count)")
    try:
        X, y = load_svmlight_file(
            io.BytesIO(content),
            n_features=options.n_features,
            multilabel=True,
            dtype=np.float64,
            zero_based="auto",
        )
    except MemoryError:
        raise
    except Exception as exc:  # untrusted text: any loader error is a format error
        raise DatasetFormatError(_loader_message(exc, content, options.n_features)) from exc

    n = X.shape[0]
    lengths = np.fromiter((len(labels) for labels in y), dtype=np.int64, count=n)
    ids = np.fromiter((v for labels in y for v in labels), dtype=np.float64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(n), lengths)
    if ids.size:
        bad = (ids < 0) | (ids != np.round(ids))
        if bad.any():
            k = int(np.argmax(bad))
            raise DatasetFormatError(
                f"LIBSVM line {int(rows[k]) + 1}: label id {ids[k]:g} is not a non-negative integer"
            )
    q = int(ids.max()) + 1 if ids.size else 0
    if options.label_count is not None:
        if q > options.label_count:
            k = int(np.argmax(ids >= options.label_count))
            raise DatasetFormatError(
                f"LIBSVM line {int(rows[k]) + 1}: label id {int(ids[k])} is out of range for "
                f"label_count={options.label_count} (ids are 0-based)"
            )
        q = options.label_count
    check_dimensions(limits, n, X.shape[1], q, int(X.nnz))
    Y = np.zeros((n, q), dtype=np.uint8)
    Y[rows, ids.astype(np.intp)] = 1
    return finalize(
        X,
        Y,
        generated_names("f", X.shape[1]),
        generated_names("l", q),
        [],
        lambda i: f"line {i + 1}",
        limits,
    )


def _loader_message(exc: Exception, content: bytes, n_features: int | None) -> str:
    """The loader's complaint in the format's own terms: scikit-learn's texts (and Python's
    conversion errors, ``invalid literal for int() with base 10: ...``) are never shown."""
    text = str(exc)
    if "n_features" in text and n_features is not None:
        return (
            f"LIBSVM: a feature index is larger than n_features={n_features}; give a larger n_features, or leave it "
            "out to use the largest index"
        )
    if "sorted and unique" in text:
        line = _first_unordered_line(content)
        where = f" (line {line})" if line is not None else ""
        return f"LIBSVM: the feature indices of a line must increase, each given once{where}"
    if "Invalid index" in text:
        return "LIBSVM: a feature index is negative; indices are 1-based (or 0-based throughout the file)"
    return "LIBSVM: cannot parse the file: expected lines 'l1,l2 idx:val idx:val ...' (comma-separated integer labels, then feature index:value pairs)"


def _first_unordered_line(content: bytes) -> int | None:
    """The first line whose feature indices do not strictly increase (read only for the message)."""
    for number, line in enumerate(content.splitlines(), start=1):
        indices = [int(index) for index in _INDEX.findall(line.split(b"#", 1)[0])]
        if any(b <= a for a, b in zip(indices, indices[1:], strict=False)):
            return number
    return None
