"""``/models``: the versioned registry (models, versions, aliases, deletion)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Annotated

from anyio import CapacityLimiter, to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, StreamingResponse

from app.api.deps import AliasName, CallerDep, CoreDep, ModelName, PageDep, ReadingDep, SessionDep, VersionNumber
from app.api.errors import responses
from app.api.headers import report_policy
from app.api.json_body import JsonBodyRoute
from app.core import Core
from app.schemas import AliasIn, ModelOut, Page, VersionOut
from app.services import comparison, export, models

# every route here has a path or query parameter that can fail validation: the 422 in the API's own shape
router = APIRouter(route_class=JsonBodyRoute, prefix="/models", tags=["models"], responses=responses(422))


@router.get("", response_model=Page[ModelOut])
def list_models(session: ReadingDep, page: PageDep) -> Page[ModelOut]:
    return models.list_models(session, page)


@router.get("/{name}", response_model=ModelOut, responses=responses(404))
async def get_model(name: ModelName, core: CoreDep) -> Response:
    # From memory on the event loop when this process has read the page since the registry last
    # changed; else one hop to the thread pool for the whole read (a plain ``def`` route with
    # ``ReadingDep`` makes four). No docstring: it would become the OpenAPI description.
    page = models.kept_model_page(core.refs, name)
    if page is None:
        page = await run_in_threadpool(_model_page, core, name)
    return Response(page, media_type="application/json")


def _model_page(core: Core, name: str) -> bytes:
    with core.database.reading() as session:
        return models.model_page(session, core.refs, name)


@router.get("/{name}/versions/{version}", response_model=VersionOut, responses=responses(404))
def get_version(name: ModelName, version: VersionNumber, session: ReadingDep) -> VersionOut:
    return models.show_version(session, name, version)


@router.get(
    "/{name}/versions/{version}/report",
    responses=responses(
        404,
        409,
        422,
        success={200: {"description": "the HTML report", "content": {"text/html": {"schema": {"type": "string"}}}}},
    ),
)
def version_report(
    name: ModelName,
    version: VersionNumber,
    dataset_id: Annotated[
        str, Query(min_length=1, max_length=255, description="the dataset to evaluate on: an id or a unique name")
    ],
    core: CoreDep,
) -> HTMLResponse:
    """The evaluation report of one version on one dataset: metrics and the plots fitting its task."""
    page = comparison.version_report(core, name, version, dataset_id)
    return HTMLResponse(page, headers={"Content-Security-Policy": report_policy(page)})


@router.get(
    "/{name}/versions/{version}/artifact",
    response_class=StreamingResponse,
    responses=responses(
        404,
        409,
        success={
            200: {
                "description": "a zip: the artifact as stored (model.pkl) and manifest.json (the version record, the "
                "library versions it needs, its sha256 and how to load it); the X-Artifact-SHA256 header repeats "
                "the sha256",
                "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    ),
)
async def version_artifact(name: ModelName, version: VersionNumber, request: Request) -> StreamingResponse:
    """Download one version's model file with its manifest (to use it outside the service)."""
    core: Core = request.app.state.core
    limiter = _export_limiter(request)
    written = await to_thread.run_sync(_export, core, name, version, limiter=limiter)
    return StreamingResponse(
        _sent(written.chunks(), limiter),
        media_type="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="{written.filename}"',
            "X-Artifact-SHA256": written.artifact_sha256,
        },
    )


# Exports read their artifacts (to check them, then to send them) in threads of their own: 40
# slow downloads had each copied its artifact to TMPDIR (195 MB) and held GET /models for 6 s.
EXPORT_THREADS = 4


def _export(core: Core, name: str, version: int) -> export.Export:
    with core.database.reading() as session:  # closed before the download starts
        return export.export_version(session, core.store, name, version)


async def _sent(chunks: Generator[bytes, None, None], limiter: CapacityLimiter) -> AsyncIterator[bytes]:
    """``chunks``, each read in a thread of the exports' limiter (not the shared pool)."""
    try:
        while (chunk := await to_thread.run_sync(next, chunks, None, limiter=limiter)) is not None:
            yield chunk
    finally:
        chunks.close()  # closes the artifact, even if the client left (no await: it may be cancelled)


def _export_limiter(request: Request) -> CapacityLimiter:
    """The app's limiter of export threads (made on first use, on the app's event loop)."""
    limiter: CapacityLimiter | None = getattr(request.app.state, "export_limiter", None)
    if limiter is None:
        limiter = request.app.state.export_limiter = CapacityLimiter(EXPORT_THREADS)
    return limiter


@router.delete("/{name}/versions/{version}", status_code=204, responses=responses(404, 507))
def delete_version(
    name: ModelName, version: VersionNumber, session: SessionDep, core: CoreDep, caller: CallerDep
) -> Response:
    models.delete_version(session, core.store, name, version, caller)
    return Response(status_code=204)


@router.delete("/{name}", status_code=204, responses=responses(404, 507))
def delete_model(name: ModelName, session: SessionDep, core: CoreDep, caller: CallerDep) -> Response:
    models.delete_model(session, core.store, name, caller)
    return Response(status_code=204)


@router.put("/{name}/aliases/{alias}", response_model=ModelOut, responses=responses(404, 400, 413))
def set_alias(
    name: ModelName, alias: AliasName, body: AliasIn, session: SessionDep, core: CoreDep, caller: CallerDep
) -> ModelOut:
    return models.set_alias(session, core.store, name, alias, body.version, caller)


@router.delete("/{name}/aliases/{alias}", status_code=204, responses=responses(404, 507))
def delete_alias(name: ModelName, alias: AliasName, session: SessionDep, core: CoreDep, caller: CallerDep) -> Response:
    models.delete_alias(session, core.store, name, alias, caller)
    return Response(status_code=204)
