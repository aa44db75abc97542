"""Datasets: parsing uploads, storing them content-addressed, listing, showing and deleting them.

Parsing and validation happen entirely before anything is written, so a rejected upload leaves
nothing behind; the arrays are written (atomically) before the row that makes them visible.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError
from sqlalchemy import Select, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app.config import Settings
from app.errors import Conflict, InvalidFields, InvalidInput, NotFound
from app.formats import (
    ConflictingOptions,
    DatasetFormatError,
    DatasetLimits,
    ParsedDataset,
    ParseOptions,
    detect_format,
    parse_dataset,
)
from app.formats.common import generated_names
from app.formats.validation import finalize
from app.jobs.base import ACTIVE
from app.schemas import DatasetOut, DatasetSummary, InlineData, Page
from app.services import audit
from app.services.keys import Caller
from app.services.paging import PageParams, page
from app.storage import dataset_files
from app.storage.db import commit_deletion, keep_spare
from app.storage.orm import Dataset, Job, ModelVersion
from app.storage.store import Store
from app.suggest import did_you_mean
from app.upload_options import DATASET_NAME_MAX_LENGTH, name_fault

# how many ids an ambiguous dataset name lists
_NAMED_SAME = 5
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # what upload_options refuses in a dataset name
_ID_SHAPED = re.compile(r"[0-9a-f]{16}")  # what ``dataset_id`` makes of a sha256
# how many stored names a "did you mean" compares an unknown dataset name with
_SUGGESTED_FROM = 10_000
# extensions kept as the dataset's ``format`` when the format was detected from the file name
_KNOWN_EXTENSIONS = ("arff", "csv", "tsv", "svm", "libsvm", "svmlight", "mat")


@dataclass(frozen=True)
class Upload:
    """One ``POST /datasets``: the files as received and the form's options."""

    content: bytes
    filename: str | None
    labels_file: bytes | None
    name: str | None
    options: dict[str, Any]


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


def dataset_out(row: Dataset, store: Store) -> DatasetOut:
    """The dataset in full, with how it is stored (read from its file's small ``info`` member)."""
    out = DatasetOut.model_validate(row)
    stored = store.dataset_storage(row.sha256)
    if stored is None:
        return out
    return out.model_copy(
        update={"storage": stored.storage, "density": stored.density, "stored_bytes": stored.stored_bytes}
    )


def limits_of(settings: Settings) -> DatasetLimits:
    """The largest dataset the configuration admits (uploads and inline training data alike)."""
    return DatasetLimits(
        max_cells=settings.max_dataset_cells,
        max_features=settings.max_dataset_features,
        max_labels=settings.max_dataset_labels,
    )


def upload(session: Session, store: Store, limits: DatasetLimits, request: Upload) -> tuple[DatasetOut, bool]:
    """Parse and store an upload; the dataset and whether it is new (False: the same upload existed).

    A format error is a 422 located at the file; a dataset beyond ``limits`` a 413.
    """
    if request.name is not None:
        check_name(request.name, ("body", "name"))
    try:
        options = ParseOptions(**request.options)
    except ValidationError as exc:
        raise InvalidFields.from_pydantic(exc, loc=("body",)) from None
    parts = [request.content] + ([request.labels_file] if request.labels_file is not None else [])
    sha256 = upload_digest(parts, options.model_dump())
    try:
        parsed = parse_dataset(
            request.content, filename=request.filename, labels_file=request.labels_file, options=options, limits=limits
        )
    except ConflictingOptions as exc:  # located at every field it names, each a form field of the upload
        raise InvalidFields([(("body", field), exc.message, "value_error") for field in exc.fields]) from None
    except DatasetFormatError as exc:
        exc.loc = exc.loc or ("body", "file")
        raise
    name = request.name or _printable(request.filename or "") or "dataset"
    fmt = _format_name(request.content, request.filename, options.format)
    stored = store_dataset(session, store, parsed, sha256, name, fmt)
    row, created = stored.row, stored.created
    out = dataset_out(row, store)
    out.warnings = [*out.warnings, *stored.warnings()]
    if not created and row.name != name:  # the answer is the stored dataset, under its stored name
        out.warnings = [
            *out.warnings,
            f"this upload is already stored as '{row.name}' (id {row.id}); the name '{name}' was not used. "
            "The same file and options are one dataset: use its id, or delete it and upload again to rename it",
        ]
    return out, created


