"""The resident memory a training actually took, measured in the process that ran it.

Linux keeps each process's resident high-water mark (``VmHWM`` in ``/proc/self/status``) and
resets it to the current size when ``5`` is written to ``/proc/self/clear_refs``; a pool process
runs one job after another, so the mark is reset before each fit and read after it. Elsewhere
(no ``/proc``) both are no-ops and the peak is unknown (None).
"""

from __future__ import annotations

from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak() -> None:
    """Start a new high-water mark at the current resident size (best effort)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass


def peak_bytes() -> int | None:
    """The resident high-water mark since the last ``reset_peak`` (or the process start)."""
    return _status("VmHWM:")


def resident_bytes() -> int | None:
    """The resident size now."""
    return _status("VmRSS:")


def _status(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
