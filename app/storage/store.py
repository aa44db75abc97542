"""The file store under ``LABELSERVE_MODEL_DIR``: parsed datasets and model artifacts.

Everything is content-addressed by sha256 and written atomically (temporary file in the same
directory, fsync, rename, fsync of the directory), so a crash never leaves a half-written file
under a final name. Artifacts are checked against their recorded sha256 before unpickling: a
mismatch is refused, never loaded. Datasets carry their own check: the ``.npz`` holds a sha256
of its arrays, verified on every load, so a corrupt or missing dataset file is a clear 409
(``DatasetUnavailable``) rather than whatever numpy raises. Their layout is in
``dataset_files``: sparse features as CSR, 0/1 labels as packed bits, each member compressed
where that pays; the dense float64 ``.npz`` files of 0.1.x still load.

A write that finds the disk full is an ``InsufficientStorage`` (507), and the partial file is
removed. Temporary files of writes that never finished (the process was killed) and files no
row refers to any more are removed by ``sweep`` (at start-up and periodically), but only once
they are older than a grace period, so a write in flight is never touched.
"""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import tempfile
import threading
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np
import scipy.sparse as sp

from app.errors import Conflict, InsufficientStorage, PayloadTooLarge
from app.storage import dataset_files
from app.storage.dataset_files import DatasetStorage, StoredArrays
from app.storage.pickle_memo import drop_unread_memo
from app.storage.registry_token import RegistryToken

DISK_FULL = "the model store's disk is full; free some space (or delete unused datasets and models) and retry"


class ArtifactIntegrityError(RuntimeError):
    """An artifact on disk does not match the sha256 recorded in the registry."""


