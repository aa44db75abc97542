"""The C allocator's settings for processes that predict and train.

glibc serves a large allocation (above a threshold it adjusts itself, from 128 kB up) with a
fresh ``mmap`` and returns it to the system when it is freed, and trims the top of the heap
whenever more than twice that lies free. A NumPy temporary of a few megabytes, such as a block
of distances or a scaled copy of the queries, then costs a page fault per 4 kB on every
request, often more than the work itself (docs/benchmarks.md, training latency). Keeping freed
memory for reuse is the allocator's documented tuning (``mallopt``, the ``MALLOC_*`` variables).
The price is that a process keeps up to ``TRIM_BYTES`` of freed heap instead of returning it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("labelserve")

#: allocations below this come from the heap, whose freed memory is reused
MMAP_THRESHOLD_BYTES = 64 << 20
#: free memory at the top of the heap is returned to the system beyond this
TRIM_BYTES = 256 << 20
#: while a model loads, allocations from this size on get their own mapping
LOADING_MMAP_THRESHOLD_BYTES = 1 << 20
_M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_state = threading.Lock()
_applied: dict[str, int] = {}  # what keep_freed_memory set in this process
_loads = 0  # loads in progress (large_blocks_mapped)


@functools.cache
def _glibc() -> Any:
    """The C library if it has glibc's ``mallopt`` and ``malloc_trim``, else None (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018 (present, or AttributeError)
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory() -> bool:
    """Apply the settings to this process (glibc only; elsewhere nothing changes). True if set."""
    global _applied
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
    )
    if not done:
        log.warning("the allocator settings were refused (mallopt); freed memory is returned at once")
    with _state:
        _applied = {"M_MMAP_THRESHOLD": MMAP_THRESHOLD_BYTES, "M_TRIM_THRESHOLD": TRIM_BYTES} if done else {}
    return done


def applied() -> dict[str, int]:
    """The settings ``keep_freed_memory`` applied in this process (mallopt option -> bytes);
    empty when it was not called (``LABELSERVE_TUNE_ALLOCATOR=false``) or could not apply them."""
    with _state:
        return dict(_applied)


def release_freed_memory() -> bool:
    """Give the free memory of the heap back to the system now (glibc's ``malloc_trim``; True if
    it released any).

    With the settings above a process keeps what it frees; after the model cache evicts a model
    of hundreds of megabytes that memory would stay resident for good (the API sat at 1.9 GB
    with a 1000 MB cache). Trimming costs a walk of the heap, paid once per eviction, never per
    request.
    """
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


@contextmanager
def large_blocks_mapped() -> Iterator[None]:
    """While a model loads, blocks of ``LOADING_MMAP_THRESHOLD_BYTES`` or more get a mapping of
    their own, unmapped the moment they are freed (with the settings above they came from the
    heap and stayed resident).

    Unpickling a forest allocates each tree's arrays twice, the pickle's buffer and the tree's
    own copy, and frees the buffer: on the heap the freed buffers left holes the next trees'
    arrays did not fit, and a 389 MiB forest's load peaked about 30 MB above the forest (a
    quarter of the API's excess over its bound while serving four of them); mapped, they go
    back at once, and the model's own arrays are mapped too (returned when it is evicted).
    The threshold is the process's, so a request's large temporaries are mapped (and pay
    their page faults) during a load; nested and concurrent loads share the setting, restored
    by the last. Nothing changes unless ``keep_freed_memory`` applied its settings.
    """
    global _loads
    libc = _glibc()
    with _state:
        active = bool(_applied) and libc is not None
        if active:
            _loads += 1
            if _loads == 1:
                libc.mallopt(_M_MMAP_THRESHOLD, LOADING_MMAP_THRESHOLD_BYTES)
    try:
        yield
    finally:
        if active:
            with _state:
                _loads -= 1
                if _loads == 0:
                    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
