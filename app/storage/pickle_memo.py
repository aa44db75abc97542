"""Pickles that load without holding a second copy of the model: memo entries nobody reads are dropped.

A pickler memoizes every object it writes (``MEMOIZE``), and the unpickler keeps every memoized
object until the whole load ends. For a model whose objects copy their arrays on load
(scikit-learn's trees in ``__setstate__``, a faiss index deserialised from its bytes) the memo
thus holds each array a second time until the last one is read (docs/scale.md measures it).
``drop_unread_memo`` rewrites a pickle so that only the memo entries some ``GET`` reads back (a
shared or recursive object) remain, renumbered: the stdlib's ``pickletools.optimize``, but
streamed from file to file in two passes (large arguments copied in chunks, never read whole).
The result is an ordinary pickle of the same protocol; objects that were shared stay shared.
"""

from __future__ import annotations

import pickle
import pickletools
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

_OPCODES = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
#: arguments that are a length followed by that many bytes (strings, bytes, buffers): skipped
_LENGTH_PREFIXED = {
    pickletools.TAKEN_FROM_ARGUMENT1: ("<B", 1),
    pickletools.TAKEN_FROM_ARGUMENT4: ("<i", 4),
    pickletools.TAKEN_FROM_ARGUMENT4U: ("<I", 4),
    pickletools.TAKEN_FROM_ARGUMENT8U: ("<Q", 8),
}
#: the pickler's frame size (``pickle._Pickler``): small opcodes are grouped into frames of this
#: size, larger ones are written outside frames
_FRAME_TARGET = 64 * 1024
_CHUNK = 1 << 20


def _opcodes(fh: IO[bytes]) -> Iterator[tuple[str, int | None, int, int]]:
    """(name, memo index of a PUT or GET, start, end) of each opcode up to ``STOP``."""
    while True:
        start = fh.tell()
        code = fh.read(1)
        op = _OPCODES.get(code)
        if op is None:
            raise ValueError(f"not a pickle: opcode {code!r} at byte {start}")
        index = None
        if op.arg is not None:
            if op.arg.n in _LENGTH_PREFIXED:
                fmt, size = _LENGTH_PREFIXED[op.arg.n]
                fh.seek(struct.unpack(fmt, fh.read(size))[0], 1)
            else:
                value = op.arg.reader(fh)
                if "PUT" in op.name or "GET" in op.name:
                    index = int(value)
        yield op.name, index, start, fh.tell()
        if op.name == "STOP":
            return


class Writer(Protocol):
    """Where the rewritten pickle goes (a binary file, or a writer hashing on its way to one)."""

    def write(self, data: bytes | bytearray, /) -> int: ...


class _Frames:
    """Writes opcodes in frames as the pickler does (the unpickler then reads a frame at once)."""

    def __init__(self, out: Writer) -> None:
        self._out = out
        self._frame = bytearray()

    def add(self, data: bytes) -> None:
        self._frame += data
        if len(self._frame) >= _FRAME_TARGET:
            self.commit()

    def commit(self) -> None:
        if self._frame:
            self._out.write(pickle.FRAME + struct.pack("<Q", len(self._frame)))
            self._out.write(self._frame)
            self._frame = bytearray()

    def copy_unframed(self, source: IO[bytes], start: int, end: int) -> None:
        """A large opcode (an array's bytes), copied in chunks outside any frame."""
        self.commit()
        source.seek(start)
        left = end - start
        while left:
            chunk = source.read(min(left, _CHUNK))
            if not chunk:
                raise ValueError("the pickle ended inside an opcode")
            self._out.write(chunk)
            left -= len(chunk)


def drop_unread_memo(source: Path, out: Writer) -> None:
    """Write the pickle in ``source`` to ``out`` without the memo entries no ``GET`` reads."""
    with open(source, "rb") as fh:
        read_back = {index for name, index, _, _ in _opcodes(fh) if "GET" in name}
    with open(source, "rb") as fh, open(source, "rb") as raw:
        frames = _Frames(out)
        memoized = 0  # the index the next MEMOIZE of the source takes
        renumbered: dict[int, int] = {}
        for name, index, start, end in _opcodes(fh):
            if name == "PROTO" and start == 0:  # the header precedes any frame
                raw.seek(start)
                out.write(raw.read(end - start))
            elif name == "FRAME":  # frames are rebuilt around what is kept
                continue
            elif name == "MEMOIZE" or "PUT" in name:
                old = memoized if index is None else index
                memoized += 1
                if old in read_back:
                    new = renumbered[old] = len(renumbered)
                    frames.add(_put(new, name))
            elif "GET" in name:
                assert index is not None
                new = renumbered[index]
                frames.add(pickle.BINGET + bytes([new]) if new < 256 else pickle.LONG_BINGET + struct.pack("<I", new))
            elif end - start > _FRAME_TARGET:
                frames.copy_unframed(raw, start, end)
            else:
                raw.seek(start)
                frames.add(raw.read(end - start))
        frames.commit()


def _put(index: int, name: str) -> bytes:
    """The opcode memoizing the object on the stack at ``index``: MEMOIZE (protocol 4 on) takes
    the next index, which the renumbering makes ``index``; older protocols name it."""
    if name == "MEMOIZE":
        return pickle.MEMOIZE
    return pickle.BINPUT + bytes([index]) if index < 256 else pickle.LONG_BINPUT + struct.pack("<I", index)
