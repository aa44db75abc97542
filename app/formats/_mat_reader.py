"""Child process of ``mat_format``: read one MAT file from stdin with ``scipy.io.loadmat`` and
write its numeric variables to stdout as an ``.npz`` (plain arrays, no pickle).

It runs as a separate process because scipy's MAT reader can crash the interpreter
(segmentation fault) on corrupt input, and an upload must never take the service down. It is run
by path, so it imports only numpy and scipy, not the ``app`` package.

Arguments: the largest number of values one variable may hold (``max_cells``) and the ``part``
(``train``/``test``). Only the variables a dataset layout can use are read. Their dimensions are
taken from the variable headers first (:func:`v5_variable_shapes`; a compressed variable's header
is the first few bytes of its zlib stream, so nothing else is inflated), which refuses a
kilobyte-sized compressed file that would inflate to gigabytes before anything is allocated. An
address-space limit on this process backs the check up for what headers cannot tell (MATLAB v4
sparse matrices).

Exit codes: 0 ok; 2 unreadable file (message on stderr); 3 MATLAB v7.3 (HDF5) file; 4 a variable
larger than ``max_cells`` (message on stderr).
"""

import io
import json
import math
import resource
import struct
import sys
import zlib

import numpy as np
import scipy.io
import scipy.sparse

_MI_INT8, _MI_INT32, _MI_UINT32, _MI_MATRIX, _MI_COMPRESSED = 1, 5, 6, 14, 15
_HEADER_BYTES = 4096  # of a compressed variable inflated to read its header; ample for any name


class TooLarge(Exception):
    pass


def _tag(buf: bytes, pos: int, endian: str) -> tuple[int, int, int, int]:
    """(type, size, data start, next element) of the data element at ``pos``."""
    first, second = struct.unpack_from(endian + "II", buf, pos)
    if first >> 16:  # small data element: size in the upper half, data in the tag's 4 last bytes
        return first & 0xFFFF, first >> 16, pos + 4, pos + 8
    return first, second, pos + 8, pos + 8 + second + (-second % 8)


def _matrix_header(buf: bytes, endian: str) -> tuple[str, tuple[int, ...]]:
    """Name and dimensions of a miMATRIX element's content (array flags, dims, name)."""
    kind, size, start, pos = _tag(buf, 0, endian)
    if kind != _MI_UINT32 or size != 8:
        raise ValueError("array flags missing")
    kind, size, start, pos = _tag(buf, pos, endian)
    if kind != _MI_INT32:
        raise ValueError("dimensions missing")
    dims = struct.unpack_from(f"{endian}{size // 4}i", buf, start)
    kind, size, start, pos = _tag(buf, pos, endian)
    if kind != _MI_INT8:
        raise ValueError("name missing")
    return buf[start : start + size].decode("latin-1"), tuple(dims)


def v5_variable_shapes(content: bytes) -> dict[str, tuple[int, ...]] | None:
    """Dimensions of every top-level variable of a MATLAB v5/v7 file, read from the headers;
    None when the headers cannot be read this way (then the address-space limit alone guards
    the reading, and scipy reports what is wrong with the file)."""
    try:
        return _scan_v5(content)
    except (ValueError, struct.error, zlib.error, UnicodeDecodeError):
        return None


def _scan_v5(content: bytes) -> dict[str, tuple[int, ...]]:
    endian = "<" if content[126:128] == b"IM" else ">"
    shapes: dict[str, tuple[int, ...]] = {}
    pos = 128
    while pos + 8 <= len(content):
        kind, size, start, after = _tag(content, pos, endian)
        if kind == _MI_COMPRESSED:
            inflater = zlib.decompressobj()
            head = inflater.decompress(content[start : start + size], _HEADER_BYTES)
            inner, _, inner_start, _ = _tag(head, 0, endian)
            if inner != _MI_MATRIX:
                raise ValueError("compressed element is not a matrix")
            name, dims = _matrix_header(head[inner_start:], endian)
            after = start + size  # compressed elements are not padded
        elif kind == _MI_MATRIX:
            name, dims = _matrix_header(content[start : start + min(size, _HEADER_BYTES)], endian)
        else:
            raise ValueError(f"unexpected data element type {kind}")
        shapes[name] = dims
        pos = after
    return shapes


def _is_v5(content: bytes) -> bool:
    """A MATLAB v5/v7 file (not v4, whose first bytes hold a zero; not v7.3, version 0x0200)."""
    if len(content) < 128 or content[126:128] not in (b"IM", b"MI") or 0 in content[:4]:
        return False
    endian = "<" if content[126:128] == b"IM" else ">"
    return struct.unpack_from(endian + "H", content, 124)[0] == 0x0100


def _check(name: str, shape: tuple[int, ...], max_cells: int) -> None:
    cells = math.prod(shape)
    if cells > max_cells:
        raise TooLarge(
            f"MAT variable {name!r} is {' x '.join(map(str, shape))} = {cells} values; at most {max_cells} are "
            "accepted (LABELSERVE_MAX_DATASET_CELLS)"
        )


def _limit_memory(max_cells: int) -> None:
    """Cap this process's address space: the interpreter and libraries, plus a few copies of the
    largest accepted variable."""
    limit = (2 << 30) + 4 * 8 * max_cells
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def main() -> int:
    max_cells, part = int(sys.argv[1]), sys.argv[2]
    wanted = ("features", "labels", f"{part}_data", f"{part}_target", "data", "target")
    content = sys.stdin.buffer.read()
    _limit_memory(max_cells)
    try:
        shapes = v5_variable_shapes(content) if _is_v5(content) else None
        if shapes is None:
            present, skipped = list(wanted), []
        else:
            present = [name for name in shapes if name in wanted]
            skipped = [name for name in shapes if name not in wanted]
            for name in present:
                _check(name, shapes[name], max_cells)
        variables = scipy.io.loadmat(io.BytesIO(content), variable_names=present)
    except TooLarge as exc:
        print(exc, file=sys.stderr)
        return 4
    except NotImplementedError as exc:
        print(exc, file=sys.stderr)
        return 3
    except MemoryError:
        print(
            "MAT: the file expands beyond the memory allowed for reading it (LABELSERVE_MAX_DATASET_CELLS)",
            file=sys.stderr,
        )
        return 4
    except Exception as exc:  # corrupt input: report, never crash
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    names, arrays, other = [], [], {}
    for name, value in variables.items():
        if name.startswith("__") or name not in wanted:
            continue
        try:
            _check(name, value.shape, max_cells)
        except TooLarge as exc:
            print(exc, file=sys.stderr)
            return 4
        if scipy.sparse.issparse(value):
            value = value.toarray()
        value = np.asarray(value)
        if value.dtype.kind in "biuf":
            names.append(name)
            arrays.append(value)
        else:
            other[name] = str(value.dtype)
    meta = np.array(json.dumps({"names": names, "other": other, "skipped": skipped}))
    buffer = io.BytesIO()
    np.savez(buffer, meta, *arrays)  # positional: variable names cannot clash with savez's
    sys.stdout.buffer.write(buffer.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
