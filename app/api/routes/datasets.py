"""``/datasets``: upload (multipart), list, show and delete datasets."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, Query, Response, UploadFile, status

from app.api.deps import DatasetId, PageDep, ReadingDep, SessionDep, SettingsDep, StoreDep
from app.api.errors import responses
from app.schemas import DatasetOut, DatasetSummary, Page
from app.services import datasets
from app.services.datasets import Upload

# every route here has a path or query parameter that can fail validation: the 422 in the API's own shape
router = APIRouter(prefix="/datasets", tags=["datasets"], responses=responses(422))


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
    # Optional fields carry the example "" so that the Swagger UI leaves them empty (and unsent)
    # instead of pre-filling a made-up sample such as "string" or 1 that the parser would obey.
    file: Annotated[UploadFile, File(description="the dataset file: ARFF, CSV, LIBSVM or MAT")],
    labels_file: Annotated[
        UploadFile | None, File(description="ARFF: Mulan XML file naming the label attributes", examples=[""])
    ] = None,
    name: Annotated[
        str | None,
        Form(max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$", description="default: the file name", examples=[""]),
    ] = None,
    format: Annotated[
        Literal["auto", "arff", "csv", "libsvm", "mat"], Form(description="auto: from the file name's extension")
    ] = "auto",
    label_count: Annotated[
        int | None,
        Form(
            ge=1, description="ARFF without labels_file or MEKA header, CSV: how many columns are labels", examples=[""]
        ),
    ] = None,
    label_location: Annotated[
        Literal["end", "start"], Form(description="ARFF with label_count: labels are the last or the first attributes")
    ] = "end",
    label_columns: Annotated[
        str | None,
        Form(
            description="CSV: the label columns, comma-separated names or a JSON array (or label_count)", examples=[""]
        ),
    ] = None,
    n_features: Annotated[
        int | None,
        Form(ge=1, description="LIBSVM: number of features (default: the largest index seen)", examples=[""]),
    ] = None,
    part: Annotated[Literal["train", "test"], Form(description="MAT train/test layout: which part to store")] = "train",
) -> DatasetOut:
    """Upload one dataset (multipart); the same content again answers the stored dataset (200)."""
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


@router.get("", response_model=Page[DatasetSummary])
def list_datasets(session: ReadingDep, page: PageDep) -> Page[DatasetSummary]:
    return datasets.list_datasets(session, page)


@router.get("/{dataset_id}", response_model=DatasetOut, responses=responses(404))
def get_dataset(dataset_id: DatasetId, session: ReadingDep) -> DatasetOut:
    return datasets.show_dataset(session, dataset_id)


@router.delete("/{dataset_id}", status_code=204, responses=responses(404, 409))
def delete_dataset(
    dataset_id: DatasetId,
    session: SessionDep,
    store: StoreDep,
    force: Annotated[
        bool,
        Query(description="delete it even though registered model versions were trained on it (they stay)"),
    ] = False,
) -> Response:
    """Delete a dataset; 409 while a job uses it, or while model versions were trained on it unless force=true."""
    datasets.delete_dataset(session, store, dataset_id, force=force)
    return Response(status_code=204)
