"""The registry token: one small file in the store that every registry change rewrites.

Every process that serves predictions keeps resolved references in memory and trusts them only
while the token it read before resolving is still the current one (``ResolvedRefs``), so the
token is read on every prediction. On a local file system the file is mapped into memory once
and each read is a memory load (the page cache is shared by every process of the host, so a
write is visible at once). A mapping is not kept coherent between hosts on a network file system
(NFS, SMB, ...), so there, and wherever the type cannot be told, every read opens the file, as
close-to-open consistency requires. Writers overwrite the file in place, never by rename (a
mapping follows its file, not its name); a reader catching a half-done write only drops its
resolutions once more. A file replaced behind the service's back is noticed within
``RECHECK_SECONDS``.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from pathlib import Path

TOKEN_BYTES = 32  # 16 random bytes, hex
RECHECK_SECONDS = 1.0
#: file systems whose page cache every process of the host shares (containers included)
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "bcachefs", "tmpfs", "ramfs", "overlay"}
)


def filesystem_type(path: Path) -> str | None:
    """The type of the file system holding ``path``, from ``/proc/self/mountinfo`` (Linux);
    None where it cannot be told."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, kind = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount_point = fields[4].encode().decode("unicode_escape")  # spaces come as \040
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, right.split()[0]
    return kind


class RegistryToken:
    """Reads and rewrites the token file at ``path`` (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = str(path)
        self._lock = threading.Lock()
        self._local: bool | None = None  # decided on the first read
        self._map: mmap.mmap | None = None
        self._identity: tuple[int, int] | None = None
        self._checked = 0.0

    def read(self) -> bytes:
        """The current token (empty before the first change)."""
        mapped = self._map
        if mapped is not None and time.monotonic() - self._checked < RECHECK_SECONDS:
            return mapped[:TOKEN_BYTES]
        return self._read_checked()

    def publish(self) -> None:
        """Write a fresh random token (after the change it announces is committed). No fsync:
        after a crash every process starts with empty caches anyway."""
        fd = os.open(self._file, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, os.urandom(TOKEN_BYTES // 2).hex().encode(), 0)
        finally:
            os.close(fd)

    def _read_checked(self) -> bytes:
        with self._lock:
            if self._local is None:
                self._local = filesystem_type(self.path.parent) in LOCAL_FILESYSTEMS
            if not self._local:
                return _read_file(self._file)
            try:
                status = os.stat(self._file)
            except FileNotFoundError:
                self._map = None
                return b""
            if self._map is None or (status.st_dev, status.st_ino) != self._identity:
                self._remap()
            self._checked = time.monotonic()
            return self._map[:TOKEN_BYTES] if self._map is not None else _read_file(self._file)

    def _remap(self) -> None:
        """Map the file as it is now; the previous mapping is left to readers still holding it."""
        self._map = None
        fd = os.open(self._file, os.O_RDONLY)
        try:
            status = os.fstat(fd)
            if status.st_size < TOKEN_BYTES:  # not a whole token yet: read it until it is
                return
            self._map = mmap.mmap(fd, TOKEN_BYTES, prot=mmap.PROT_READ)
            self._identity = (status.st_dev, status.st_ino)
        finally:
            os.close(fd)


def _read_file(name: str) -> bytes:
    try:
        fd = os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.read(fd, TOKEN_BYTES)
    finally:
        os.close(fd)
