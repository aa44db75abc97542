"""Training: everything about a ``POST /train`` that can be checked is checked before a job is queued.

The result is the training plan, a ``TrainPayload``: the method, its parameters validated against
the declaration (every one of them, with a drawn seed when none was given), the dataset, the
model name to register and the feature selection. The job only executes it (``app.jobs.work``).

The method exists, its params validate, the dataset exists (or the inline data validates) and
has the kind the method needs and enough samples for the params (``k`` neighbours or clusters),
and a feature selector to train on is a selector trained on the same features. Only then are
inline data stored and a job row committed and handed to the runner, so a rejected request
leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session

from app.core import Core
from app.errors import InvalidFields, InvalidInput, tidy_pydantic
from app.evaluation import auto_request, pool
from app.formats import ParsedDataset
from app.jobs.payloads import SelectorChoice, TrainPayload
from app.methods.base import InvalidParameterError, MethodSpec, checked_params, draw_seed
from app.methods.catalog import catalog, get_method
from app.methods.memory_bounds import MemoryBudget
from app.schemas import JobOut, TrainRequest
from app.services import memory
from app.services.datasets import get_dataset, limits_of, parse_inline, store_inline
from app.services.jobs import check_room, job_when_ended, queue_job, time_limit
from app.services.keys import Caller
from app.services.models import resolve_version
from app.storage.orm import Dataset
from app.suggest import did_you_mean


@dataclass(frozen=True)
class Prepared:
    """A checked training request: the method, its dataset, and what the job will carry."""

    spec: MethodSpec | None  # None for "auto": the job chooses the method
    dataset: Dataset
    payload: TrainPayload


def submit(core: Core, body: TrainRequest, caller: Caller) -> JobOut:
    """Check the request and queue its training job for ``caller`` (inline data must fit in the
    dataset limits, the training's estimated memory in ``LABELSERVE_MAX_MODEL_MB``, the caller's
    queued jobs in ``LABELSERVE_MAX_QUEUED_JOBS_PER_KEY``: checked first, as inline data are
    stored before the job is queued).

    Each step opens the session it needs: reads in reading sessions, the inline dataset's row and
    the job's in their own writing ones; parsing and file reads happen outside every transaction.
    """
    budget = memory.budget_of(core.settings)
    max_seconds = time_limit(core.settings, body.max_seconds)
    with core.database.reading() as session:
        check_room(session, core, caller)
    plan = prepare(core, body, budget).payload
    with core.database.session() as session:
        return queue_job(session, core, plan.model_copy(update={"max_seconds": max_seconds}), caller)


async def submit_and_wait(core: Core, body: TrainRequest, caller: Caller, timeout: float) -> JobOut:
    """``POST /train?wait=true``: queue the training and answer once it ended (or ``timeout`` passed).

    The waiting place (``LABELSERVE_MAX_WAITERS``) is taken before the job is queued: refused
    then (429), the request queued nothing and can be sent again as it is.
    """
    with core.runner.events.admitted():
        job = await asyncio.to_thread(submit, core, body, caller)
        return await job_when_ended(core, job.id, timeout)


def prepare(core: Core, body: TrainRequest, budget: MemoryBudget | None = None) -> Prepared:
    """The checked request; ``budget`` (None: unbounded) bounds the training's estimated memory
    on a stored dataset (inline data are bounded by the dataset limits)."""
    if body.method == pool.AUTO:
        return prepare_auto(core, body)
    spec = catalog()[body.method]  # the request model admits only the catalog's ids
    params = dict(body.params)
    if body.random_state is not None and "random_state" in spec.params.model_fields:
        params.setdefault("random_state", body.random_state)
    try:
        validated = checked_params(spec.params, params)
    except ValidationError as exc:
        raise params_error(exc, spec.id, spec.params) from None
    parsed = None
    kind: str
    if body.data is not None:
        parsed = parse_inline(limits_of(core.settings), body.data)
        kind, n_samples, feature_names, where = parsed.kind, parsed.n_samples, parsed.feature_names, "data"
    else:
        existing = _stored(core, body)
        kind, n_samples, feature_names, where = existing.kind, existing.n_samples, existing.feature_names, "dataset_id"
    if kind != spec.dataset_kind:
        name = "the inline data" if parsed is not None else f"dataset '{existing.name}' (id {existing.id})"
        raise InvalidInput(
            f"method '{spec.id}' needs a {spec.dataset_kind} dataset; {name} is {kind}", loc=("body", where)
        )
    check_sizes(spec, validated.model_dump(), n_samples)
    if budget is not None and parsed is None:
        memory.check(spec, validated.model_dump(), memory.dataset_shape(core.store, existing), budget)
    if body.feature_selector is not None:
        with core.database.reading() as session:
            check_selector(session, spec, body, feature_names)
    dataset = _store_inline(core, parsed) if parsed is not None else existing
    selector = body.feature_selector
    payload = TrainPayload(
        method=spec.id,
        dataset_id=dataset.id,
        model_name=body.model_name,
        params=seeded(validated).model_dump(mode="json"),
        random_state=body.random_state,
        feature_selector=SelectorChoice.model_validate(selector.model_dump()) if selector else None,
    )
    return Prepared(spec, dataset, payload)


def seeded(validated: BaseModel) -> BaseModel:
    """The validated parameters with a drawn ``random_state`` when the method takes one and none
    was given: decided at submit, so that every version is reproducible and a redelivered job
    trains with the same seed."""
    if "random_state" in type(validated).model_fields and getattr(validated, "random_state", None) is None:
        return validated.model_copy(update={"random_state": draw_seed()})
    return validated


def params_error(exc: ValidationError, method: str, declared: type[BaseModel]) -> InvalidFields:
    """The 422 for ``params`` that fail the method's declaration, one item per error located at
    ``body.params.<name>``; an unknown name (pydantic's bare "Extra inputs are not permitted")
    says which names the method has, and the closest one when it looks like a typo."""
    names = list(declared.model_fields)
    errors: list[tuple[tuple[str | int, ...], str, str]] = []
    for item_loc, message, kind in tidy_pydantic(exc.errors()):
        loc = ("body", "params", *item_loc)
        if kind == "extra_forbidden":
            unknown = str(item_loc[-1])
            hint = did_you_mean(unknown, names)
            message = f"unknown parameter '{unknown}' for method '{method}'{hint}; its parameters: {', '.join(names)}"
        errors.append((loc, message, kind))
    return InvalidFields(errors)


def _stored(core: Core, body: TrainRequest) -> Dataset:
    """The stored dataset the request names, read in a reading session of its own."""
    assert body.dataset_id is not None  # the request model demands exactly one of them
    with core.database.reading() as session:
        return get_dataset(session, body.dataset_id, loc=("body", "dataset_id"))


def _store_inline(core: Core, parsed: ParsedDataset) -> Dataset:
    """Checked inline data stored as a dataset, in a writing session of its own."""
    with core.database.session() as session:
        return store_inline(session, core.store, parsed)


def _source(core: Core, body: TrainRequest) -> Dataset:
    if body.data is not None:
        return _store_inline(core, parse_inline(limits_of(core.settings), body.data))
    return _stored(core, body)


def prepare_auto(core: Core, body: TrainRequest) -> Prepared:
    """``"method": "auto"``: the selection's own params (candidates, metric, cv, tune) are checked
    against the dataset; the job runs the cross-validation and registers the winner."""
    try:
        request = checked_params(auto_request.AutoParams, body.params)
    except ValidationError as exc:
        raise params_error(exc, pool.AUTO, auto_request.AutoParams) from None
    if body.feature_selector is not None:
        raise InvalidInput(
            'train the selected-features classifier with a named method; "auto" chooses among all features',
            loc=("body", "feature_selector"),
        )
    dataset = _source(core, body)
    problems = auto_request.check_auto(request, dataset.kind)
    if request.cv is not None and request.cv > dataset.n_samples:
        problems.append(
            f"cv: {request.cv} folds need at least {request.cv} samples; the dataset has {dataset.n_samples}"
        )
    if problems:
        raise InvalidInput("; ".join(problems), loc=("body", "params"))
    payload = TrainPayload(
        method=pool.AUTO,
        dataset_id=dataset.id,
        model_name=body.model_name,
        params=request.model_dump(mode="json", exclude_none=True),
        # the same request picks the same model: a fixed seed of the folds and candidates unless one is given
        random_state=body.random_state if body.random_state is not None else pool.AUTO_RANDOM_STATE,
    )
    return Prepared(None, dataset, payload)


def check_sizes(spec: MethodSpec, params: dict[str, Any], n_samples: int) -> None:
    """Refuse at submit what ``fit`` would refuse later, by the estimator's own declaration:
    ``k`` neighbours or clusters out of a dataset with too few samples."""
    try:
        spec.estimator.check_sample_counts(params, n_samples)
    except InvalidParameterError as exc:
        raise InvalidInput(exc.errors[0]["msg"], loc=("body", "params", exc.param)) from None


def check_selector(session: Session, spec: MethodSpec, body: TrainRequest, feature_names: list[str]) -> None:
    """Training on selected features needs a classifier, and a selector fitted on the same features."""
    selection = body.feature_selector
    if selection is None:
        return
    loc = ("body", "feature_selector", "model")
    if spec.task != "multilabel":
        raise InvalidInput("only classifiers can be trained on selected features", loc=("body", "feature_selector"))
    version = resolve_version(session, selection.model, loc=loc)
    selector_spec = get_method(version.method)
    if selector_spec is None or selector_spec.task != "selection":
        raise InvalidInput(f"'{selection.model}' is a {version.method} model, not a feature selector", loc=loc)
    if version.feature_names != feature_names:
        raise InvalidInput("the selector was trained on different features than this dataset", loc=loc)
