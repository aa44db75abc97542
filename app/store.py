"""The file store under ``LABELSERVE_MODEL_DIR``: parsed datasets and model artifacts.

Everything is content-addressed by sha256 and written atomically (temporary file in the same
directory, fsync, rename, fsync of the directory), so a crash never leaves a half-written file
under a final name. Artifacts are checked against their recorded sha256 before unpickling: a
mismatch is refused, never loaded.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import joblib
import numpy as np


class ArtifactIntegrityError(RuntimeError):
    """An artifact on disk does not match the sha256 recorded in the registry."""


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` so that readers see either nothing or the complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.datasets = root / "datasets"
        self.artifacts = root / "artifacts"
        self.results = root / "results"
        for folder in (self.datasets, self.artifacts, self.results):
            folder.mkdir(parents=True, exist_ok=True)

    # datasets -----------------------------------------------------------------------------
    def dataset_path(self, sha256: str) -> Path:
        return self.datasets / f"{sha256}.npz"

    def save_dataset(self, sha256: str, X: np.ndarray, Y: np.ndarray) -> None:
        path = self.dataset_path(sha256)
        if not path.exists():
            atomic_write(path, lambda fh: np.savez(fh, X=X, Y=Y))

    def load_dataset(self, sha256: str) -> tuple[np.ndarray, np.ndarray]:
        with np.load(self.dataset_path(sha256), allow_pickle=False) as data:
            return data["X"], data["Y"]

    def delete_dataset(self, sha256: str) -> None:
        self.dataset_path(sha256).unlink(missing_ok=True)

    # artifacts ----------------------------------------------------------------------------
    def artifact_path(self, sha256: str) -> Path:
        return self.artifacts / f"{sha256}.joblib"

    def save_artifact(self, obj: Any) -> str:
        """Persist ``obj`` durably and return the sha256 of its bytes."""
        buffer = io.BytesIO()
        joblib.dump(obj, buffer)  # uncompressed: zlib costs more time than the disk it saves
        payload = buffer.getvalue()
        sha256 = hashlib.sha256(payload).hexdigest()
        path = self.artifact_path(sha256)
        if not path.exists():
            atomic_write(path, lambda fh: fh.write(payload))
        return sha256

    def load_artifact(self, sha256: str) -> Any:
        payload = self.artifact_path(sha256).read_bytes()
        actual = hashlib.sha256(payload).hexdigest()
        if actual != sha256:
            raise ArtifactIntegrityError(
                f"artifact {sha256[:12]} is corrupt on disk (sha256 {actual[:12]}); refusing to load"
            )
        return joblib.load(io.BytesIO(payload))

    def delete_artifact(self, sha256: str) -> None:
        self.artifact_path(sha256).unlink(missing_ok=True)

    # batch prediction results -------------------------------------------------------------
    def result_path(self, job_id: str, fmt: str) -> Path:
        return self.results / f"{job_id}.{fmt}"

    def writable(self) -> bool:
        try:
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".ready-"):
                return True
        except OSError:
            return False