def _printable(text: str) -> str:
    """A file name fit to be a dataset's name: no control or format characters (direction
    controls among them), at most 255 characters, not shaped like an id."""
    name = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")[:DATASET_NAME_MAX_LENGTH]
    return "" if _ID_SHAPED.fullmatch(name) else name


def check_name(name: str, loc: tuple[str, ...]) -> None:
    """A name given to a dataset (an upload's, a split part's) holds no control or direction
    control character and is not shaped like a dataset id: ids win over names wherever a dataset
    is referred to, so a name equal to another dataset's id could never be used."""
    fault = name_fault(name)
    if fault is not None:
        raise InvalidInput(f"a dataset name {fault}", loc=loc)
    if _ID_SHAPED.fullmatch(name):
        raise InvalidInput(
            f"'{name}' has the shape of a dataset id (16 hexadecimal digits), and a dataset id wins over a name "
            "wherever a dataset is referred to; choose another name",
            loc=loc,
        )


def _format_name(content: bytes, filename: str | None, requested: str) -> str:
    """The format as requested, or the file's extension when it named a known format, or what was detected."""
    if requested != "auto":
        return requested
    extension = filename.rsplit(".", 1)[1].lower() if filename and "." in filename else ""
    return extension if extension in _KNOWN_EXTENSIONS else detect_format(content, filename)


@dataclass(frozen=True)
class StoredDataset:
    """What ``store_dataset`` did: the row, whether it was created now (False: it existed), and,
    for one that existed, what was wrong with its stored arrays when they had to be written again."""

    row: Dataset
    created: bool
    restored: str | None = None

    def warnings(self) -> list[str]:
        """The answer's warning about arrays written again (none for an ordinary duplicate)."""
        if self.restored is None:
            return []
        return [f"{self.restored}; they have been written again, and the dataset can be used again"]


def store_dataset(
    session: Session,
    store: Store,
    parsed: ParsedDataset,
    sha256: str,
    name: str,
    fmt: str,
    *,
    lineage: tuple[str, dict[str, Any]] | None = None,
) -> StoredDataset:
    """The dataset row for ``sha256``, created now or found; a row found whose stored arrays are
    missing or corrupt gets them written again from ``parsed`` (the same upload: the same arrays).

    ``lineage``: the parent's id and how this dataset was split from it (a part of a split).
    """
    existing = session.get(Dataset, dataset_id(sha256))
    if existing is not None:
        return StoredDataset(existing, False, store.restore_dataset(sha256, parsed.X, parsed.Y))
    store.save_dataset(sha256, parsed.X, parsed.Y)
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
        parent_id=lineage[0] if lineage else None,
        split=lineage[1] if lineage else None,
    )
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # the same upload, stored concurrently
        return StoredDataset(session.get_one(Dataset, dataset_id(sha256)), False)
    session.commit()
    return StoredDataset(row, True)


def parse_inline(limits: DatasetLimits, data: InlineData) -> ParsedDataset:
    """Validate small inline training data like an upload, without storing anything yet."""
    loc = ("body", "data")
    try:
        X = np.asarray(data.X, dtype=np.float64)
        Y = np.asarray(data.Y, dtype=np.float64)
    except ValueError:
        raise InvalidInput("X and Y must be rectangular arrays of numbers", loc=loc) from None
    try:
        if X.ndim != 2 or Y.ndim != 2:
            raise DatasetFormatError("X and Y must be 2-D (one row per sample)")
        return finalize(
            X,
            Y,
            data.feature_names or generated_names("f", X.shape[1]),
            data.label_names or generated_names("l", Y.shape[1]),
            [],
            limits=limits,
        )
    except DatasetFormatError as exc:
        exc.loc = exc.loc or loc
        raise


def store_inline(session: Session, store: Store, parsed: ParsedDataset) -> Dataset:
    """Store checked inline data as a dataset, so models keep their lineage (only once the whole
    training request has been accepted: a rejected request stores nothing). Its digest is of the
    arrays and names (``dataset_files.digest``): the same data sent again is the same dataset."""
    names = {"feature_names": np.asarray(parsed.feature_names), "label_names": np.asarray(parsed.label_names)}
    digest = dataset_files.digest({"inline_X": np.asarray(parsed.X), "inline_Y": parsed.Y, **names})
    return store_dataset(session, store, parsed, digest, "inline", "inline").row


