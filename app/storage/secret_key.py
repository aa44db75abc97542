"""The server's secret: made once and kept in the store, so every process on it signs alike.

``LABELSERVE_SECRET_KEY`` takes precedence; without it the first process to need a secret
writes 32 random bytes (hex) to ``secret.key`` in the model dir, readable by its owner only
(0600), and every other process, of this host or another mounting the same store, reads that
file. Two processes starting at once cannot both win: each writes a temporary file and links
it to the final name, which fails for all but the first.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

FILENAME = "secret.key"
_BYTES = 32


def stored_secret(root: Path) -> bytes:
    """The secret kept in ``root`` (made now if there is none)."""
    path = root / FILENAME
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{FILENAME}.", suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            os.link(tmp, path)
        except FileExistsError:  # another process made it first: use its secret
            pass
        finally:
            os.unlink(tmp)
    secret = path.read_bytes().strip()
    if len(secret) < _BYTES:
        raise RuntimeError(f"{path} holds no secret ({len(secret)} bytes); remove it to have a new one made")
    return secret
