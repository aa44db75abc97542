"""``GET /models/{name}/versions/{v}/artifact``: a version's model file, to use it elsewhere.

The answer is a zip holding the artifact exactly as stored (``model.pkl``, a pickle of protocol
5) and ``manifest.json``: what the version
record says (method, params, names, lineage), the library versions it was trained with (a pickle
only loads reliably with the same scikit-learn, numpy and scipy), the artifact's sha256 and how
to load it. The artifact is hashed before anything is sent, and the download refused (409) when it
no longer matches the version's sha256, as loading it for a prediction would be.

Members are stored, not compressed: a pickle of float arrays hardly compresses. The zip is
streamed as it is made (``Export.chunks``: the artifact read once to check it, then once more as
it is sent, from the same open file, a MiB at a time), so an export holds no copy on disk and
about a MiB of memory however slowly it is downloaded; the second read is hashed too, and a
mismatch aborts the download. Importing a pickle is not offered: unpickling runs code.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, BinaryIO

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


class _Collected(io.RawIOBase):
    """What ``zipfile`` writes, collected until taken. Not seekable, so the zip's members carry
    their sizes and CRC after their data (a data descriptor) and the zip can be sent as it is made."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        taken, self._parts = b"".join(self._parts), []
        return taken


@dataclass
class Export:
    """A checked export: the artifact's open file (``chunks`` sends and closes it), its member
    name, the manifest, the download name and the artifact's sha256."""

    artifact: BinaryIO
    member: str
    manifest: bytes
    filename: str
    artifact_sha256: str

    def chunks(self) -> Generator[bytes, None, None]:
        """The zip, a MiB at a time; raises (aborting the download) if the artifact changed since it was checked."""
        collected = _Collected()
        digest = hashlib.sha256()
        try:
            self.artifact.seek(0)
            with zipfile.ZipFile(collected, "w", compression=zipfile.ZIP_STORED) as archive:
                with archive.open(self.member, "w", force_zip64=True) as out:
                    while chunk := self.artifact.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        yield collected.take()
                if digest.hexdigest() != self.artifact_sha256:
                    raise RuntimeError(f"artifact {self.artifact_sha256[:12]} changed while it was being sent")
                archive.writestr("manifest.json", self.manifest)
            yield collected.take()
        finally:
            self.artifact.close()


def export_version(session: Session, store: Store, name: str, version: int) -> Export:
    """Check one version's artifact and describe its zip (NotFound for a missing version,
    Conflict for a missing or corrupt artifact); the caller sends ``chunks()``."""
    record = show_version(session, name, version)
    try:
        artifact = store.stored_artifact(record.artifact_sha256)
        opened = open(artifact, "rb")  # noqa: SIM115 - Export.chunks closes it once sent
    except FileNotFoundError:
        raise Conflict("the model version's artifact is missing from the store", loc=("path", "version")) from None
    member = _MEMBER
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
        "artifact": member,
        "artifact_sha256": record.artifact_sha256,
        "format": "pickle (protocol 5)",
        "load": _LOADING,
    }
    digest = _hashed(opened)
    if digest != record.artifact_sha256:
        opened.close()
        raise Conflict(
            f"artifact {record.artifact_sha256[:12]} is corrupt on disk (sha256 {digest[:12]}); refusing to send it",
            loc=("path", "version"),
        )
    return Export(
        artifact=opened,
        member=member,
        manifest=json.dumps(manifest, indent=2).encode(),
        filename=f"{record.name}-{record.version}.zip",
        artifact_sha256=record.artifact_sha256,
    )


def _hashed(source: BinaryIO) -> str:
    """The sha256 of an open file, read a MiB at a time."""
    digest = hashlib.sha256()
    while chunk := source.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()