class DatasetUnavailable(Conflict):
    """A dataset's stored arrays are missing or do not match their checksum (409)."""


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` so that readers see either nothing or the complete file."""
    tmp = _write_temporary(path.parent, f".{path.name}.", write)
    _publish(tmp, path)


def _write_temporary(folder: Path, prefix: str, write: Callable[[IO[bytes]], Any], *, durable: bool = True) -> Path:
    """A temporary file in ``folder`` holding what ``write`` wrote, fsynced unless not ``durable``
    (a draft that is rewritten before it is published)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    except OSError as exc:
        if is_disk_full(exc):
            raise InsufficientStorage(DISK_FULL) from None
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(exc):
            raise InsufficientStorage(DISK_FULL) from None
        raise
    return Path(tmp)


def _publish(tmp: Path, path: Path) -> None:
    """Rename a temporary file to its final name, durably (fsync of the directory)."""
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class _HashingWriter:
    """A binary file that hashes what is written through it (pickle streams into it)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self._sha256 = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sha256.update(data)
        return self._fh.write(data)

    def hexdigest(self) -> str:
        return self._sha256.hexdigest()


_READ_CHUNK = 1 << 20


def _file_sha256(fh: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := fh.read(_READ_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


class VerifiedDatasets:
    """Dataset arrays this process has read and verified, by file identity; LRU within a byte budget.

    Reading a stored dataset means unzipping it and hashing every byte (6 ms for scene's test
    split, more than ML-kNN's fit on the same rows takes per label), and the same dataset is read
    again and again: by every training of a tuning or an ``auto`` job in the same pool process,
    by repeated ``dataset_id`` predictions and evaluations. Stored files are content-addressed
    and never rewritten in place, so a file whose inode, size and modification time are
    unchanged holds the arrays already verified. The arrays are kept in their stored form (CSR
    features, uint8 labels), counted by the bytes they hold (for CSR: values, indices and row
    pointers). Thread-safe; the arrays kept are never handed out, only copies.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._arrays: OrderedDict[tuple[str, int, int, int], StoredArrays] = OrderedDict()
        self._bytes = 0

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def get(self, key: tuple[str, int, int, int]) -> StoredArrays | None:
        with self._lock:
            arrays = self._arrays.get(key)
            if arrays is not None:
                self._arrays.move_to_end(key)
            return arrays

    def put(self, key: tuple[str, int, int, int], arrays: StoredArrays) -> None:
        size = arrays.nbytes
        if size > self.budget_bytes:
            return
        with self._lock:
            if key in self._arrays:
                return
            self._arrays[key] = arrays
            self._bytes += size
            while self._bytes > self.budget_bytes:
                _, evicted = self._arrays.popitem(last=False)
                self._bytes -= evicted.nbytes


#: per process: small against the model cache, large enough for the benchmark sets (Yahoo: 10 MB)
VERIFIED = VerifiedDatasets(64 * 1024 * 1024)


#: the largest dense table (values) ``Store.load_dataset`` makes of a sparse dataset: 400 MB of float64
DENSE_MAX_CELLS = 50_000_000

#: pickles of at least this size are rewritten without their unread memo entries (below it, the
#: memo's second copy of the arrays costs a load at most this much)
PRUNE_BYTES = 16 * 1024 * 1024

#: classes that moved since a supported release wrote its artifacts: (module, name) as pickled
#: -> the module that holds the class now (0.1.x artifacts: the selected-features wrapper was in app.pipeline)
MOVED_CLASSES = {("app.pipeline", "SelectedFeatures"): "app.serving.selected_features"}


#: the format of the artifacts this release writes, recorded on each version row
#: (``model_versions.artifact_format``): 1 for 0.1.x's, 2 for 0.2.x's (the same pickles; the
#: number says which release's classes they hold, and so which "0.1.x" shims they may need)
ARTIFACT_FORMAT = 2


class _ArtifactUnpickler(pickle.Unpickler):
    """An unpickler that finds the classes of ``MOVED_CLASSES`` where they live now."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED_CLASSES.get((module, name), module), name)


#: an artifact's file: ``<sha256>.pkl`` (0.1.0 wrote them so already)
ARTIFACT_SUFFIX = ".pkl"


class Store:
    def __init__(self, root: Path, *, prune_pickles: bool = True) -> None:
        """``prune_pickles``: rewrite artifacts of ``PRUNE_BYTES`` or more without their unread
        memo entries (``save_artifact``); off, every artifact is the plain pickle."""
        self.root = root
        self.prune_pickles = prune_pickles
        self.datasets = root / "datasets"
        self.artifacts = root / "artifacts"
        self.results = root / "results"
        self.registry_token_path = root / "registry.token"
        self._token = RegistryToken(self.registry_token_path)
        for folder in (self.datasets, self.artifacts, self.results):
            folder.mkdir(parents=True, exist_ok=True)

    # datasets -----------------------------------------------------------------------------
    def dataset_path(self, sha256: str) -> Path:
        return self.datasets / f"{sha256}.npz"

    def save_dataset(self, sha256: str, X: np.ndarray | sp.csr_matrix, Y: np.ndarray) -> None:
        """Store a dataset's arrays in their compact form (``dataset_files``), once per sha256."""
        path = self.dataset_path(sha256)
        if not path.exists():
            atomic_write(path, lambda fh: dataset_files.write(fh, X, Y))

    def restore_dataset(self, sha256: str, X: np.ndarray | sp.csr_matrix, Y: np.ndarray) -> str | None:
        """Write a stored dataset's arrays again when its file is missing or corrupt; what was
        wrong with it (the ``DatasetUnavailable`` message), or None when it was sound.

        The same upload again is the one way a user can hand the arrays back, so its duplicate
        path checks the file (from ``VERIFIED`` when this process read it unchanged before; else
        one read and hash, cheaper than the parse that came first) instead of trusting it.
        """
        try:
            self._verified(sha256)
        except DatasetUnavailable as exc:
            atomic_write(self.dataset_path(sha256), lambda fh: dataset_files.write(fh, X, Y))
            return exc.message
        return None

    def load_stored(self, sha256: str) -> StoredArrays:
        """The arrays of a stored dataset as stored (CSR or dense features, uint8 or float64
        labels), verified; ``DatasetUnavailable`` when missing or corrupt. Each call gets its
        own copies."""
        return self._verified(sha256).copy()

    def _verified(self, sha256: str) -> StoredArrays:
        """The verified arrays, possibly the ones ``VERIFIED`` keeps (never to be modified).

        A dataset this process read and verified before, from a file that has not changed since
        (same inode, size and modification time), comes from ``VERIFIED`` instead of being read
        and hashed again.
        """
        short = sha256[:16]
        path = self.dataset_path(sha256)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are missing from the store") from None
        key = (str(path), status.st_ino, status.st_size, status.st_mtime_ns)
        known = VERIFIED.get(key)
        if known is not None:
            return known
        try:
            arrays = dataset_files.read(path)
        except FileNotFoundError:
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are missing from the store") from None
        except dataset_files.ChecksumMismatch:
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are corrupt (checksum mismatch)") from None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are corrupt (unreadable)") from None
        VERIFIED.put(key, arrays)
        return arrays

    def load_dataset(self, sha256: str, max_dense_cells: int = DENSE_MAX_CELLS) -> tuple[np.ndarray, np.ndarray]:
        """The arrays of a stored dataset as dense float64 ``X`` and ``Y``, verified.

        The one place where sparse data is densified, for the methods and evaluation paths that
        need dense input (until they take CSR); refused with a 413 naming the size when the
        dense table would exceed ``max_dense_cells``, rather than letting the process be killed.
        """
        arrays = self._verified(sha256)  # dense() makes new arrays: no copy needed
        if not isinstance(arrays.X, np.ndarray):
            n, d = arrays.X.shape
            if n * d > max_dense_cells:
                raise PayloadTooLarge(
                    f"dataset '{sha256[:16]}' is stored sparse ({arrays.X.nnz} non-zeros); this use needs it dense, "
                    f"{n} x {d} = {n * d} values, more than the {max_dense_cells} a process densifies"
                )
        return arrays.dense()

    def dataset_storage(self, sha256: str) -> DatasetStorage | None:
        """How a dataset is stored (form, density, bytes), from its file; None when it is missing."""
        try:
            return dataset_files.storage(self.dataset_path(sha256))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None

    def delete_dataset(self, sha256: str) -> None:
        self.dataset_path(sha256).unlink(missing_ok=True)

    # artifacts ----------------------------------------------------------------------------
    def artifact_path(self, sha256: str) -> Path:
        """Where an artifact is written: a pickle (protocol 5) named by its sha256."""
        return self.artifacts / f"{sha256}{ARTIFACT_SUFFIX}"

    def save_artifact(self, obj: Any) -> str:
        """Persist ``obj`` durably and return the sha256 of its bytes.

        The pickle is streamed into a temporary file while it is hashed, then renamed to its
        content address: the model is never pickled into memory as a second copy (a 900 MB
        forest would need 1.8 GB). A pickle of ``PRUNE_BYTES`` or more is then rewritten (when
        ``prune_pickles``), file to file, without the memo entries nothing reads back
        (``app.storage.pickle_memo``), so that its load does not hold the model twice either. Plain pickle: joblib's pickler and
        unpickler are pure Python, and for a model holding its training matrix (ML-kNN on
        scene, 2.9 MB) took 2.9 ms to write and 0.8 ms to read, against 1.2 ms and 0.15 ms.
        """
        writer: list[_HashingWriter] = []

        def write(fh: IO[bytes]) -> None:
            writer.append(_HashingWriter(fh))
            pickle.dump(obj, writer[-1], protocol=5)

        tmp = _write_temporary(self.artifacts, ".artifact.", write, durable=False)
        try:
            if self.prune_pickles and tmp.stat().st_size >= PRUNE_BYTES:
                draft = tmp

                def rewrite(fh: IO[bytes]) -> None:
                    writer.append(_HashingWriter(fh))
                    drop_unread_memo(draft, writer[-1])

                tmp = _write_temporary(self.artifacts, ".artifact.", rewrite)
                draft.unlink()
            else:
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        sha256 = writer[-1].hexdigest()
        path = self.artifact_path(sha256)
        if path.exists():  # the same bytes are stored already
            tmp.unlink(missing_ok=True)
        else:
            _publish(tmp, path)
        return sha256

    def load_artifact(self, sha256: str) -> Any:
        """The artifact with this sha256, verified.

        The open file is hashed in chunks, then unpickled from the same descriptor (the same
        inode, whatever is renamed meanwhile): the model is never held as bytes beside itself.
        """
        try:
            fh = open(self.artifact_path(sha256), "rb")  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            raise FileNotFoundError(f"artifact {sha256[:12]} is not in the store") from None
        with fh:
            actual = _file_sha256(fh)
            if actual != sha256:
                raise ArtifactIntegrityError(
                    f"artifact {sha256[:12]} is corrupt on disk (sha256 {actual[:12]}); refusing to load"
                )
            fh.seek(0)
            return _ArtifactUnpickler(fh).load()

    def stored_artifact(self, sha256: str) -> Path:
        """The file holding the artifact, not verified: its reader checks the sha256
        (``load_artifact``, the artifact download)."""
        path = self.artifact_path(sha256)
        if not path.exists():
            raise FileNotFoundError(f"artifact {sha256[:12]} is not in the store")
        return path

    def artifact_size(self, sha256: str) -> int:
        """The artifact file's size in bytes (0 when it is not in the store)."""
        try:
            return self.artifact_path(sha256).stat().st_size
        except FileNotFoundError:
            return 0

    def delete_artifact(self, sha256: str) -> None:
        self.artifact_path(sha256).unlink(missing_ok=True)

    # registry change notices (see ``app.storage.registry_token``) ---------------------------------
    # The store is shared by the API processes and the workers (artifacts live here), so a
    # token in it reaches every process without a database round trip per prediction.
    def registry_token(self) -> bytes:
        """The current registry token (empty before the first change)."""
        return self._token.read()

    def registry_changed(self) -> None:
        """Publish a registry change (call it after the change is committed)."""
        self._token.publish()

    # batch prediction results -------------------------------------------------------------
    def result_path(self, job_id: str, fmt: str) -> Path:
        return self.results / f"{job_id}.{fmt}"

    def free_bytes(self) -> int:
        """Free space on the store's file system (for ``/ready`` and ``/metrics``)."""
        return int(os.statvfs(self.root).f_bavail * os.statvfs(self.root).f_frsize)

    def sweep(
        self, referenced_datasets: Iterable[str], referenced_artifacts: Iterable[str], grace_seconds: float
    ) -> list[Path]:
        """Remove temporary files of writes that never finished and files no row refers to.

        Only files older than ``grace_seconds`` go: a write in flight (its temporary file, or a
        final file whose row is not committed yet) is younger than that. Returns what was removed.
        """
        cutoff = time.time() - grace_seconds
        keep = {self.dataset_path(s).name for s in referenced_datasets} | {
            self.artifact_path(s).name for s in referenced_artifacts
        }
        removed = []
        for folder, suffix in ((self.datasets, ".npz"), (self.artifacts, ARTIFACT_SUFFIX)):
            for path in folder.iterdir():
                temporary = path.name.startswith(".") and path.name.endswith(".tmp")
                orphan = path.suffix == suffix and path.name not in keep
                try:
                    if (temporary or orphan) and path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed.append(path)
                except FileNotFoundError:  # removed meanwhile
                    continue
        for path in self.results.glob("*.part"):  # batch results of killed jobs
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed.append(path)
            except FileNotFoundError:
                continue
        return removed

    def writable(self) -> bool:
        try:
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".ready-"):
                return True
        except OSError:
            return False
