"""The file layout of a stored dataset (``<sha256>.npz`` in the store's ``datasets`` folder).

A zip of ``.npy`` members, as ``numpy.load`` reads it:

* ``layout``: ``"2"`` (0.1.x files have no such member: ``X``, ``Y`` dense float64 and their
  ``sha256`` by :func:`legacy_digest`; they still load);
* features, dense (``X``, float64) or, when the upload was sparse or its table is mostly zeros,
  CSR (``X_data`` float64, ``X_indices``, ``X_indptr``, ``X_shape``): a sparse file is never
  stored as its dense table (bibtex's training part: 74 MiB dense, under 1 MiB so);
* labels, 0/1 ones packed eight to a byte along each row (``Y_bits``, ``Y_shape``), or
  distributions as float64 (``Y``);
* ``info``: ``[n, d, stored feature values, non-zero feature values]``, so the storage
  form and density are read without reading the arrays;
* ``sha256``: over every other member's name, dtype, shape and bytes (:func:`digest`), verified
  on every read.

Each member is deflated (zlib level 1, fast) only when a sample of it shrinks by a tenth or
more: the indices and 0/1 values of a sparse set compress several times over, the float
measurements of a dense one hardly at all, and compressing them would only cost upload time.
Members are streamed into the zip, never built as a second copy in memory.
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import scipy.sparse as sp

LAYOUT = "2"
#: dense features whose share of non-zeros is below this are stored as CSR (12 bytes a stored
#: value against 8 a cell: smaller below 2/3, and the methods get the same dense table back)
SPARSE_BELOW_DENSITY = 0.25
_SAMPLE_BYTES = 1 << 20
_PAYS = 0.9


class ChecksumMismatch(ValueError):
    """The members of a dataset file do not hash to its recorded sha256."""


@dataclass(frozen=True)
class DatasetStorage:
    """What ``GET /datasets/{id}`` reports of a stored dataset."""

    storage: str  # "dense" or "sparse"
    density: float | None  # non-zero share of the feature table (None: a 0.1.x file)
    stored_bytes: int


@dataclass(frozen=True)
class StoredArrays:
    """A dataset's arrays in their stored form: ``X`` dense or CSR, ``Y`` uint8 0/1 or float64."""

    X: np.ndarray | sp.csr_matrix
    Y: np.ndarray

    @property
    def sparse(self) -> bool:
        return sp.issparse(self.X)

    @property
    def nbytes(self) -> int:
        """The bytes the arrays hold (CSR: values, column indices and row pointers)."""
        X = self.X
        x_bytes = X.nbytes if isinstance(X, np.ndarray) else X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        return int(x_bytes + self.Y.nbytes)

    def copy(self) -> StoredArrays:
        return StoredArrays(self.X.copy(), self.Y.copy())

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """Dense float64 ``X`` and ``Y`` (new arrays: never views of these)."""
        X = np.array(self.X, dtype=np.float64) if isinstance(self.X, np.ndarray) else self.X.toarray()
        return np.ascontiguousarray(X, dtype=np.float64), self.Y.astype(np.float64)


def _members(X: np.ndarray | sp.csr_matrix, Y: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
    """The arrays to store and the number of non-zero features."""
    members: dict[str, np.ndarray] = {"layout": np.array(LAYOUT)}
    n, d = X.shape
    if not sp.issparse(X):
        nonzero = int(np.count_nonzero(X))
        if n * d and nonzero / (n * d) < SPARSE_BELOW_DENSITY:
            X = sp.csr_matrix(X)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        X.eliminate_zeros()
        nonzero = int(X.nnz)
        members |= {
            "X_data": X.data,
            "X_indices": X.indices,
            "X_indptr": X.indptr,
            "X_shape": np.array(X.shape, dtype=np.int64),
        }
        stored = nonzero
    else:
        members["X"] = np.ascontiguousarray(X, dtype=np.float64)
        stored = n * d
    if Y.dtype == np.uint8 or bool(np.isin(Y, (0, 1)).all()):
        members |= {"Y_bits": np.packbits(Y.astype(bool), axis=1), "Y_shape": np.array(Y.shape, dtype=np.int64)}
    else:
        members["Y"] = np.ascontiguousarray(Y, dtype=np.float64)
    members["info"] = np.array([n, d, stored, nonzero], dtype=np.int64)
    return members, nonzero


def digest(members: dict[str, np.ndarray]) -> str:
    """sha256 over the members (sorted by name): name, dtype, shape and C-order bytes of each."""
    h = hashlib.sha256()
    for name in sorted(members):
        array = np.ascontiguousarray(members[name])
        h.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        h.update(array.data if array.dtype.kind != "U" else array.tobytes())
    return h.hexdigest()


def _pays(array: np.ndarray) -> bool:
    sample = np.ascontiguousarray(array).reshape(-1).view(np.uint8)[:_SAMPLE_BYTES].tobytes()
    return len(sample) > 256 and len(zlib.compress(sample, 1)) < _PAYS * len(sample)


def write(fh: IO[bytes], X: np.ndarray | sp.csr_matrix, Y: np.ndarray) -> None:
    """Write the dataset file (the layout of the module docstring) to an open binary file."""
    members, _ = _members(X, Y)
    members["sha256"] = np.array(digest(members))
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, compresslevel=1, allowZip64=True) as zf:
        for name, array in members.items():
            zf.compression = zipfile.ZIP_DEFLATED if array.dtype.kind != "U" and _pays(array) else zipfile.ZIP_STORED
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def read(path: Path) -> StoredArrays:
    """The verified arrays of a dataset file (either layout); ``ChecksumMismatch`` when corrupt."""
    with np.load(path, allow_pickle=False) as data:
        if "layout" not in data.files:  # a 0.1.x file
            legacy = StoredArrays(data["X"], data["Y"])
            if str(data["sha256"]) != legacy_digest(legacy.X, legacy.Y):
                raise ChecksumMismatch(path.name)
            return legacy
        members = {name: data[name] for name in data.files}
    recorded = str(members.pop("sha256"))
    if recorded != digest(members):
        raise ChecksumMismatch(path.name)
    X: np.ndarray | sp.csr_matrix = members.get("X", np.empty(0))
    if "X_data" in members:
        shape = tuple(int(v) for v in members["X_shape"])
        X = sp.csr_matrix((members["X_data"], members["X_indices"], members["X_indptr"]), shape=shape)
    if "Y_bits" in members:
        n, q = (int(v) for v in members["Y_shape"])
        Y = np.unpackbits(members["Y_bits"], axis=1, count=q).reshape(n, q)
    else:
        Y = members["Y"]
    return StoredArrays(X, Y)


def storage(path: Path) -> DatasetStorage:
    """Form, density and size of a dataset file, reading only its ``info`` member."""
    size = path.stat().st_size
    with np.load(path, allow_pickle=False) as data:
        if "info" not in data.files:  # a 0.1.x file
            return DatasetStorage("dense", None, size)
        n, d, stored, nonzero = (int(v) for v in data["info"])
        form = "sparse" if "X_data" in data.files else "dense"
    return DatasetStorage(form, nonzero / (n * d) if n * d else 0.0, size)


def legacy_digest(X: np.ndarray | sp.csr_matrix, Y: np.ndarray) -> str:
    """The check of 0.1.x files: sha256 over shapes and float64 C-order bytes."""
    h = hashlib.sha256()
    for array in (X, Y):
        data = np.ascontiguousarray(array, dtype=np.float64)
        h.update(repr(data.shape).encode())
        h.update(data.data)
    return h.hexdigest()
