"""The model registry as the API sees it: listing and showing models and versions, aliases,
deletion (with the garbage collection of artifacts), and resolving references for the other
services.

Versions are immutable: nothing here changes a version row; evaluations are stored beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, delete, func, or_, select
from sqlalchemy.orm import Session, selectinload

from app.errors import Conflict, DomainError, InvalidInput, NotFound
from app.jobs.base import ACTIVE
from app.jobs.payloads import TrainPayload
from app.methods.base import MethodSpec
from app.methods.catalog import get_method
from app.registry.model_cache import ModelCache, Served
from app.registry.refs import ModelRef, RegistryError, is_version_number, reserved_alias
from app.registry.resolved_refs import MODEL_PAGE, ResolvedRefs
from app.registry.versions import VersionKey, drop_unused_artifacts, notify_on_commit, resolve, resolve_key
from app.runtime.observability import Metrics
from app.schemas import EvaluationOut, FitWarningOut, ModelOut, Page, VersionOut
from app.services import audit
from app.services.keys import Caller
from app.services.paging import PageParams, page
from app.storage.db import commit_deletion, keep_spare
from app.storage.orm import Alias, Job, Model, ModelVersion
from app.storage.store import ArtifactIntegrityError, Store
from app.suggest import did_you_mean

Loc = tuple[str | int, ...]
MODEL_LOC: Loc = ("body", "model")


def version_out(row: ModelVersion) -> VersionOut:
    """The version record; ``metrics`` is the latest evaluation on each dataset (evaluations are oldest first)."""
    latest = {e.dataset_id: e.metrics for e in row.evaluations}
    return VersionOut(
        name=row.model_name,
        version=row.version,
        method=row.method,
        params=row.params,
        dataset_id=row.dataset_id,
        dataset_sha256=row.dataset_sha256,
        feature_names=row.feature_names,
        label_names=row.label_names,
        metrics=latest or None,
        training_seconds=row.training_seconds,
        warnings=[FitWarningOut(**w) for w in row.warnings or []],
        library_versions=row.library_versions,
        artifact_sha256=row.artifact_sha256,
        job_id=row.job_id,
        created_at=row.created_at,
        created_by=row.created_by,
        evaluations=[EvaluationOut.model_validate(e) for e in row.evaluations],
        selection=row.selection,
        fit_details=row.fit_details,
    )


def model_out(model: Model) -> ModelOut:
    return ModelOut(
        name=model.name,
        latest_version=model.versions[-1].version if model.versions else None,
        aliases={a.alias: a.version for a in model.aliases},
        versions=[version_out(v) for v in model.versions],
    )


# resolving references (for prediction, evaluation, training on selected features) ----------
def resolve_version(session: Session, ref: str, *, loc: Loc = MODEL_LOC) -> ModelVersion:
    """The version a reference points to; InvalidInput for a malformed one, NotFound for a missing
    one (Conflict when its first training is still under way)."""
    try:
        return resolve(session, ref)
    except ValueError as exc:
        raise InvalidInput(str(exc), loc=loc) from None
    except RegistryError as exc:
        raise unresolved(session, ref, exc, loc) from None


def resolve_version_key(session: Session, ref: str, *, loc: Loc = MODEL_LOC) -> VersionKey:
    """The narrow lookup of the predict hot path (see ``app.registry.versions.resolve_key``)."""
    try:
        return resolve_key(session, ref)
    except ValueError as exc:
        raise InvalidInput(str(exc), loc=loc) from None
    except RegistryError as exc:
        raise unresolved(session, ref, exc, loc) from None


def unresolved(session: Session, ref: str, exc: RegistryError, loc: Loc) -> DomainError:
    """The error for a reference that resolves to no version: a Conflict saying so when the name
    has no version yet but a training of it is queued or running (the model is coming; "not
    found" would send the user looking for a typo), else NotFound.

    Only the not-found path pays for these queries; a reference that resolves never gets here.
    """
    name = ModelRef.parse(ref).name
    if session.scalar(select(ModelVersion.id).where(ModelVersion.model_name == name).limit(1)) is None:
        training = session.execute(
            select(Job.id, Job.status)
            .where(Job.kind == TrainPayload.kind, Job.model_name == name, Job.status.in_([s.value for s in ACTIVE]))
            .order_by(Job.created_at)
            .limit(1)
        ).first()
        if training is not None:
            job_id, status = training
            return Conflict(
                f"model '{name}' is still training (job {job_id}, status {status}); "
                f"it can be used once the job has succeeded (GET /jobs/{job_id})",
                loc=loc,
            )
    return NotFound(_what_exists(session, ModelRef.parse(ref), str(exc)), loc=loc)


# how many stored names a "did you mean" compares an unknown model name with
_SUGGESTED_FROM = 10_000


def _what_exists(session: Session, ref: ModelRef, message: str) -> str:
    """``message`` with what the registry has instead: the closest model name to an unknown one,
    the model's aliases (and the closest) for an unknown alias, its versions for a missing one."""
    if session.get(Model, ref.name) is None:
        names = session.scalars(select(Model.name).limit(_SUGGESTED_FROM)).all()
        return f"{message}{did_you_mean(ref.name, names)}"
    if ref.selector is None:
        return message
    if is_version_number(ref.selector):
        versions = session.scalars(
            select(ModelVersion.version).where(ModelVersion.model_name == ref.name).order_by(ModelVersion.version)
        ).all()
        return f"{message} (its versions: {', '.join(map(str, versions)) or 'none'})"
    aliases = session.scalars(select(Alias.alias).where(Alias.model_name == ref.name).order_by(Alias.alias)).all()
    return f"{message}{did_you_mean(ref.selector, aliases)} (its aliases: {', '.join(aliases) or 'none'})"


def method_of(method_id: str) -> MethodSpec:
    """The method a stored version was trained with; Conflict when this server no longer has it."""
    spec = get_method(method_id)
    if spec is None:
        raise Conflict(f"method '{method_id}' is not available in this server", loc=MODEL_LOC)
    return spec


def load_served(cache: ModelCache, metrics: Metrics, key: VersionKey) -> Served:
    """The loaded version (model, names) behind ``key``; Conflict when its artifact is unusable."""
    try:
        served, hit = cache.get(key)
    except RegistryError as exc:
        raise NotFound(str(exc), loc=MODEL_LOC) from None
    except FileNotFoundError:
        raise Conflict("the model version's artifact is missing from the store", loc=MODEL_LOC) from None
    except ArtifactIntegrityError as exc:
        raise Conflict(str(exc), loc=MODEL_LOC) from None
    metrics.cache_lookup(hit)
    return served


# the registry routes -------------------------------------------------------------------------
def _model(session: Session, name: str, *, whole: bool = False) -> Model:
    """The model ``name``; ``whole``: with its versions, their evaluations and its aliases, read
    in three more queries (not one per version)."""
    model = session.get(Model, name, options=_WHOLE_MODEL if whole else ())
    if model is None:
        names = session.scalars(select(Model.name).limit(_SUGGESTED_FROM)).all()
        raise NotFound(f"model '{name}' not found{did_you_mean(name, names)}", loc=("path", "name"))
    return model


def _version(session: Session, name: str, version: int, *, loc: Loc = ("path", "version")) -> ModelVersion:
    row = session.scalars(
        select(ModelVersion).where(ModelVersion.model_name == name, ModelVersion.version == version)
    ).first()
    if row is None:
        raise NotFound(f"model '{name}' has no version {version}", loc=loc)
    return row


# a page of models loads their versions, evaluations and aliases in three queries, not one per row
_WHOLE_MODEL = (
    selectinload(Model.versions).selectinload(ModelVersion.evaluations),
    selectinload(Model.aliases),
)


def list_models(session: Session, params: PageParams) -> Page[ModelOut]:
    return page(session, select(Model).options(*_WHOLE_MODEL).order_by(Model.name), params, model_out)


@dataclass(frozen=True)
class ModelFilter:
    """What a listing of models keeps: a part of the name (any case), a method one of its versions
    was trained with, an alias it has (each optional)."""

    name: str = ""
    method: str = ""
    alias: str = ""

    def where(self, query: Select[Any]) -> Select[Any]:
        if self.name:
            query = query.where(func.lower(Model.name).contains(self.name.lower(), autoescape=True))
        if self.method:
            query = query.where(Model.versions.any(ModelVersion.method == self.method))
        if self.alias:
            query = query.where(Model.aliases.any(Alias.alias == self.alias))
        return query


def search_models(session: Session, params: PageParams, kept: ModelFilter) -> tuple[Page[ModelOut], int]:
    """One page of the models ``kept`` keeps (as ``list_models``: three queries) and how many it keeps in all."""
    query = kept.where(select(Model).options(*_WHOLE_MODEL).order_by(Model.name))
    total = session.scalar(kept.where(select(func.count()).select_from(Model))) or 0
    return page(session, query, params, model_out), total


def existing_versions(session: Session, keys: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which of the (name, version) pairs are registered versions now, in one query (a job's
    version may have been deleted since)."""
    wanted = set(keys)
    if not wanted:
        return set()
    names = {name for name, _ in wanted}
    rows = session.execute(
        select(ModelVersion.model_name, ModelVersion.version).where(ModelVersion.model_name.in_(names))
    )
    return {(name, number) for name, number in rows if (name, number) in wanted}


def versions_of(session: Session, keys: list[tuple[str, int]]) -> list[VersionOut]:
    """The registered versions among the (name, version) pairs, in their order, in two queries
    (the versions, their evaluations); NotFound for the first pair that is not registered."""
    if not keys:
        return []
    match = or_(*(and_(ModelVersion.model_name == n, ModelVersion.version == v) for n, v in keys))
    rows = session.scalars(select(ModelVersion).options(selectinload(ModelVersion.evaluations)).where(match)).all()
    found = {(r.model_name, r.version): r for r in rows}
    for name, number in keys:
        if (name, number) not in found:
            raise NotFound(f"model '{name}' has no version {number}", loc=("query", "v"))
    return [version_out(found[key]) for key in keys]


def show_model(session: Session, refs: ResolvedRefs, name: str) -> ModelOut:
    """The model ``name``. Its 404 (with the closest of up to 10,000 stored names) is kept in
    ``refs`` until the next registry change, the only thing that can create the name or a
    closer one: a flood of requests for an unknown name reads the database once, not each time."""
    token = refs.token()
    refused = refs.refusal(name, MODEL_PAGE)
    if refused is not None:
        raise refused
    try:
        model = _model(session, name, whole=True)
    except NotFound as exc:
        refs.refuse(token, name, exc, MODEL_PAGE)
        raise
    return model_out(model)


def kept_model_page(refs: ResolvedRefs, name: str) -> bytes | None:
    """``GET /models/{name}``'s answer from memory (no session): the page kept since the registry
    last changed, or its kept 404 raised again; None when the database must be read."""
    refused = refs.refusal(name, MODEL_PAGE)
    if refused is not None:
        raise refused
    return refs.page(name)


def model_page(session: Session, refs: ResolvedRefs, name: str) -> bytes:
    """``GET /models/{name}``'s answer (the JSON of ``ModelOut``), kept in ``refs`` until the next
    registry change; its 404 is kept as ``show_model`` keeps it."""
    token = refs.token()
    page = show_model(session, refs, name).model_dump_json().encode()
    refs.keep_page(token, name, page)
    return page


def show_version(session: Session, name: str, version: int) -> VersionOut:
    return version_out(_version(session, name, version))


def delete_version(session: Session, store: Store, name: str, version: int, caller: Caller) -> None:
    """Delete one version and the aliases pointing to it (the model and its other versions stay)."""

    def stage() -> set[str]:
        row = _version(session, name, version)
        aliases = session.scalars(select(Alias.alias).where(Alias.model_name == name, Alias.version == version)).all()
        session.execute(delete(Alias).where(Alias.model_name == name, Alias.version == version))
        session.delete(row)
        audit.record(session, caller, "version.delete", f"{name}@{version}", aliases=list(aliases))
        return {row.artifact_sha256}

    _delete(session, store, stage)


def delete_model(session: Session, store: Store, name: str, caller: Caller) -> None:
    """Delete a model with every version and alias."""

    def stage() -> set[str]:
        model = _model(session, name)
        hashes = {v.artifact_sha256 for v in model.versions}
        audit.record(session, caller, "model.delete", name, versions=[v.version for v in model.versions])
        session.delete(model)
        return hashes

    _delete(session, store, stage)


def _delete(session: Session, store: Store, stage: Callable[[], set[str]]) -> None:
    """Commit a staged deletion of versions (on a full disk too: ``commit_deletion``), then drop
    the artifacts no version uses any more. The artifacts never go first: a version left without
    its artifact could not be served, and nothing would bring it back."""
    notify_on_commit(session, store)
    hashes = commit_deletion(session, stage)
    drop_unused_artifacts(session, store, hashes)
    keep_spare(session)


def set_alias(session: Session, store: Store, name: str, alias: str, version: int, caller: Caller) -> ModelOut:
    """Point ``alias`` at ``version`` (creating or moving it); ``latest`` and version-like
    aliases (``-1``, ``v3``) are reserved, as they would read as something else in ``name@alias``."""
    if reserved_alias(alias):
        raise InvalidInput(
            f"alias '{alias}' is reserved: 'latest' and version-like aliases (-1, v3) would be read as versions",
            loc=("path", "alias"),
        )
    model = _model(session, name)
    _version(session, name, version, loc=("body", "version"))
    row = session.get(Alias, (name, alias))
    audit.record(
        session, caller, "alias.set", f"{name}@{alias}", version=version, previous=None if row is None else row.version
    )
    if row is None:
        session.add(Alias(model_name=name, alias=alias, version=version))
    else:
        row.version = version
    notify_on_commit(session, store)
    session.commit()
    session.refresh(model)
    return model_out(model)


def delete_alias(session: Session, store: Store, name: str, alias: str, caller: Caller) -> None:
    """Remove an alias (on a full disk too: ``commit_deletion``)."""

    def stage() -> None:
        row = session.get(Alias, (name, alias))
        if row is None:
            raise NotFound(f"model '{name}' has no alias '{alias}'", loc=("path", "alias"))
        audit.record(session, caller, "alias.delete", f"{name}@{alias}", version=row.version)
        session.delete(row)

    notify_on_commit(session, store)
    commit_deletion(session, stage)


def versions_trained_on(session: Session, dataset_id: str, limit: int) -> list[VersionOut]:
    """The newest ``limit`` versions trained on a dataset (its page lists them), newest first."""
    query = (
        select(ModelVersion)
        .options(selectinload(ModelVersion.evaluations))
        .where(ModelVersion.dataset_id == dataset_id)
        .order_by(ModelVersion.created_at.desc(), ModelVersion.id)
        .limit(limit)
    )
    return [version_out(v) for v in session.scalars(query)]


def model_names(session: Session, limit: int) -> list[str]:
    """The first ``limit`` model names in name order (a form's choices: no version is loaded)."""
    return list(session.scalars(select(Model.name).order_by(Model.name).limit(limit)))
