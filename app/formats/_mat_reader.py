"""Child process of ``mat_format``: read one MAT file from stdin with ``scipy.io.loadmat`` and
write its numeric variables to stdout as an ``.npz`` (plain arrays, no pickle).

It runs as a separate process because scipy's MAT reader can crash the interpreter
(segmentation fault) on corrupt input, and an upload must never take the service down. It is run
by path, so it imports only numpy and scipy, not the ``app`` package.

Exit codes: 0 ok; 2 unreadable file (message on stderr); 3 MATLAB v7.3 (HDF5) file.
"""

import io
import json
import sys

import numpy as np
import scipy.io
import scipy.sparse


def main() -> int:
    content = sys.stdin.buffer.read()
    try:
        variables = scipy.io.loadmat(io.BytesIO(content))
    except NotImplementedError as exc:
        print(exc, file=sys.stderr)
        return 3
    except Exception as exc:  # corrupt input: report, never crash
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    names, arrays, other = [], [], {}
    for name, value in variables.items():
        if name.startswith("__"):
            continue
        if scipy.sparse.issparse(value):
            value = value.toarray()
        value = np.asarray(value)
        if value.dtype.kind in "biuf":
            names.append(name)
            arrays.append(value)
        else:
            other[name] = str(value.dtype)
    meta = np.array(json.dumps({"names": names, "other": other}))
    buffer = io.BytesIO()
    np.savez(buffer, meta, *arrays)  # positional: variable names cannot clash with savez's
    sys.stdout.buffer.write(buffer.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
