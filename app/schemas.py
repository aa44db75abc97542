"""Request and response bodies of the HTTP API (see API.md for the contract)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from app.jobs.base import JobStatus
from app.methods.catalog import catalog
from app.registry import ID_PATTERN, MAX_DB_INT, NAME_PATTERN, REF_PATTERN, ModelRef

T = TypeVar("T")
OutputName = Literal["labels", "ranking", "distribution", "features"]


def _known_method(value: str) -> str:
    if value not in catalog():
        raise ValueError(f"unknown method '{value}'; available: {', '.join(catalog())}")
    return value


def _method_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(catalog())


def _known_or_auto(value: str) -> str:
    return value if value == "auto" else _known_method(value)


def _train_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = ["auto", *catalog()]


# a method id of the catalog; the schema lists them (computed when the schema is generated)
MethodId = Annotated[str, AfterValidator(_known_method), Field(json_schema_extra=_method_enum)]
# what POST /train accepts: a catalog id, or "auto" (chosen by cross-validation on the dataset)
TrainMethodId = Annotated[str, AfterValidator(_known_or_auto), Field(json_schema_extra=_train_enum)]
DatasetRef = Annotated[str, Field(pattern=ID_PATTERN, description="a dataset id")]


def _model_reference(value: str) -> str:
    ModelRef.parse(value)  # its ValueError says what is wrong, which a pattern mismatch would not
    return value


ModelReference = Annotated[
    str,
    AfterValidator(_model_reference),
    Field(
        json_schema_extra={"pattern": REF_PATTERN},
        description="a model reference: name (latest version), name@version or name@alias",
    ),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_offset: int | None


# datasets ---------------------------------------------------------------------------------
class DatasetSummary(BaseModel):
    """A dataset as listings show it: everything but the feature and label names, whose size
    grows with the dataset (a listing must stay small however wide the stored datasets are)."""

    id: str
    name: str
    kind: Literal["multilabel", "distribution"]
    format: str
    n_samples: int
    n_features: int
    n_labels: int
    sha256: str
    warnings: list[str]
    created_at: datetime

    model_config = ConfigDict(from_attributes=True)


class DatasetOut(DatasetSummary):
    """One dataset in full (upload response, ``GET /datasets/{id}``)."""

    feature_names: list[str]
    label_names: list[str]


# methods ----------------------------------------------------------------------------------
class MethodOut(BaseModel):
    id: str
    task: str
    outputs: list[str]
    dataset_kind: str
    summary: str
    paper: str
    stages: list[str]
    params: dict[str, Any] = Field(description="JSON schema of the hyperparameters")


# training and jobs ------------------------------------------------------------------------
class InlineData(Strict):
    """A small dataset sent in the request; it is stored like an upload, so models keep lineage."""

    X: list[list[float]] = Field(min_length=2, description="feature rows, one per sample (n x d)")
    Y: list[list[float]] = Field(
        min_length=2, description="label rows (n x q): 0/1 for multi-label data, distributions (sum 1) for LDL"
    )
    feature_names: list[str] | None = Field(None, description="d feature names (default f0, f1, ...)")
    label_names: list[str] | None = Field(None, description="q label names (default l0, l1, ...)")


class FeatureSelection(Strict):
    """Train on the features a selector model chose (its best ``top_k`` or ``top_fraction``)."""

    model: ModelReference = Field(description="selector model reference: name, name@version or name@alias")
    top_k: int | None = Field(None, ge=1, description="keep the selector's best top_k features (or top_fraction)")
    top_fraction: float | None = Field(
        None, gt=0, le=1, description="keep this fraction of the features, best first (or top_k)"
    )

    @model_validator(mode="after")
    def _one_size(self) -> FeatureSelection:
        if (self.top_k is None) == (self.top_fraction is None):
            raise ValueError("give exactly one of top_k and top_fraction")
        return self


class TrainRequest(Strict):
    """Train ``method`` on a stored dataset (``dataset_id``) or inline ``data`` (exactly one)."""

    method: TrainMethodId = Field(description="method id (or auto); GET /methods lists them with their hyperparameters")
    dataset_id: DatasetRef | None = Field(None, description="a stored dataset's id (or give data)")
    data: InlineData | None = Field(None, description="small data inline instead of a dataset_id")
    model_name: str = Field(
        pattern=NAME_PATTERN, description="registry name; each successful training adds a version to it"
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="the method's hyperparameters (GET /methods/{id}); omitted ones take defaults"
    )
    random_state: int | None = Field(
        None, ge=0, le=2**32 - 1, description="seed for methods with randomness (drawn and recorded when omitted)"
    )
    feature_selector: FeatureSelection | None = Field(
        None, description="classifiers: train on the features a selector model chose"
    )

    @model_validator(mode="after")
    def _one_source(self) -> TrainRequest:
        if (self.dataset_id is None) == (self.data is None):
            raise ValueError("give exactly one of dataset_id and data")
        return self


class CompareRequest(Strict):
    dataset_id: DatasetRef
    methods: list[MethodId] | None = Field(
        None, min_length=1, description="methods to compare; null = every method fitting the dataset"
    )
    metric: str | None = Field(None, description="metric to rank by; default average_precision or chebyshev")
    cv: int = Field(5, ge=2, le=20, description="folds of the cross-validation")
    random_state: int | None = Field(None, ge=0, le=2**32 - 1)


class TrainAccepted(BaseModel):
    job_id: str
    status: str
    status_url: str


class ModelPointer(BaseModel):
    name: str
    version: int


class JobOut(BaseModel):
    id: str
    kind: str
    status: JobStatus
    progress: float
    stage: str
    method: str | None
    dataset_id: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    model: ModelPointer | None
    error: str | None
    result_url: str | None = None


# registry ---------------------------------------------------------------------------------
class FitWarningOut(BaseModel):
    category: str = Field(description="Warning class, e.g. ConvergenceWarning or EmptyLabelSetWarning.")
    message: str


class EvaluationOut(BaseModel):
    """One ``POST /evaluate`` of a version: the dataset, the figures and what shaped them."""

    dataset_id: str
    dataset_sha256: str | None
    n_samples: int | None
    metrics: dict[str, float | None]
    options: dict[str, Any] = Field(description="threshold, and for selectors the downstream classifier")
    created_at: datetime

    model_config = ConfigDict(from_attributes=True)


class VersionOut(BaseModel):
    name: str
    version: int
    method: str
    params: dict[str, Any]
    dataset_id: str | None
    dataset_sha256: str
    feature_names: list[str]
    label_names: list[str]
    metrics: dict[str, Any] | None = Field(
        description="the latest evaluation's metrics on each dataset evaluated, by dataset id; null before any"
    )
    training_seconds: float
    warnings: list[FitWarningOut] = Field(
        default_factory=list,
        description="Warnings the training raised: a fit that stopped without converging or met a degenerate case.",
    )
    library_versions: dict[str, str]
    artifact_sha256: str
    job_id: str | None
    created_at: datetime
    evaluations: list[EvaluationOut] = Field(description="every evaluation of this version, oldest first")
    selection: dict[str, Any] | None = Field(
        None, description='how "method": "auto" chose this method: metric, cv and the leaderboard (best first)'
    )


class ModelOut(BaseModel):
    name: str
    latest_version: int | None
    aliases: dict[str, int]
    versions: list[VersionOut]


class AliasIn(Strict):
    version: int = Field(ge=1, le=MAX_DB_INT, description="the version the alias points to")


# prediction and evaluation ----------------------------------------------------------------
class PredictRequest(Strict):
    """Predict ``instances`` or a stored dataset; a selector's ``features`` need neither."""

    model: ModelReference = Field(description="model reference: name (latest version), name@version or name@alias")
    instances: list[list[float]] | list[dict[str, float]] | None = Field(
        None, description="feature vectors in training feature order, or {feature_name: value} objects"
    )
    dataset_id: DatasetRef | None = Field(None, description="predict a stored dataset instead of instances")
    output: OutputName | None = Field(
        None,
        description="one of the model's outputs; default labels (classifiers), distribution (LDL), features (selectors)",
    )
    threshold: float | None = Field(None, description="labels: score above which a label is predicted")
    top_k: int | None = Field(None, ge=1, description="ranking, features: keep only the best top_k")
    include_scores: bool = Field(False, description="labels: add each label's score")
    format: Literal["jsonl", "csv"] = Field(
        "jsonl", description="result file format when a large dataset is predicted as a job"
    )


class ModelInfo(BaseModel):
    name: str
    version: int
    method: str


class PredictResponse(BaseModel):
    model: ModelInfo
    output: OutputName
    predictions: list[dict[str, Any]] | None = None
    features: list[dict[str, Any]] | None = None


class EvaluateRequest(Strict):
    """The standard metrics of the model's task on a stored dataset with the true labels."""

    model: ModelReference = Field(description="model reference: name (latest version), name@version or name@alias")
    dataset_id: DatasetRef = Field(description="a stored dataset with the same features and labels")
    threshold: float | None = Field(None, description="classifiers: score above which a label is predicted")
    downstream: Literal["mlknn"] = Field(
        "mlknn", description="selectors: the classifier trained on the selected features"
    )
    top_k: int | None = Field(None, ge=1, description="selectors: how many features to keep")
    train_dataset_id: DatasetRef | None = Field(
        None,
        description="selectors: training data for the downstream classifier "
        "(default: the selector's own training dataset)",
    )


class EvaluateResponse(BaseModel):
    model: ModelInfo
    dataset_id: str
    n_samples: int
    metrics: dict[str, float | None]
    downstream: dict[str, Any] | None = None
