"""``/datasets``: upload (multipart), list, show and delete datasets."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, HTTPException, Response, UploadFile, status
from pydantic import ValidationError
from sqlalchemy import select

from app.datasets import store_dataset, upload_digest
from app.deps import PageDep, SessionDep, StoreDep
from app.formats import DatasetFormatError, ParseOptions, parse_dataset
from app.jobs.base import ACTIVE
from app.orm import Dataset, Job
from app.paging import page
from app.schemas import DatasetOut, Page

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.post("", status_code=201, response_model=DatasetOut)
def upload_dataset(
    response: Response,
    session: SessionDep,
    store: StoreDep,
    file: Annotated[UploadFile, File(description="the dataset file")],
    labels_file: Annotated[UploadFile | None, File(description="Mulan XML label file")] = None,
    name: Annotated[str | None, Form(max_length=255)] = None,
    format: Annotated[Literal["auto", "arff", "csv", "libsvm", "mat"], Form()] = "auto",
    label_count: Annotated[int | None, Form(ge=1)] = None,
    label_location: Annotated[Literal["end", "start"], Form()] = "end",
    label_columns: Annotated[str | None, Form()] = None,
    n_features: Annotated[int | None, Form(ge=1)] = None,
    part: Annotated[Literal["train", "test"], Form()] = "train",
) -> Dataset:
    # A sync route: parsing is CPU-bound and runs in the threadpool, off the event loop.
    content = file.file.read()
    labels = labels_file.file.read() if labels_file is not None else None
    try:
        options = ParseOptions(
            format=format,
            label_count=label_count,
            label_location=label_location,
            label_columns=label_columns,
            n_features=n_features,
            part=part,
        )
    except ValidationError as exc:
        raise HTTPException(422, "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in exc.errors())) from None
    sha256 = upload_digest([content] + ([labels] if labels is not None else []), options.model_dump())
    try:
        parsed = parse_dataset(content, filename=file.filename, labels_file=labels, options=options)
    except DatasetFormatError as exc:
        raise HTTPException(422, f"file: {exc}") from None
    row, created = store_dataset(
        session,
        store,
        parsed,
        sha256,
        name or file.filename or "dataset",
        parsed_format(file.filename, format),
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return row


def parsed_format(filename: str | None, requested: str) -> str:
    if requested != "auto" or not filename or "." not in filename:
        return requested
    return filename.rsplit(".", 1)[1].lower()


@router.get("", response_model=Page[DatasetOut])
def list_datasets(session: SessionDep, page_params: PageDep) -> Page[DatasetOut]:
    limit, offset = page_params
    query = select(Dataset).order_by(Dataset.created_at, Dataset.id)
    return page(session, query, limit, offset, DatasetOut.model_validate)


def get_dataset_or_404(session: SessionDep, dataset_id: str) -> Dataset:
    row = session.get(Dataset, dataset_id)
    if row is None:
        raise HTTPException(404, f"dataset '{dataset_id}' not found")
    return row


@router.get("/{dataset_id}", response_model=DatasetOut)
def get_dataset(dataset_id: str, session: SessionDep) -> Dataset:
    return get_dataset_or_404(session, dataset_id)


@router.delete("/{dataset_id}", status_code=204)
def delete_dataset(dataset_id: str, session: SessionDep, store: StoreDep) -> Response:
    row = get_dataset_or_404(session, dataset_id)
    busy = session.scalars(
        select(Job.id).where(Job.dataset_id == dataset_id, Job.status.in_([s.value for s in ACTIVE]))
    ).first()
    if busy is not None:
        raise HTTPException(409, f"dataset '{dataset_id}' is in use by job '{busy}'")
    sha256 = row.sha256
    session.delete(row)
    session.commit()
    store.delete_dataset(sha256)
    return Response(status_code=204)
