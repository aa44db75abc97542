"""A preallocated spare file beside the SQLite database, given up when a deletion finds the disk full.

Deleting is how an operator makes room on a full disk, yet on SQLite a deletion needs room
itself: in WAL mode a commit appends its pages to the ``-wal`` file, so on a full disk every
``DELETE`` failed (docs/reliability.md). The API therefore keeps ``SPARE_BYTES`` allocated in
``<db>.spare`` (made at start-up and on each store sweep when there is room) and removes it when
a deletion's commit meets a full disk (``app.storage.db.commit_deletion``); the deletion commits
into the space it freed, and the spare is made again once there is room. A deletion uses a few
WAL frames, so one spare covers many in a row. The spare is allocated (``posix_fallocate``), not
sparse, and written under a temporary name then renamed, so no process finds a half-made spare;
API processes sharing the database share one spare.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: enough for hundreds of WAL frames (a deletion writes a few), small against any disk
SPARE_BYTES = 1024 * 1024


class SpareSpace:
    """The spare file at ``path`` (``SPARE_BYTES`` long when present)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def present(self) -> bool:
        try:
            return self.path.stat().st_size >= SPARE_BYTES
        except FileNotFoundError:
            return False

    def keep(self) -> bool:
        """Make the spare unless it is there; False when the disk has no room for it (nothing is
        left behind then: a spare is all or nothing)."""
        if self.present():
            return True
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return False
            raise
        try:
            try:
                os.posix_fallocate(fd, 0, SPARE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return False
            raise
        return True

    def release(self) -> bool:
        """Remove the spare, freeing its space; False when there was none to give up."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True
