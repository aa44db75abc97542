"""``/datasets``: upload (multipart), list, show and delete datasets."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, File, Form, Query, Response, UploadFile, status
from pydantic import WithJsonSchema

from app.api import examples
from app.api.deps import CallerDep, CoreDep, DatasetId, PageDep, ReadingDep, SessionDep, SettingsDep, StoreDep
from app.api.errors import responses
from app.api.json_body import JsonBodyRoute
from app.schemas import DatasetOut, DatasetSummary, Page, SplitOut, SplitRequest
from app.services import datasets, splits
from app.services.datasets import Upload
from app.upload_options import UPLOAD_OPTIONS, UploadOption

# every route here has a path or query parameter that can fail validation: the 422 in the API's own shape
router = APIRouter(route_class=JsonBodyRoute, prefix="/datasets", tags=["datasets"], responses=responses(422))
Route = TypeVar("Route", bound=Callable[..., Any])
# A file field as client generators read one: FastAPI's OpenAPI 3.1 schema of an UploadFile has only
# contentMediaType, which openapi-python-client and openapi-generator type as a string (sent as a
# plain form field, refused with a 422); "format: binary" makes it a file for them too.
BINARY = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}


def _form_parameter(option: UploadOption) -> inspect.Parameter:
    """The route parameter of one declared upload option: a form field with its type, bounds and
    description (so the OpenAPI document), defaulting like the declaration.

    Optional fields carry the example "" so that the Swagger UI leaves them empty (and unsent)
    instead of pre-filling a made-up sample such as "string" or 1 that the parser would obey.
    """
    kind: Any = Literal[option.choices] if option.choices else option.kind  # a list travels as one string
    if option.default is None:
        kind = kind | None
    field = Form(
        description=option.description,
        examples=[""] if option.default is None else None,
        ge=option.minimum,
        max_length=option.max_length,
        pattern=option.pattern,
    )
    return inspect.Parameter(
        option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default, annotation=Annotated[kind, field]
    )


def _with_option_fields(route: Route) -> Route:
    """Replace the route's ``**options`` by one form parameter per declared upload option (FastAPI
    reads the parameters from the signature, and passes them back as keyword arguments)."""
    signature = inspect.signature(route)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    route.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*fixed, *(_form_parameter(option) for option in UPLOAD_OPTIONS)]
    )
    return route


@router.post(
    "",
    status_code=201,
    response_model=DatasetOut,
    description="Upload one dataset (multipart); the same content again answers the stored dataset (200), and "
    "writes its arrays again if they were missing or corrupt in the store (saying so in `warnings`).\n\n"
    + examples.UPLOAD_GUIDE,
    openapi_extra={"requestBody": {"content": {"multipart/form-data": {"examples": examples.UPLOAD}}}},
    responses=responses(
        400,
        413,
        422,
        507,
        success={
            200: {
                "model": DatasetOut,
                "description": "the same upload was stored before (its arrays written again, with a warning, "
                "if the store had lost them or they were corrupt)",
            }
        },
    ),
)
@_with_option_fields
def upload_dataset(
    response: Response,
    session: SessionDep,
    store: StoreDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="the dataset file: ARFF, CSV, LIBSVM or MAT"), WithJsonSchema(BINARY)],
    labels_file: Annotated[
        UploadFile | None,
        File(description="ARFF: Mulan XML file naming the label attributes", examples=[""]),
        WithJsonSchema({"anyOf": [BINARY, {"type": "null"}]}),
    ] = None,
    **options: Any,
) -> DatasetOut:
    # A sync route: parsing is CPU-bound and runs in the threadpool, off the event loop.
    # ``options`` are the form fields of app.upload_options (see _with_option_fields).
    upload = Upload(
        content=file.file.read(),
        filename=file.filename,
        labels_file=labels_file.file.read() if labels_file is not None else None,
        name=options.pop("name"),
        options=options,
    )
    row, created = datasets.upload(session, store, datasets.limits_of(settings), upload)
    if not created:
        response.status_code = status.HTTP_200_OK
    return row


@router.get("", response_model=Page[DatasetSummary])
def list_datasets(session: ReadingDep, page: PageDep) -> Page[DatasetSummary]:
    return datasets.list_datasets(session, page)


@router.get("/{dataset_id}", response_model=DatasetOut, responses=responses(404, 409))
def get_dataset(dataset_id: DatasetId, session: ReadingDep, core: CoreDep) -> DatasetOut:
    return datasets.show_dataset(session, core.store, dataset_id)


@router.post(
    "/{dataset_id}/split",
    status_code=201,
    response_model=SplitOut,
    responses=responses(
        400, 404, 409, 413, 507, success={200: {"model": SplitOut, "description": "the same split was stored before"}}
    ),
)
def split_dataset(
    dataset_id: DatasetId, body: SplitRequest, response: Response, session: SessionDep, store: StoreDep
) -> SplitOut:
    """Split a dataset into a train and a test dataset (stratified for multi-label, shuffled for
    distributions), each with the split one as its ``parent_id``; the same split again answers 200."""
    parts, created = splits.split_dataset(session, store, dataset_id, body)
    if not created:
        response.status_code = status.HTTP_200_OK
    return parts


@router.delete("/{dataset_id}", status_code=204, responses=responses(404, 409, 507))
def delete_dataset(
    dataset_id: DatasetId,
    session: SessionDep,
    store: StoreDep,
    caller: CallerDep,
    force: Annotated[
        bool,
        Query(description="delete it even though registered model versions were trained on it (they stay)"),
    ] = False,
) -> Response:
    """Delete a dataset; 409 while a job uses it, or while model versions were trained on it unless force=true."""
    datasets.delete_dataset(session, store, dataset_id, caller, force=force)
    return Response(status_code=204)
