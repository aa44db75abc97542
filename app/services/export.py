"""``GET /models/{name}/versions/{v}/artifact``: a version's model file, to use it elsewhere.

The answer is a zip holding the artifact exactly as stored (``model.pkl``, a pickle of protocol
5) and ``manifest.json``: what the version record says (method, params, names, lineage), the
library versions it was trained with (a pickle only loads reliably with the same scikit-learn,
numpy and scipy), the artifact's sha256 and how to load it. The artifact is hashed while it is
copied and the download refused (409) when it no longer matches the version's sha256, as loading
it for a prediction would be.

Members are stored, not compressed: a pickle of float arrays hardly compresses, and the copy stays
one pass. The zip is written to a temporary file that the route deletes once it is sent, so a
large model is never held in memory. Importing a pickle is not offered: unpickling runs code.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.errors import Conflict
from app.services.models import show_version
from app.storage.store import Store

_CHUNK = 1 << 20
_MEMBER = "model.pkl"
_LOADING = (
    "pickle.load(open('model.pkl', 'rb')) with the library versions of 'library_versions' installed "
    "(labelserve among them: the estimator classes are its own); unpickling runs code, so load only files you trust"
)


@dataclass(frozen=True)
class Export:
    """A written export: the zip's path (the caller deletes it), its download name and the
    artifact's sha256."""

    path: Path
    filename: str
    artifact_sha256: str


def export_version(session: Session, store: Store, name: str, version: int) -> Export:
    """Write the zip of one version (NotFound for a missing version, Conflict for a missing or
    corrupt artifact)."""
    record = show_version(session, name, version)
    try:
        artifact = store.stored_artifact(record.artifact_sha256)
    except FileNotFoundError:
        raise Conflict("the model version's artifact is missing from the store", loc=("path", "version")) from None
    manifest: dict[str, Any] = {
        "name": record.name,
        "version": record.version,
        "method": record.method,
        "params": record.params,
        "feature_names": record.feature_names,
        "label_names": record.label_names,
        "dataset_id": record.dataset_id,
        "dataset_sha256": record.dataset_sha256,
        "created_at": record.created_at.isoformat(),
        "library_versions": record.library_versions,
        "artifact": _MEMBER,
        "artifact_sha256": record.artifact_sha256,
        "format": "pickle (protocol 5)",
        "load": _LOADING,
    }
    handle, temporary = tempfile.mkstemp(prefix="labelserve-export-", suffix=".zip")
    os.close(handle)
    path = Path(temporary)
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
            digest = _copy_hashed(artifact, archive, _MEMBER)
            if digest != record.artifact_sha256:
                raise Conflict(
                    f"artifact {record.artifact_sha256[:12]} is corrupt on disk (sha256 {digest[:12]}); "
                    "refusing to send it",
                    loc=("path", "version"),
                )
            archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return Export(path=path, filename=f"{record.name}-{record.version}.zip", artifact_sha256=record.artifact_sha256)


def _copy_hashed(source: Path, archive: zipfile.ZipFile, member: str) -> str:
    """Copy ``source`` into the archive as ``member`` and return the sha256 of what was copied
    (the bytes written, read once from one open file)."""
    digest = hashlib.sha256()
    with open(source, "rb") as fh, archive.open(member, "w", force_zip64=True) as out:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()
