"""Storing datasets: parsed arrays content-addressed in the store, metadata in the registry.

Parsing and validation happen entirely before anything is written, so a rejected upload leaves
nothing behind; the arrays are written (atomically) before the row that makes them visible.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.formats import ParsedDataset
from app.orm import Dataset
from app.store import Store


def upload_digest(parts: list[bytes], options: dict[str, Any]) -> str:
    """sha256 over what was uploaded: every file (length-prefixed) and the parse options."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def dataset_id(sha256: str) -> str:
    return sha256[:16]


def store_dataset(
    session: Session, store: Store, parsed: ParsedDataset, sha256: str, name: str, fmt: str
) -> tuple[Dataset, bool]:
    """The dataset row for ``sha256`` and whether it was created now (False: it existed)."""
    existing = session.get(Dataset, dataset_id(sha256))
    if existing is not None:
        return existing, False
    store.save_dataset(sha256, np.ascontiguousarray(parsed.X), np.ascontiguousarray(parsed.Y))
    row = Dataset(
        id=dataset_id(sha256),
        name=name,
        kind=parsed.kind,
        format=fmt,
        n_samples=int(parsed.X.shape[0]),
        n_features=int(parsed.X.shape[1]),
        n_labels=int(parsed.Y.shape[1]),
        feature_names=list(parsed.feature_names),
        label_names=list(parsed.label_names),
        sha256=sha256,
        warnings=list(parsed.warnings),
    )
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # the same upload, stored concurrently
        return session.get(Dataset, dataset_id(sha256)), False  # type: ignore[return-value]
    return row, True
