"""MATLAB .mat files (v4/v5/v7; not v7.3/HDF5), read with ``scipy.io.loadmat``.

Layouts, tried in this order:

* LDL (Geng's collection): ``features`` (n x d) and ``labels`` (n x c, distributions);
* train/test (the ML-kNN / LAMDA layout): ``train_data`` (n x d), ``train_target`` (q x n, in
  {-1,+1} or 0/1), ``test_data``, ``test_target``; ``part`` picks the half;
* single set (MLL toolbox): ``data`` (n x d) and ``target`` (q x n).

Targets are label-major (q x n) in the last two layouts; a target that is n x q instead (its
first dimension matches the number of rows and the second does not) is accepted with a warning.
Sparse matrices are densified. Names are generated (``f0, ...``, ``l0, ...``).
"""

from __future__ import annotations

import io

import numpy as np
import scipy.io
import scipy.sparse

from .common import DatasetFormatError, ParseOptions, ParsedDataset, generated_names
from .validation import finalize


def _matrix(variables: dict, key: str) -> np.ndarray:
    value = variables[key]
    if scipy.sparse.issparse(value):
        value = value.toarray()
    value = np.asarray(value)
    if value.dtype.kind not in "biuf":
        raise DatasetFormatError(
            f"MAT variable {key!r} is not a numeric matrix (MATLAB class gives numpy dtype "
            f"{value.dtype})"
        )
    if value.ndim != 2:
        raise DatasetFormatError(f"MAT variable {key!r} must be 2-D, got shape {value.shape}")
    return value.astype(np.float64, copy=False)


def _label_major(target: np.ndarray, n: int, key: str, warnings: list[str]) -> np.ndarray:
    if target.shape[1] == n:
        return target.T
    if target.shape[0] == n:
        warnings.append(f"{key} is n x q (samples in rows), not q x n; read it that way")
        return target
    raise DatasetFormatError(
        f"MAT variable {key!r} has shape {target.shape}; expected q x {n} (one column per sample)"
    )


def parse_mat(content: bytes, *, options: ParseOptions) -> ParsedDataset:
    try:
        variables = scipy.io.loadmat(io.BytesIO(content))
    except NotImplementedError as exc:  # v7.3 (HDF5)
        raise DatasetFormatError(
            f"MAT: {exc}; save the file with MATLAB's -v7 option"
        ) from exc
    except Exception as exc:  # untrusted binary: scipy raises many types on corrupt input
        raise DatasetFormatError(
            f"MAT: not a readable MATLAB file ({type(exc).__name__}: {exc})"
        ) from exc

    warnings: list[str] = []
    if "features" in variables and "labels" in variables:
        X = _matrix(variables, "features")
        Y = _matrix(variables, "labels")
        if Y.shape[0] != X.shape[0] and Y.shape[1] == X.shape[0]:
            warnings.append("labels is c x n (samples in columns); transposed")
            Y = Y.T
    elif f"{options.part}_data" in variables and f"{options.part}_target" in variables:
        X = _matrix(variables, f"{options.part}_data")
        key = f"{options.part}_target"
        Y = _label_major(_matrix(variables, key), X.shape[0], key, warnings)
    elif "data" in variables and "target" in variables:
        X = _matrix(variables, "data")
        Y = _label_major(_matrix(variables, "target"), X.shape[0], "target", warnings)
    else:
        found = sorted(k for k in variables if not k.startswith("__"))
        raise DatasetFormatError(
            f"MAT file holds {found or 'no variables'}; expected 'features' and 'labels' (LDL), "
            f"'{options.part}_data' and '{options.part}_target' (train/test layout, part="
            f"{options.part!r}), or 'data' and 'target'"
        )
    return finalize(
        X, Y, generated_names("f", X.shape[1]), generated_names("l", Y.shape[1]), warnings
    )
