"""The file store under ``LABELSERVE_MODEL_DIR``: parsed datasets and model artifacts.

Everything is content-addressed by sha256 and written atomically (temporary file in the same
directory, fsync, rename, fsync of the directory), so a crash never leaves a half-written file
under a final name. Artifacts are checked against their recorded sha256 before unpickling: a
mismatch is refused, never loaded. Datasets carry their own check: the ``.npz`` holds a sha256
of its arrays, verified on every load, so a corrupt or missing dataset file is a clear 409
(``DatasetUnavailable``) rather than whatever numpy raises.

A write that finds the disk full is an ``InsufficientStorage`` (507), and the partial file is
removed. Temporary files of writes that never finished (the process was killed) and files no
row refers to any more are removed by ``sweep`` (at start-up and periodically), but only once
they are older than a grace period, so a write in flight is never touched.
"""

from __future__ import annotations

import errno
import hashlib
import io
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

import joblib
import numpy as np

from app.errors import Conflict, InsufficientStorage
from app.registry_token import RegistryToken

DISK_FULL = "the model store's disk is full; free some space (or delete unused datasets and models) and retry"


class ArtifactIntegrityError(RuntimeError):
    """An artifact on disk does not match the sha256 recorded in the registry."""


class DatasetUnavailable(Conflict):
    """A dataset's stored arrays are missing or do not match their checksum (409)."""


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` so that readers see either nothing or the complete file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        if is_disk_full(exc):
            raise InsufficientStorage(DISK_FULL) from None
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if is_disk_full(exc):
            raise InsufficientStorage(DISK_FULL) from None
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class VerifiedDatasets:
    """Dataset arrays this process has read and verified, by file identity; LRU within a byte budget.

    Reading a stored dataset means unzipping it and hashing every byte (6 ms for scene's test
    split, more than ML-kNN's fit on the same rows takes per label), and the same dataset is read
    again and again: by every training of a tuning or an ``auto`` job in the same pool process,
    by repeated ``dataset_id`` predictions and evaluations. Stored files are content-addressed
    and never rewritten in place, so a file whose inode, size and modification time are
    unchanged holds the arrays already verified. Thread-safe; the arrays kept are never handed
    out, only copies.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._arrays: OrderedDict[tuple[str, int, int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[str, int, int, int]) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            arrays = self._arrays.get(key)
            if arrays is not None:
                self._arrays.move_to_end(key)
            return arrays

    def put(self, key: tuple[str, int, int, int], X: np.ndarray, Y: np.ndarray) -> None:
        size = X.nbytes + Y.nbytes
        if size > self.budget_bytes:
            return
        with self._lock:
            if key in self._arrays:
                return
            self._arrays[key] = (X, Y)
            self._bytes += size
            while self._bytes > self.budget_bytes:
                _, (x, y) = self._arrays.popitem(last=False)
                self._bytes -= x.nbytes + y.nbytes


#: per process: small against the model cache, large enough for the benchmark sets (Yahoo: 10 MB)
VERIFIED = VerifiedDatasets(64 * 1024 * 1024)


#: artifact file formats by suffix, the one written first: pickles, and the joblib files that
#: stores of earlier releases hold (still loaded, never written)
ARTIFACT_SUFFIXES = (".pkl", ".joblib")


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
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

    def save_dataset(self, sha256: str, X: np.ndarray, Y: np.ndarray) -> None:
        path = self.dataset_path(sha256)
        if not path.exists():
            check = np.array(arrays_digest(X, Y))
            atomic_write(path, lambda fh: np.savez(fh, X=X, Y=Y, sha256=check))

    def load_dataset(self, sha256: str) -> tuple[np.ndarray, np.ndarray]:
        """The arrays of a stored dataset, verified; ``DatasetUnavailable`` when missing or corrupt.

        Each call gets its own copies. A dataset this process read and verified before, from a
        file that has not changed since (same inode, size and modification time), comes from
        ``VERIFIED`` instead of being read and hashed again.
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
            return known[0].copy(), known[1].copy()
        try:
            with np.load(path, allow_pickle=False) as data:
                X, Y = data["X"], data["Y"]
                recorded = str(data["sha256"]) if "sha256" in data.files else None
        except FileNotFoundError:
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are missing from the store") from None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are corrupt (unreadable)") from None
        if recorded is not None and recorded != arrays_digest(X, Y):
            raise DatasetUnavailable(f"dataset '{short}': its stored arrays are corrupt (checksum mismatch)")
        VERIFIED.put(key, X, Y)
        return X.copy(), Y.copy()

    def delete_dataset(self, sha256: str) -> None:
        self.dataset_path(sha256).unlink(missing_ok=True)

    # artifacts ----------------------------------------------------------------------------
    def artifact_path(self, sha256: str) -> Path:
        """Where an artifact is written: a pickle (protocol 5) named by its sha256."""
        return self.artifacts / f"{sha256}{ARTIFACT_SUFFIXES[0]}"

    def save_artifact(self, obj: Any) -> str:
        """Persist ``obj`` durably and return the sha256 of its bytes.

        Plain pickle: joblib's pickler and unpickler are pure Python, and for a model holding
        its training matrix (ML-kNN on scene, 2.9 MB) took 2.9 ms to write and 0.8 ms to read,
        against 1.2 ms and 0.15 ms; nothing joblib adds (memory maps, compression) is used here.
        """
        payload = pickle.dumps(obj, protocol=5)
        sha256 = hashlib.sha256(payload).hexdigest()
        path = self.artifact_path(sha256)
        if not path.exists():
            atomic_write(path, lambda fh: fh.write(payload))
        return sha256

    def load_artifact(self, sha256: str) -> Any:
        """The artifact with this sha256, verified; a joblib file of an earlier store loads too."""
        for suffix in ARTIFACT_SUFFIXES:
            try:
                payload = (self.artifacts / f"{sha256}{suffix}").read_bytes()
            except FileNotFoundError:
                continue
            actual = hashlib.sha256(payload).hexdigest()
            if actual != sha256:
                raise ArtifactIntegrityError(
                    f"artifact {sha256[:12]} is corrupt on disk (sha256 {actual[:12]}); refusing to load"
                )
            return pickle.loads(payload) if suffix == ".pkl" else joblib.load(io.BytesIO(payload))
        raise FileNotFoundError(f"artifact {sha256[:12]} is not in the store")

    def delete_artifact(self, sha256: str) -> None:
        for suffix in ARTIFACT_SUFFIXES:
            (self.artifacts / f"{sha256}{suffix}").unlink(missing_ok=True)

    # registry change notices (see ``app.registry_token``) ---------------------------------
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
            f"{s}{suffix}" for s in referenced_artifacts for suffix in ARTIFACT_SUFFIXES
        }
        removed = []
        for folder, suffixes in ((self.datasets, (".npz",)), (self.artifacts, ARTIFACT_SUFFIXES)):
            for path in folder.iterdir():
                temporary = path.name.startswith(".") and path.name.endswith(".tmp")
                orphan = path.suffix in suffixes and path.name not in keep
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


def arrays_digest(X: np.ndarray, Y: np.ndarray) -> str:
    """sha256 over a dataset's arrays: their shapes and their bytes (C order, float64)."""
    digest = hashlib.sha256()
    for array in (X, Y):
        data = np.ascontiguousarray(array, dtype=np.float64)
        digest.update(repr(data.shape).encode())
        digest.update(data.data)
    return digest.hexdigest()
