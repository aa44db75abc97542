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

import numpy as np
from sklearn.datasets import load_svmlight_file

from .common import DatasetFormatError, ParsedDataset, ParseOptions, generated_names
from .limits import DatasetLimits, check_dimensions
from .validation import finalize


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
        raise DatasetFormatError(_loader_message(exc)) from exc

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


def _loader_message(exc: Exception) -> str:
    """The loader's complaint in the format's own terms.

    scikit-learn's messages about indices and ``n_features`` speak of the file and are kept;
    Python's conversion errors (``invalid literal for int() with base 10: ...``) are not
    meaningful to a client and are replaced by what the format expects.
    """
    text = str(exc)
    if "n_features" in text or "index" in text.lower():
        return f"LIBSVM: {text}"
    return "LIBSVM: cannot parse the file: expected lines 'l1,l2 idx:val idx:val ...' (comma-separated integer labels, then feature index:value pairs)"
