"""Rendered pages kept in memory: the version reports, which cost an evaluation to build.

A version's report on a dataset depends only on things that never change once written: the
version (its artifact, parameters and names: a version is immutable, and a deleted one never
comes back under the same row id and creation time), the dataset's content (its sha256) and the
names shown in the header. Its cache key is exactly those, so an entry is never stale and needs
no invalidation: a change (a deleted training dataset, a renamed one) is a new key, and the old
entry ages out. Least recently used pages go first once ``max_bytes`` is reached; each process
keeps its own.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable

#: the memory the cached pages of one process may take (hundreds of reports: docs/ui.md)
DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class PageCache:
    """Pages (``str``) by key, bounded by the memory they take; safe across threads."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._pages: OrderedDict[Hashable, tuple[str, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> str | None:
        with self._lock:
            entry = self._pages.get(key)
            if entry is None:
                return None
            self._pages.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, page: str) -> None:
        """Keep ``page``; a page larger than the whole bound is not kept (it would evict every other)."""
        size = sys.getsizeof(page)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._pages[key] = (page, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, freed) = self._pages.popitem(last=False)
                self._bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._pages.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._pages)