def get_dataset(session: Session, ref: str, *, loc: tuple[str, ...] = ("path", "dataset_id")) -> Dataset:
    """The dataset with id ``ref``, or else the one dataset named ``ref``.

    Ids win over names (an id is what the API hands out; a name is what a user remembers, as
    ``labelserve datasets list`` shows it). A name held by several datasets is a Conflict listing
    their ids; an unknown one NotFound with the closest stored name, both located at ``loc`` (the
    path, or the body field naming it). Names are only looked up when ``ref`` is not an id.
    """
    if _CONTROL.search(ref):  # no id or name holds one (uploads refuse them; PostgreSQL cannot compare a NUL)
        raise NotFound(f"dataset {ref!r} not found: ids and names have no control characters", loc=loc)
    row = session.get(Dataset, ref)
    if row is not None:
        return row
    named = session.scalars(
        select(Dataset).where(Dataset.name == ref).order_by(Dataset.created_at, Dataset.id).limit(_NAMED_SAME + 1)
    ).all()
    if len(named) == 1:
        return named[0]
    if named:
        ids = ", ".join(row.id for row in named[:_NAMED_SAME])
        more = " and more" if len(named) > _NAMED_SAME else ""
        raise Conflict(
            f"{len(named) if not more else 'several'} datasets are named '{ref}' ({ids}{more}); give the id", loc=loc
        )
    names = session.scalars(select(Dataset.name).distinct().limit(_SUGGESTED_FROM)).all()
    raise NotFound(f"dataset '{ref}' not found (no such id or name){did_you_mean(ref, names)}", loc=loc)


def dataset_with_features(
    session: Session, dataset_id: str, feature_names: list[str], *, loc: tuple[str, ...] = ("body", "dataset_id")
) -> Dataset:
    """A dataset to predict or evaluate with a model: it must have the model's features, in order."""
    dataset = get_dataset(session, dataset_id, loc=loc)
    if dataset.feature_names != feature_names:
        raise InvalidInput(
            f"expected the model's {len(feature_names)} features in training order; "
            f"dataset '{dataset.id}' has {dataset.n_features} features that differ",
            loc=loc,
        )
    return dataset


def list_datasets(session: Session, params: PageParams) -> Page[DatasetSummary]:
    """One page of datasets without their names: the name columns are not even read."""
    query = (
        select(Dataset)
        .options(defer(Dataset.feature_names), defer(Dataset.label_names))
        .order_by(Dataset.created_at, Dataset.id)
    )
    return page(session, query, params, DatasetSummary.model_validate)


@dataclass(frozen=True)
class DatasetFilter:
    """What a listing keeps: a part of the name (any case), a kind, a range of rows (each optional)."""

    name: str = ""
    kind: str = ""
    min_rows: int | None = None
    max_rows: int | None = None

    def where(self, query: Select[Any]) -> Select[Any]:
        if self.name:
            query = query.where(func.lower(Dataset.name).contains(self.name.lower(), autoescape=True))
        if self.kind:
            query = query.where(Dataset.kind == self.kind)
        if self.min_rows is not None:
            query = query.where(Dataset.n_samples >= self.min_rows)
        if self.max_rows is not None:
            query = query.where(Dataset.n_samples <= self.max_rows)
        return query


def search_datasets(session: Session, params: PageParams, kept: DatasetFilter) -> tuple[Page[DatasetSummary], int]:
    """One page of the datasets ``kept`` keeps (as ``list_datasets``) and how many it keeps in all."""
    query = kept.where(
        select(Dataset)
        .options(defer(Dataset.feature_names), defer(Dataset.label_names))
        .order_by(Dataset.created_at, Dataset.id)
    )
    total = session.scalar(kept.where(select(func.count()).select_from(Dataset))) or 0
    return page(session, query, params, DatasetSummary.model_validate), total


def names_of(session: Session, dataset_ids: Iterable[str | None]) -> dict[str, str]:
    """The names of the stored datasets among ``dataset_ids`` (deleted ones are left out), in one query."""
    wanted = {i for i in dataset_ids if i}
    if not wanted:
        return {}
    return {i: name for i, name in session.execute(select(Dataset.id, Dataset.name).where(Dataset.id.in_(wanted)))}


def parts_of(session: Session, dataset_id: str, limit: int) -> list[DatasetSummary]:
    """The first ``limit`` parts split from a dataset, oldest first (its page lists them)."""
    query = (
        select(Dataset)
        .options(defer(Dataset.feature_names), defer(Dataset.label_names))
        .where(Dataset.parent_id == dataset_id)
        .order_by(Dataset.created_at, Dataset.id)
        .limit(limit)
    )
    return [DatasetSummary.model_validate(r) for r in session.scalars(query)]


