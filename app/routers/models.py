"""``/models``: the versioned registry (versions, aliases, deletion)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response
from sqlalchemy import delete, select

from app.deps import PageDep, SessionDep, StoreDep
from app.orm import Alias, Model, ModelVersion
from app.paging import page
from app.registry import MAX_DB_INT, artifact_in_use
from app.schemas import AliasIn, ModelOut, Page, VersionOut

router = APIRouter(prefix="/models", tags=["models"])

VersionPath = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


def version_out(row: ModelVersion) -> VersionOut:
    return VersionOut(
        name=row.model_name,
        version=row.version,
        method=row.method,
        params=row.params,
        dataset_id=row.dataset_id,
        dataset_sha256=row.dataset_sha256,
        feature_names=row.feature_names,
        label_names=row.label_names,
        metrics=row.metrics,
        training_seconds=row.training_seconds,
        library_versions=row.library_versions,
        artifact_sha256=row.artifact_sha256,
        job_id=row.job_id,
        created_at=row.created_at,
    )


def model_out(model: Model) -> ModelOut:
    return ModelOut(
        name=model.name,
        latest_version=model.versions[-1].version if model.versions else None,
        aliases={a.alias: a.version for a in model.aliases},
        versions=[version_out(v) for v in model.versions],
    )


def get_model_or_404(session: SessionDep, name: str) -> Model:
    model = session.get(Model, name)
    if model is None:
        raise HTTPException(404, f"model '{name}' not found")
    return model


def get_version_or_404(session: SessionDep, name: str, version: int) -> ModelVersion:
    row = session.scalars(
        select(ModelVersion).where(ModelVersion.model_name == name, ModelVersion.version == version)
    ).first()
    if row is None:
        raise HTTPException(404, f"model '{name}' has no version {version}")
    return row


@router.get("", response_model=Page[ModelOut])
def list_models(session: SessionDep, page_params: PageDep) -> Page[ModelOut]:
    limit, offset = page_params
    return page(session, select(Model).order_by(Model.name), limit, offset, model_out)


@router.get("/{name}", response_model=ModelOut)
def get_model(name: str, session: SessionDep) -> ModelOut:
    return model_out(get_model_or_404(session, name))


@router.get("/{name}/versions/{version}", response_model=VersionOut)
def get_version(name: str, version: VersionPath, session: SessionDep) -> VersionOut:
    return version_out(get_version_or_404(session, name, version))


def _drop_artifacts(session: SessionDep, store: StoreDep, hashes: set[str]) -> None:
    """Delete artifact files no remaining version uses (after the rows are gone)."""
    for sha256 in hashes:
        if not artifact_in_use(session, sha256):
            store.delete_artifact(sha256)


@router.delete("/{name}/versions/{version}", status_code=204)
def delete_version(name: str, version: VersionPath, session: SessionDep, store: StoreDep) -> Response:
    row = get_version_or_404(session, name, version)
    sha256 = row.artifact_sha256
    session.execute(delete(Alias).where(Alias.model_name == name, Alias.version == version))
    session.delete(row)
    session.commit()
    _drop_artifacts(session, store, {sha256})
    return Response(status_code=204)


@router.delete("/{name}", status_code=204)
def delete_model(name: str, session: SessionDep, store: StoreDep) -> Response:
    model = get_model_or_404(session, name)
    hashes = {v.artifact_sha256 for v in model.versions}
    session.delete(model)
    session.commit()
    _drop_artifacts(session, store, hashes)
    return Response(status_code=204)


@router.put("/{name}/aliases/{alias}", response_model=ModelOut)
def set_alias(name: str, alias: str, body: AliasIn, session: SessionDep) -> ModelOut:
    model = get_model_or_404(session, name)
    if alias.isdigit() or not alias.replace("-", "").replace("_", "").isalnum():
        raise HTTPException(422, f"alias: '{alias}' must be letters, digits, '-' or '_', not only digits")
    get_version_or_404(session, name, body.version)
    row = session.get(Alias, (name, alias))
    if row is None:
        session.add(Alias(model_name=name, alias=alias, version=body.version))
    else:
        row.version = body.version
    session.commit()
    session.refresh(model)
    return model_out(model)


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(name: str, alias: str, session: SessionDep) -> Response:
    row = session.get(Alias, (name, alias))
    if row is None:
        raise HTTPException(404, f"model '{name}' has no alias '{alias}'")
    session.delete(row)
    session.commit()
    return Response(status_code=204)
