"""The C allocator's settings for processes that predict and train.

glibc serves a large allocation (above a threshold it adjusts itself, from 128 kB up) with a
fresh ``mmap`` and returns it to the system when it is freed, and trims the top of the heap
whenever more than twice that lies free. A NumPy temporary of a few megabytes, such as a block
of distances or a scaled copy of the queries, then costs a page fault per 4 kB on every
request: scaling scene's test split (1196 x 294) took 1.1 ms of page faults for 0.3 ms of work,
and a batch prediction of it was 2.5 ms (10%) slower than with the memory kept. Keeping freed
memory for reuse is the allocator's documented tuning (``mallopt``, the ``MALLOC_*`` variables).
The price is that a process keeps up to ``TRIM_BYTES`` of freed heap instead of returning it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("labelserve")

#: allocations below this come from the heap, whose freed memory is reused
MMAP_THRESHOLD_BYTES = 64 << 20
#: free memory at the top of the heap is returned to the system beyond this
TRIM_BYTES = 256 << 20
_M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Apply the settings to this process (glibc only; elsewhere nothing changes). True if set."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): its own policy stays
        return False
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))
    if not done:
        log.warning("the allocator settings were refused (mallopt); freed memory is returned at once")
    return done


def release_freed_memory() -> bool:
    """Give the free memory of the heap back to the system now (glibc's ``malloc_trim``; True if
    it released any).

    With the settings above a process keeps what it frees; after the model cache evicts a model
    of hundreds of megabytes that memory would stay resident for good (the API sat at 1.9 GB
    with a 1000 MB cache). Trimming costs a walk of the heap, paid once per eviction, never per
    request.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        malloc_trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(malloc_trim(0))