#: at most this many datasets are offered to evaluate a version on
_EVALUATION_CHOICES = 200


def evaluation_choices(
    session: Session, kind: str, feature_names: list[str], label_names: list[str], trained_on: str | None
) -> list[tuple[DatasetSummary, str]]:
    """The datasets a version (of ``kind``, trained on ``trained_on``) can be evaluated on, each
    with why it is offered, best first: the test part of its training data's split, other test
    parts, the rest, and its training data last (its metrics there are optimistic)."""
    rows = session.scalars(
        select(Dataset)
        .where(
            Dataset.kind == kind,
            Dataset.n_features == len(feature_names),
            Dataset.n_labels == len(label_names),
        )
        .order_by(Dataset.created_at.desc(), Dataset.id)
        .limit(_EVALUATION_CHOICES)
    ).all()
    training = next((r for r in rows if r.id == trained_on), None)
    labels = sorted(label_names)
    ranked: list[tuple[int, DatasetSummary, str]] = []
    for row in rows:
        if row.feature_names != feature_names or sorted(row.label_names) != labels:
            continue
        part = (row.split or {}).get("part")
        if row.id == trained_on:
            rank, why = 3, "its training data"
        elif training is not None and training.parent_id and row.parent_id == training.parent_id and part == "test":
            same = {k: v for k, v in (row.split or {}).items() if k != "part"}
            held_out = same == {k: v for k, v in (training.split or {}).items() if k != "part"}
            rank, why = (0, "held out from its training data") if held_out else (1, "a test part")
        else:
            rank, why = (1, "a test part") if part == "test" else (2, "same features and labels")
        ranked.append((rank, DatasetSummary.model_validate(row), why))
    ranked.sort(key=lambda t: t[0])
    return [(summary, why) for _, summary, why in ranked]


def show_dataset(session: Session, store: Store, dataset_id: str) -> DatasetOut:
    return dataset_out(get_dataset(session, dataset_id), store)


# how many dependent versions a refused deletion names (the count says how many more there are)
_NAMED_DEPENDENTS = 5


def delete_dataset(session: Session, store: Store, dataset_id: str, caller: Caller, *, force: bool = False) -> None:
    """Delete the row and the stored arrays.

    Conflict while a queued or running job uses the dataset (the job would fail), and, unless
    ``force``, while registered model versions were trained on it: deleting it loses the data
    that reproduces them, which must be a deliberate choice. Forced or not, the versions keep its
    id and sha256 (lineage) and need nothing else from it to be read or served.
    """

    def stage() -> str:
        row = get_dataset(session, dataset_id)
        busy = session.scalars(
            select(Job.id).where(Job.dataset_id == row.id, Job.status.in_([s.value for s in ACTIVE]))
        ).first()
        if busy is not None:
            raise Conflict(f"dataset '{row.id}' is in use by job '{busy}'")
        if not force:
            check_no_dependents(session, row.id)
        session.delete(row)
        audit.record(session, caller, "dataset.delete", row.id, dataset_name=row.name, force=force)
        return row.sha256

    # Should even the spare not make room, the dataset's own file goes first: a row whose arrays
    # are missing answers 409 where it is used, and uploading the same file again restores them.
    sha256 = commit_deletion(session, stage, free_first=store.delete_dataset)
    store.delete_dataset(sha256)
    keep_spare(session)


def check_no_dependents(session: Session, dataset_id: str) -> None:
    """Conflict naming the first model versions trained on the dataset, and how to delete it anyway."""
    trained_on = ModelVersion.dataset_id == dataset_id
    count = session.scalar(select(func.count()).select_from(ModelVersion).where(trained_on))
    if not count:
        return
    first = session.execute(
        select(ModelVersion.model_name, ModelVersion.version)
        .where(trained_on)
        .order_by(ModelVersion.model_name, ModelVersion.version)
        .limit(_NAMED_DEPENDENTS)
    ).all()
    named = ", ".join(f"{name}@{version}" for name, version in first)
    more = f" and {count - len(first)} more" if count > len(first) else ""
    raise Conflict(
        f"dataset '{dataset_id}' is the training data of {count} registered model version(s) ({named}{more}); "
        "delete those versions first, or pass force=true to delete the dataset anyway "
        "(the versions stay, with its id and sha256 as lineage)"
    )
