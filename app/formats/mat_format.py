"""MATLAB .mat files (v4/v5/v7; not v7.3/HDF5), read with ``scipy.io.loadmat``.

Layouts, tried in this order:

* LDL (Geng's collection): ``features`` (n x d) and ``labels`` (n x c, distributions);
* train/test (the ML-kNN / LAMDA layout): ``train_data`` (n x d), ``train_target`` (q x n, in
  {-1,+1} or 0/1), ``test_data``, ``test_target``; ``part`` picks the half;
* single set (MLL toolbox): ``data`` (n x d) and ``target`` (q x n).

Targets are label-major (q x n) in the last two layouts; a target that is n x q instead (its
first dimension matches the number of rows and the second does not) is accepted with a warning.
Sparse matrices are densified. Names are generated (``f0, ...``, ``l0, ...``). Only the
variables of these layouts are read, and each is checked against ``DatasetLimits.max_cells``
from its header before it is inflated (see ``_mat_reader``).

``loadmat`` runs in a child process (see :func:`load_mat_variables`): scipy 1.17's reader
segfaults on some corrupt files (found by fuzzing, e.g. an invalid data-type code in a variable's
data tag), which would take the whole service down. The child costs about half a second per MAT
upload.
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np

from .common import DatasetFormatError, DatasetTooLarge, ParsedDataset, ParseOptions, generated_names
from .limits import DatasetLimits
from .validation import finalize

log = logging.getLogger("labelserve.formats")
_READER = Path(__file__).with_name("_mat_reader.py")


def load_mat_variables(
    content: bytes, part: str = "train", limits: DatasetLimits | None = None
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The layout variables of a MAT file: numeric ones (sparse ones densified), the dtype of the
    others, and ``"not read"`` for any other variable the file holds.

    ``scipy.io.loadmat`` runs in a child process (``_mat_reader.py``) because it can crash the
    interpreter on corrupt files; the arrays come back as an ``.npz`` read without pickle.
    """
    limits = limits or DatasetLimits()
    command = [sys.executable, str(_READER), str(limits.max_cells), part]
    try:
        proc = subprocess.run(command, input=content, capture_output=True, check=False)
    except OSError as exc:
        raise RuntimeError(f"cannot start the MAT reader process: {exc}") from exc
    message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    detail = message[-1] if message else ""
    if proc.returncode == 4:
        raise DatasetTooLarge(detail)
    if proc.returncode in (2, 3):  # the reader's own text (scipy's) is logged, never answered
        log.info("the MAT reader refused the file", extra={"detail": detail[:500]})
    if proc.returncode == 3:
        raise DatasetFormatError("MAT: MATLAB v7.3 (HDF5) files are not supported, save with -v7")
    if proc.returncode == 2:
        raise DatasetFormatError("MAT: not a readable MATLAB file: it is corrupt or not a MATLAB v4-v7 file")
    if proc.returncode != 0:
        raise DatasetFormatError(
            f"MAT: the MATLAB reader failed on this file (exit status {proc.returncode}); it is "
            "corrupt or not a MATLAB v4-v7 file"
        )
    with np.load(io.BytesIO(proc.stdout), allow_pickle=False) as npz:
        meta = json.loads(str(npz["arr_0"]))
        arrays = {name: npz[f"arr_{k + 1}"] for k, name in enumerate(meta["names"])}
    return arrays, meta["other"] | dict.fromkeys(meta["skipped"], "not read")


def _matrix(variables: dict[str, np.ndarray], key: str) -> np.ndarray:
    value = variables[key]
    if value.ndim != 2:
        raise DatasetFormatError(f"MAT variable {key!r} must be 2-D, got shape {value.shape}")
    return value.astype(np.float64, copy=False)


def _label_major(target: np.ndarray, n: int, key: str, warnings: list[str]) -> np.ndarray:
    if target.shape[1] == n:
        return target.T
    if target.shape[0] == n:
        warnings.append(f"{key} is n x q (samples in rows), not q x n; read it that way")
        return target
    raise DatasetFormatError(f"MAT variable {key!r} has shape {target.shape}; expected q x {n} (one column per sample)")


def parse_mat(content: bytes, *, options: ParseOptions, limits: DatasetLimits | None = None) -> ParsedDataset:
    limits = limits or DatasetLimits()
    variables, other = load_mat_variables(content, options.part, limits)
    for key in ("features", "labels", f"{options.part}_data", f"{options.part}_target", "data", "target"):
        if key in other:
            raise DatasetFormatError(f"MAT variable {key!r} is not a numeric matrix (numpy dtype {other[key]})")
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
        found = sorted(set(variables) | set(other))
        raise DatasetFormatError(
            f"MAT file holds {found or 'no variables'}; expected 'features' and 'labels' (LDL), "
            f"'{options.part}_data' and '{options.part}_target' (train/test layout, part="
            f"{options.part!r}), or 'data' and 'target'"
        )
    return finalize(X, Y, generated_names("f", X.shape[1]), generated_names("l", Y.shape[1]), warnings, limits=limits)
