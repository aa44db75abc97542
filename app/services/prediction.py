"""Prediction: resolving the model, checking the request against it, and answering it, either at
once or, for a stored dataset larger than ``batch_job_rows``, as a batch prediction job.

Every answer is bounded before it is computed: rows x labels (``answer_cells``; a score of the
compact ``scores`` output counts ``1 / SCORES_PER_CELL``, for what it costs: docs/scale.md) at
most ``LABELSERVE_MAX_ANSWER_CELLS``, else a 413 that says how to batch, or a batch job for a
stored dataset. A reference resolved once is kept in the core's ``ResolvedRefs`` until the
registry changes, so a prediction with a cached reference needs no database session:
``app.api.fast_path`` answers it (``predict_cached``); everything else goes through ``predict``
in a worker thread. Both run the same checks, in the same order, and give the same answers.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy.orm import Session

from app.core import Core
from app.errors import InvalidInput, NotFound, PayloadTooLarge
from app.jobs.payloads import BatchPredictPayload
from app.methods.base import MethodSpec
from app.registry.model_cache import Served
from app.schemas import JobOut, PredictRequest
from app.services.datasets import dataset_with_features
from app.services.jobs import queue_job
from app.services.keys import Caller
from app.services.models import load_served, method_of, resolve_version_key
from app.serving.answers import (
    csr_to_matrix,
    instances_to_matrix,
    model_input,
    predict_items,
    score_matrix,
    selected_features,
)
from app.storage.orm import Dataset

#: a ``PredictResponse`` as plain JSON values, built directly: validating and serialising the
#: response model costs several times what orjson takes for the same bytes (docs/benchmarks.md)
Answer = dict[str, Any]


#: scores of the compact ``scores`` output that count as one cell of the answer bound
SCORES_PER_CELL = 16


def answer_cells(rows: int, labels: int, output: str, top_k: int | None) -> int:
    """The cells an answer of ``rows`` instances costs: rows x labels (a ranking cut at ``top_k``
    holds fewer; a ``scores`` matrix counts 1/16 of a cell a score)."""
    per_row = min(labels, top_k) if output == "ranking" and top_k is not None else labels
    cells = rows * per_row
    return -(-cells // SCORES_PER_CELL) if output == "scores" else cells


def work_cells(served: Served, body: PredictRequest) -> int:
    """What answering ``body`` with ``served`` costs, in cells (0 for a selector's features or a
    stored dataset): what the fast path decides inline or thread by."""
    rows = _rows(body)
    if rows is None:
        return 0
    output = body.output or method_of(served.method).default_output
    return answer_cells(rows, len(served.label_names), output, body.top_k)


def _rows(body: PredictRequest) -> int | None:
    """The instances a request gives (as lists or as CSR), None when it gives none."""
    if body.instances is not None:
        return len(body.instances)
    if body.csr is not None:
        return max(0, len(body.csr.indptr) - 1)
    return None


def check_answer(rows: int, labels: int, output: str, top_k: int | None, max_cells: int) -> None:
    """A 413 for an answer of more than ``max_cells``, saying how to get it in bounded parts."""
    cells = answer_cells(rows, labels, output, top_k)
    if cells <= max_cells:
        return
    per_row = answer_cells(1, labels, output, top_k)
    rows_ok = max(1, max_cells // max(per_row, 1))
    hints = [f"send at most {rows_ok} instances per request"]
    if output == "ranking":
        top = max_cells // max(rows, 1)
        if top >= 1:
            hints.append(f"use top_k <= {top}")
    if output != "scores":
        hints.append("use output 'scores' (a compact score matrix, 16 scores per cell)")
    hints.append("or upload the instances as a dataset and predict it by dataset_id (a batch job)")
    raise PayloadTooLarge(
        f"the answer would be {rows} rows x {labels} labels ({cells} cells of output '{output}'), "
        f"more than LABELSERVE_MAX_ANSWER_CELLS = {max_cells}; " + ", ".join(hints),
        loc=("body", "instances"),
    )


def served(core: Core, ref: str) -> Served:
    """The loaded version ``ref`` points to: from the resolved references, or resolved now.

    The reference is resolved in a read-only session of its own, closed before the model loads.
    A load can take seconds, and the requests for a version not yet loaded wait for the one
    loading it; had they held their sessions meanwhile, sixteen of them took every connection of
    the pool, the loader waited for one to read the version row, and an alias move behind them
    waited the pool's 30 s timeout (``benchmarks/faults.py``, the alias scenario).
    """
    token, found = core.refs.get(ref)
    if found is not None:
        core.metrics.cache_lookup(True)
        return found
    refused = core.refs.refusal(ref)
    if refused is not None:  # did not resolve, and the registry has not changed since
        raise refused
    with core.database.reading() as session:
        try:
            key = resolve_version_key(session, ref)
        except (NotFound, InvalidInput) as exc:
            core.refs.refuse(token, ref, exc)
            raise
    found = load_served(core.cache, core.metrics, key)
    core.refs.put(token, ref, found)
    return found


def cached(core: Core, body: PredictRequest) -> Served | None:
    """The version ``body`` names when it can be answered without a database session, or None:
    the reference is not resolved in this process yet, or a stored dataset is named."""
    if body.dataset_id is not None:
        return None
    _, found = core.refs.get(body.model)
    return found


def predict_cached(core: Core, body: PredictRequest, found: Served | None = None) -> bytes | None:
    """The answer's JSON without a database session, or None when the request needs one (see
    ``cached``; ``found``: what it gave, when the caller asked it already)."""
    found = found or cached(core, body)
    if found is None:
        return None
    answer = _answer(core, found, body, None)
    assert not isinstance(answer, JobOut)  # no dataset: never a job
    core.metrics.cache_lookup(True)
    return orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)


def predict(core: Core, body: PredictRequest, caller: Caller) -> Answer | JobOut:
    """The predictions, or the queued job that will write them (a large stored dataset), queued for ``caller``.

    The reference and the dataset row are read in read-only sessions, each closed before the model
    loads and before the prediction is computed (on SQLite they never take the write lock); a
    batch job is queued in a write transaction of its own.
    """
    found = served(core, body.model)
    dataset = None
    if body.dataset_id is not None:
        with core.database.reading() as session:
            dataset = _stored_dataset(session, found, body)
    return _answer(core, found, body, dataset, caller)


def _output(spec: MethodSpec, body: PredictRequest) -> str:
    output = body.output or spec.default_output
    if output == "scores" and spec.task != "selection":
        return output
    if output not in spec.outputs:
        given = spec.outputs if spec.task == "selection" else (*spec.outputs, "scores")
        raise InvalidInput(f"a {spec.id} model gives {', '.join(given)}; not '{output}'", loc=("body", "output"))
    return output


def _stored_dataset(session: Session, found: Served, body: PredictRequest) -> Dataset | None:
    """The dataset row a request predicts, when ``_answer`` will need it; its own errors come
    after those ``_answer`` raises first (the output, both inputs given), as they always did."""
    if body.dataset_id is None or body.instances is not None or body.csr is not None:
        return None
    if _output(method_of(found.method), body) == "features":
        return None
    return dataset_with_features(session, body.dataset_id, found.feature_names)


def _answer(
    core: Core, served: Served, body: PredictRequest, dataset: Dataset | None, caller: Caller | None = None
) -> Answer | JobOut:
    spec = method_of(served.method)
    output = _output(spec, body)
    info = {"name": served.name, "version": served.version, "method": spec.id}
    if output == "features":
        features = selected_features(served.model, served.feature_names, body.top_k)
        return {"model": info, "output": output, "features": features}
    if sum(x is not None for x in (body.dataset_id, body.instances, body.csr)) > 1:
        raise InvalidInput("give exactly one of instances, csr and dataset_id", loc=("body",))
    labels = len(served.label_names)
    limit = core.settings.max_answer_cells
    if body.dataset_id is not None:
        assert dataset is not None  # read by ``predict`` (``predict_cached`` never takes a dataset)
        cells = answer_cells(dataset.n_samples, labels, output, body.top_k)
        if dataset.n_samples > core.settings.batch_job_rows or cells > limit:
            assert caller is not None  # given with the dataset by ``predict``
            payload = BatchPredictPayload(
                model=f"{served.name}@{served.version}",  # pinned: a moved alias must not change the job
                method=spec.id,
                dataset_id=dataset.id,
                output=output,
                threshold=body.threshold,
                top_k=body.top_k,
                include_scores=body.include_scores,
                format=body.format,
            )
            with core.database.session() as session:
                return queue_job(session, core, payload, caller)
        X, _ = core.store.load_dataset(dataset.sha256)
    elif body.instances is not None:
        check_answer(len(body.instances), labels, output, body.top_k, limit)
        X = instances_to_matrix(body.instances, served.feature_names)
    elif body.csr is not None:
        check_answer(max(1, len(body.csr.indptr) - 1), labels, output, body.top_k, limit)
        csr = body.csr
        X = model_input(served.model, csr_to_matrix(csr.indptr, csr.indices, csr.values, len(served.feature_names)))
    else:
        raise InvalidInput("give exactly one of instances, csr and dataset_id", loc=("body", "instances"))
    if output == "scores":
        return {"model": info, "output": output, "labels": served.label_names, "scores": score_matrix(served.model, X)}
    predictions = predict_items(
        served.model,
        output,
        X,
        served.label_names,
        threshold=body.threshold,
        top_k=body.top_k,
        include_scores=body.include_scores,
    )
    return {"model": info, "output": output, "predictions": predictions}
