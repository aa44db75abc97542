"""API keys and their roles: who may call the service, and what each key may do.

A key is a random secret; the server keeps only its SHA-256 (a key is 32 random bytes, so a slow
password hash would add nothing against guessing it). The keys are ``LABELSERVE_API_KEY`` (one
``admin`` key named ``default``) and the entries of ``LABELSERVE_API_KEYS_FILE``: JSON lines
``{"name": "ci", "role": "predict", "sha256": "<64 hex digits>"}``, blank lines and lines
starting with ``#`` ignored. The file is read again when it changes (its mtime, size or inode,
looked at once a second at most), so a key is added or revoked without a restart; a file that
no longer parses leaves the keys read before in force, and says so in the log (ERROR).

Roles are ordered, each allowing what the one before it does: ``read`` (GET routes, the
dashboard read-only), ``predict`` (predictions, V2 inference, cancelling its own jobs),
``train`` (uploads, splits, trainings, evaluations, comparisons, alias moves), ``admin``
(deletes, artifact exports, others' jobs). Which route needs which is ``app.api.access``'s table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.config import Settings

log = logging.getLogger("labelserve.keys")

#: the name of ``LABELSERVE_API_KEY``'s key (reserved: no entry of the file may take it)
DEFAULT_NAME = "default"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: how often, at most, the keys file is looked at for a change
RELOAD_SECONDS = 1.0
#: what every key made by ``new_key`` starts with (secret scanners can match it)
KEY_PREFIX = "lsk_"


class Role(str, Enum):
    """A key's role; each allows everything the ones before it do."""

    READ = "read"
    PREDICT = "predict"
    TRAIN = "train"
    ADMIN = "admin"

    def allows(self, needed: Role) -> bool:
        return _RANKS[self] >= _RANKS[needed]


_RANKS = {role: rank for rank, role in enumerate(Role)}


class KeyEntry(BaseModel):
    """One line of the keys file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="the key's name, recorded on what it does")
    role: Role = Field(description="what the key may do")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the key, lowercase hex")


@dataclass(frozen=True)
class Key:
    """A key the server accepts: its name and role."""

    name: str
    role: Role


@dataclass(frozen=True)
class Caller:
    """Who a request comes from, as the services record it: the key's name (None when the server
    has no keys, and then the role is ``admin``) and the client's address."""

    name: str | None
    role: Role
    address: str | None


class KeyFileError(ValueError):
    """The keys file cannot be read as a list of keys."""


def digest(key: str | bytes) -> str:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).hexdigest()


def read_entries(path: Path) -> list[KeyEntry]:
    """The file's entries; ``KeyFileError`` naming the line at fault (a name or key twice, the reserved name)."""
    entries: list[KeyEntry] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = KeyEntry.model_validate(json.loads(line))
        except (ValueError, ValidationError) as exc:
            raise KeyFileError(f"{path}, line {number}: not a key entry ({_first_error(exc)})") from None
        if entry.name == DEFAULT_NAME:
            raise KeyFileError(f"{path}, line {number}: the name '{DEFAULT_NAME}' is LABELSERVE_API_KEY's")
        for other in entries:
            if entry.name == other.name or entry.sha256 == other.sha256:
                same = "name" if entry.name == other.name else "key"
                raise KeyFileError(f"{path}, line {number}: the same {same} as '{other.name}'")
        entries.append(entry)
    return entries


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(str(p) for p in error['loc']) or 'entry'}: {error['msg']}"
    return str(exc)


