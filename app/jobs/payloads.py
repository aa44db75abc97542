"""What a job carries from the API to the process that runs it, as typed models.

The payload is stored as JSON in ``jobs.request`` when the job is queued and read back by the
worker, possibly on another machine and after an upgrade. So it holds only references (ids,
model references, validated parameters) and never data, and unknown keys are ignored on the way
back in. The job's ``kind`` column says which model reads it; ``payload_format`` which release's
rules wrote it: a row of 0.1.x has none (format 1), and a worker refuses a format newer than its
own (queued by a newer release's API) rather than run it by older rules.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

#: the format of the payloads this release writes: 2 since 0.2.0 (complete ``params``, the seed
#: drawn at submit); a stored row without one was queued by 0.1.x (format 1)
PAYLOAD_FORMAT = 2


class Payload(BaseModel):
    """Base of every payload: ``kind`` is the ``jobs.kind`` value of the jobs that carry it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: ClassVar[str]

    payload_format: int = PAYLOAD_FORMAT

    #: the request's own time limit (``max_seconds``, within the server's), carried with the job
    #: so that whichever backend runs it stops it there (``app.jobs.work.TimeLimit``)
    max_seconds: float | None = None


class SelectorChoice(BaseModel):
    """Train on the ``top_k`` (or ``top_fraction`` of the) features a selector model ranks best."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str
    top_k: int | None = None
    top_fraction: float | None = None


class TrainPayload(Payload):
    """The training plan: fit ``method`` with ``params`` on a stored dataset (on the features
    ``feature_selector`` keeps) and register the result as ``model_name``.

    Decided at submit (``services.training.prepare``): ``params`` are the method's declaration
    validated and dumped whole, with a drawn seed when the method takes one and the request gave
    none; for ``auto`` they are the selection's own parameters and ``random_state`` its seed. The
    job executes the plan: it validates nothing again (``fit`` does) and only bounds ``n_jobs`` by
    its machine. Rows of 0.1.x (``payload_format`` 1: partial ``params``, no drawn seed) still run.
    """

    kind: ClassVar[str] = "train"

    method: str
    dataset_id: str
    model_name: str
    params: dict[str, Any] = Field(default_factory=dict)
    random_state: int | None = None
    feature_selector: SelectorChoice | None = None

    def columns(self) -> dict[str, Any]:
        """The job row's denormalised columns (shown by ``GET /jobs``, used by filters)."""
        return {"method": self.method, "dataset_id": self.dataset_id, "model_name": self.model_name}


class BatchPredictPayload(Payload):
    """Predict every row of a stored dataset with one pinned model version into a result file.

    ``model`` is pinned (``name@version``) when the job is queued, so moving an alias or adding a
    version while the job waits does not change what it predicts with.
    """

    kind: ClassVar[str] = "predict"

    model: str
    method: str | None = None
    dataset_id: str
    output: str
    threshold: float | None = None
    top_k: int | None = None
    include_scores: bool = False
    format: Literal["jsonl", "csv"] = "jsonl"

    def columns(self) -> dict[str, Any]:
        """The job row's denormalised columns (shown by ``GET /jobs``, used by filters), with the
        pinned version as the job's ``model``: what it predicts with, for lineage."""
        name, _, version = self.model.rpartition("@")
        pinned = {"model_name": name, "model_version": int(version)} if name and version.isdigit() else {}
        return {"method": self.method, "dataset_id": self.dataset_id} | pinned


class ComparePayload(Payload):
    """Cross-validate ``methods`` (default: every method fitting the dataset) on a stored dataset.

    The result is the leaderboard (JSON) and an HTML report, both files in the results folder.
    """

    kind: ClassVar[str] = "compare"

    dataset_id: str
    methods: list[str] | None = None
    metric: str | None = None
    cv: int = 5
    random_state: int | None = None

    def columns(self) -> dict[str, Any]:
        """The job row's denormalised columns (shown by ``GET /jobs``, used by filters)."""
        return {"dataset_id": self.dataset_id}


JobPayload = TrainPayload | BatchPredictPayload | ComparePayload
PAYLOADS: dict[str, type[JobPayload]] = {
    model.kind: model for model in (TrainPayload, BatchPredictPayload, ComparePayload)
}


def load_payload(kind: str, request: dict[str, Any]) -> JobPayload:
    """The typed payload of a job row (``jobs.kind``, ``jobs.request``); a row without a
    ``payload_format`` was queued by 0.1.x."""
    model = PAYLOADS.get(kind)
    if model is None:
        raise ValueError(f"unknown job kind '{kind}'")
    payload = model.model_validate({"payload_format": 1, **request})
    if payload.payload_format > PAYLOAD_FORMAT:
        raise ValueError(
            f"the job was queued by a newer release (payload format {payload.payload_format}, this worker "
            f"reads {PAYLOAD_FORMAT} and earlier): run the same release on the API and every worker"
        )
    return payload
