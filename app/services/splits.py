"""``POST /datasets/{id}/split``: a stored dataset split into a train and a test dataset.

Each part is stored like an upload (the same arrays file, the same checks of the row counts) with
its lineage: ``parent_id`` and ``split`` (part, fraction, seed, method). A part's id is derived
from the parent's sha256, the part, the fraction and the seed, so the same request again answers
the stored parts (200) instead of storing copies, as the same upload does. Names do not make a
part: the same split again with other names answers the stored parts under their stored names,
and a warning says the new names were not used (a dataset's name never changes).

Default names never clash: a new split's parts are ``<parent>-train`` and ``<parent>-test``, or,
when another dataset already holds either name (an earlier split of the same parent with another
fraction or seed), ``<parent>-train-2`` and ``<parent>-test-2``, and so on: a name that two
datasets hold could only be used by id (a 409 "2 datasets are named").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InvalidInput
from app.evaluation.splitting import split_problem, train_test_rows
from app.formats import ParsedDataset
from app.schemas import DatasetOut, SplitOut, SplitRequest
from app.services.datasets import check_name, dataset_id, dataset_out, get_dataset, store_dataset
from app.storage.orm import Dataset
from app.storage.store import Store
from app.upload_options import DATASET_NAME_MAX_LENGTH

# how many labels a warning about labels missing from a part names
_NAMED_LABELS = 5
# default names tried for a split's parts (``-2``, ``-3``, ...) before the part's id is the suffix
_NAME_COUNTER = 100


def split_dataset(session: Session, store: Store, dataset_ref: str, body: SplitRequest) -> tuple[SplitOut, bool]:
    """The two parts and whether either was stored now (False: the same split existed)."""
    for field in ("train_name", "test_name"):
        if getattr(body, field) is not None:
            check_name(getattr(body, field), ("body", field))
    parent = get_dataset(session, dataset_ref)
    problem = split_problem(parent.n_samples, body.test_fraction)
    if problem is not None:
        raise InvalidInput(problem, loc=("body", "test_fraction"))
    arrays = store.load_stored(parent.sha256)
    train, test = train_test_rows(np.asarray(arrays.Y), parent.kind, body.test_fraction, body.random_state)
    method = "iterative stratification" if parent.kind == "multilabel" else "shuffled"
    hows = {
        part: {"part": part, "test_fraction": body.test_fraction, "random_state": body.random_state, "method": method}
        for part in ("train", "test")
    }
    defaults = default_names(session, parent, [dataset_id(_part_digest(parent.sha256, h)) for h in hows.values()])
    parts: dict[str, DatasetOut] = {}
    created = False
    for part, rows, name in (("train", train, body.train_name), ("test", test, body.test_name)):
        how = hows[part]
        parsed = ParsedDataset(
            X=arrays.X[rows],
            Y=arrays.Y[rows],
            feature_names=list(parent.feature_names),
            label_names=list(parent.label_names),
            kind=parent.kind,  # type: ignore[arg-type]  # a stored dataset's kind is one of the two
            warnings=_missing_labels(arrays.Y[rows], parent, part),
        )
        sha256 = _part_digest(parent.sha256, how)
        stored = store_dataset(
            session, store, parsed, sha256, name or defaults[part], parent.format, lineage=(parent.id, how)
        )
        out = dataset_out(stored.row, store)
        out.warnings = [*out.warnings, *stored.warnings(), *_name_unused(stored.row, name, part)]
        parts[part] = out
        created = created or stored.created
    return SplitOut(train=parts["train"], test=parts["test"]), created


def default_names(session: Session, parent: Dataset, part_ids: list[str]) -> dict[str, str]:
    """The parts' default names: ``<parent>-train`` and ``<parent>-test`` with the first counter
    (none, ``-2``, ``-3``, ...) whose two names no other dataset holds (the parts themselves,
    ``part_ids``, stored by the same split before, keep their names anyway). One query."""
    base = parent.name[: DATASET_NAME_MAX_LENGTH - len("-train-") - 16]  # room for the last resort, an id
    candidates = [
        {part: f"{base}-{part}{'' if n == 1 else f'-{n}'}" for part in ("train", "test")}
        for n in range(1, _NAME_COUNTER + 1)
    ]
    taken = set(
        session.scalars(
            select(Dataset.name).where(
                Dataset.name.in_([name for names in candidates for name in names.values()]),
                Dataset.id.not_in(part_ids),
            )
        )
    )
    for names in candidates:
        if not taken & set(names.values()):
            return names
    return {part: f"{base}-{part}-{part_id}" for part, part_id in zip(("train", "test"), part_ids)}


def _name_unused(row: Dataset, name: str | None, part: str) -> list[str]:
    """A warning when a part stored before keeps its name instead of the one asked for now."""
    if name is None or name == row.name:
        return []
    return [
        f"this split's {part} part is already stored as '{row.name}' (id {row.id}); the name '{name}' was not used. "
        "The same dataset, fraction and seed make the same parts: use the id, or delete the part and split again "
        "to rename it"
    ]


def _part_digest(parent_sha256: str, how: dict[str, Any]) -> str:
    """The identity of a part: its parent's content and how it was cut from it."""
    return hashlib.sha256(f"split:{parent_sha256}:{json.dumps(how, sort_keys=True)}".encode()).hexdigest()


def _missing_labels(Y: Any, parent: Dataset, part: str) -> list[str]:
    """A warning naming the labels no row of a multi-label part has (a rare label's few rows all
    fell on the other side): metrics of those labels mean little on that part."""
    if parent.kind != "multilabel":
        return []
    absent = np.flatnonzero(np.asarray(Y).sum(axis=0) == 0)
    if absent.size == 0:
        return []
    named = ", ".join(repr(parent.label_names[j]) for j in absent[:_NAMED_LABELS])
    more = f" and {absent.size - _NAMED_LABELS} more" if absent.size > _NAMED_LABELS else ""
    return [f"no row of the {part} part has label(s) {named}{more}"]
