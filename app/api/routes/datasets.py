"""``/datasets``: upload (multipart), list, show and delete datasets."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, Response, UploadFile, status

from app.api.deps import DatasetId, PageDep, SessionDep, SettingsDep, StoreDep
from app.api.errors import responses
from app.schemas import DatasetOut, Page
from app.services import datasets
from app.services.datasets import Upload

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.post(
    "",
    status_code=201,
    response_model=DatasetOut,
    responses=responses(
        400, 413, 422, success={200: {"model": DatasetOut, "description": "the same upload was stored before"}}
    ),
)
def upload_dataset(
    response: Response,
    session: SessionDep,
    store: StoreDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="the dataset file")],
    labels_file: Annotated[UploadFile | None, File(description="Mulan XML label file")] = None,
    name: Annotated[str | None, Form(max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$")] = None,
    format: Annotated[Literal["auto", "arff", "csv", "libsvm", "mat"], Form()] = "auto",
    label_count: Annotated[int | None, Form(ge=1)] = None,
    label_location: Annotated[Literal["end", "start"], Form()] = "end",
    label_columns: Annotated[str | None, Form()] = None,
    n_features: Annotated[int | None, Form(ge=1)] = None,
    part: Annotated[Literal["train", "test"], Form()] = "train",
) -> DatasetOut:
    # A sync route: parsing is CPU-bound and runs in the threadpool, off the event loop.
    upload = Upload(
        content=file.file.read(),
        filename=file.filename,
        labels_file=labels_file.file.read() if labels_file is not None else None,
        name=name,
        options={
            "format": format,
            "label_count": label_count,
            "label_location": label_location,
            "label_columns": label_columns,
            "n_features": n_features,
            "part": part,
        },
    )
    row, created = datasets.upload(session, store, datasets.limits_of(settings), upload)
    if not created:
        response.status_code = status.HTTP_200_OK
    return row


@router.get("", response_model=Page[DatasetOut])
def list_datasets(session: SessionDep, page: PageDep) -> Page[DatasetOut]:
    return datasets.list_datasets(session, page)


@router.get("/{dataset_id}", response_model=DatasetOut, responses=responses(404))
def get_dataset(dataset_id: DatasetId, session: SessionDep) -> DatasetOut:
    return datasets.show_dataset(session, dataset_id)


@router.delete("/{dataset_id}", status_code=204, responses=responses(404, 409))
def delete_dataset(dataset_id: DatasetId, session: SessionDep, store: StoreDep) -> Response:
    datasets.delete_dataset(session, store, dataset_id)
    return Response(status_code=204)
