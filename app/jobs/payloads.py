"""What a job carries from the API to the process that runs it, as typed models.

The payload is stored as JSON in ``jobs.request`` when the job is queued and read back by the
worker, possibly on another machine and after an upgrade. So it holds only references (ids,
model references, validated parameters) and never data, and unknown keys are ignored on the way
back in so that a row written by an older or newer version still loads. The job's ``kind``
column says which model reads it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    """Base of every payload: ``kind`` is the ``jobs.kind`` value of the jobs that carry it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: ClassVar[str]

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
    its machine. Rows queued by older versions (partial ``params``, no drawn seed) still run.
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
    """The typed payload of a job row (``jobs.kind``, ``jobs.request``)."""
    model = PAYLOADS.get(kind)
    if model is None:
        raise ValueError(f"unknown job kind '{kind}'")
    return model.model_validate(request)