class KeyStore:
    """The keys the server accepts, by the SHA-256 of each: ``LABELSERVE_API_KEY``'s and the
    file's, the file read again when it has changed.

    Reading a file that is missing or does not parse at start-up raises ``KeyFileError``; later,
    a file that does not parse leaves the previous keys in force (logged at ERROR), and a missing
    one revokes every key of the file (logged at WARNING).
    """

    def __init__(self, path: Path | None, default_key: str | None) -> None:
        self.path = path
        self._default = {digest(default_key): Key(DEFAULT_NAME, Role.ADMIN)} if default_key else {}
        if path is not None and not path.is_file():
            raise KeyFileError(f"LABELSERVE_API_KEYS_FILE: {path} is not a file")
        self._seen = _signature(path)
        self._keys = self._read()
        self._next_check = time.monotonic() + RELOAD_SECONDS

    @classmethod
    def of(cls, settings: Settings) -> KeyStore | None:
        """The server's keys; None when it has none (every route is open)."""
        if not settings.has_api_keys:
            return None
        return cls(settings.api_keys_file, settings.api_key or None)

    def identify(self, given: bytes) -> Key | None:
        """The key ``given`` is, or None (unknown or revoked)."""
        if self.path is not None and time.monotonic() >= self._next_check:
            self._reload()
        return self._keys.get(digest(given))

    def named(self, name: str) -> tuple[Key, str] | None:
        """The key named ``name`` and its SHA-256, or None (unknown or revoked): what a dashboard
        session, which records the key's name, is checked against."""
        if self.path is not None and time.monotonic() >= self._next_check:
            self._reload()
        for sha256, key in self._keys.items():
            if key.name == name:
                return key, sha256
        return None

    def _read(self) -> dict[str, Key]:
        entries = read_entries(self.path) if self.path is not None and self._seen is not None else []
        keys = dict(self._default)
        for entry in entries:
            if entry.sha256 in keys:
                raise KeyFileError(f"{self.path}: the key of '{entry.name}' is LABELSERVE_API_KEY's")
            keys[entry.sha256] = Key(entry.name, entry.role)
        return keys

    def _reload(self) -> None:
        self._next_check = time.monotonic() + RELOAD_SECONDS
        seen = _signature(self.path)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            self._keys = self._read()
        except (OSError, KeyFileError) as exc:
            log.error("API keys file not re-read: the keys read before stay in force", extra={"error": str(exc)})
            return
        if seen is None:
            log.warning("API keys file missing: none of its keys is accepted", extra={"path": str(self.path)})
        else:
            log.info("API keys file re-read", extra={"path": str(self.path), "keys": len(self._keys)})


def _signature(path: Path | None) -> tuple[int, int, int] | None:
    """What tells a changed file (mtime, size, inode: a rewrite within one mtime tick changes the
    size or, replaced by rename, the inode); None for no file."""
    try:
        stat = os.stat(path) if path is not None else None
    except FileNotFoundError:
        return None
    return None if stat is None else (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def add_key(path: Path, name: str, role: Role) -> str:
    """Make a key, append its entry to the file (created, readable by its owner only, when
    absent) and return the key: the file keeps only its SHA-256, so this is its one showing."""
    entries = read_entries(path) if path.exists() else []
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    try:
        entry = KeyEntry(name=name, role=role, sha256=digest(key))
    except ValidationError:
        raise KeyFileError(
            f"name '{name}': 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or a digit"
        ) from None
    if name == DEFAULT_NAME or any(e.name == name for e in entries):
        taken = "reserved for LABELSERVE_API_KEY" if name == DEFAULT_NAME else f"already in {path}"
        raise KeyFileError(f"name '{name}' is {taken}")
    ends_open = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as file:
        file.write(("\n" if ends_open else "") + entry.model_dump_json() + "\n")
        file.flush()
        os.fsync(file.fileno())
    return key


def remove_key(path: Path, name: str) -> bool:
    """Revoke a key: rewrite the file without its entry (comments and the others kept; replaced
    at once, by rename). False when no entry has that name."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    read_entries(path)  # a file that does not parse is not rewritten
    kept = [line for line in lines if _entry_name(line) != name]
    if len(kept) == len(lines):
        return False
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as file:
        file.writelines(kept)
        file.flush()
        os.fsync(file.fileno())
    os.chmod(file.name, path.stat().st_mode & 0o777)
    os.replace(file.name, path)
    return True


def _entry_name(line: str) -> str | None:
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    name = json.loads(line).get("name")
    return name if isinstance(name, str) else None
