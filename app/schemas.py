"""Request and response bodies of the HTTP API (docs/api.md describes it)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.formats.validation import MAX_ABS_FEATURE
from app.jobs.base import JobStatus
from app.methods.catalog import catalog
from app.registry.refs import MAX_DB_INT, NAME_PATTERN, REF_PATTERN, ModelRef
from app.suggest import did_you_mean
from app.upload_options import DATASET_NAME_MAX_LENGTH, DATASET_NAME_PATTERN, name_fault

T = TypeVar("T")
OutputName = Literal["labels", "ranking", "distribution", "features", "scores"]


def _known_method(value: str) -> str:
    if value not in catalog():
        raise ValueError(f"unknown method '{value}'{did_you_mean(value, catalog())}; available: {', '.join(catalog())}")
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
# a dataset's id, or the name of exactly one dataset (``services.datasets.get_dataset``)
DatasetRef = Annotated[str, Field(min_length=1, max_length=255, description="a dataset id, or a unique dataset name")]


def _dataset_name(value: str) -> str:
    fault = name_fault(value)
    if fault is not None:  # said in words: the pattern's mismatch would only quote the pattern
        raise ValueError(f"a dataset name {fault}")
    return value


# a name given to a dataset: the rules of an upload's ``name`` (app.upload_options)
DatasetName = Annotated[
    str,
    AfterValidator(_dataset_name),
    Field(min_length=1, max_length=DATASET_NAME_MAX_LENGTH, json_schema_extra={"pattern": DATASET_NAME_PATTERN}),
]


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


def _not_a_boolean_or_string(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# The numbers of a request as JSON gives them. Pydantic's lax mode would turn a boolean into 0 or 1
# and a numeric string into its number ({"random_state": false} trained with seed 0, "0.9" was a
# feature value); a float field would also take NaN and infinity, which Python's json module reads
# from the tokens NaN and Infinity ({"threshold": NaN} predicted empty label sets). Each is a 422 at
# its field instead. A float field takes a JSON integer (strict mode allows that). An integer field
# is not strict: JSON Schema's "integer", which the OpenAPI document declares, includes 2.0 (and
# schemathesis sends it), so an integral float stays an integer and only booleans and strings are
# refused before lax validation (which refuses 2.5 itself).
Integer = Annotated[int, BeforeValidator(_not_a_boolean_or_string)]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Flag = Annotated[bool, Field(strict=True)]


class Page(BaseModel, Generic[T]):
    """One page of a listing (``?limit=``, ``?offset=``)."""

    items: list[T] = Field(description="this page's items, in the listing's order")
    next_offset: int | None = Field(description="the offset of the next page; null on the last page")


# datasets ---------------------------------------------------------------------------------
class DatasetSummary(BaseModel):
    """A dataset as listings show it: everything but the feature and label names, whose size
    grows with the dataset (a listing must stay small however wide the stored datasets are)."""

    id: str = Field(description="the dataset id: the first 16 hex digits of sha256")
    name: str = Field(description="the upload's name field, or the file name")
    kind: Literal["multilabel", "distribution"] = Field(
        description="multilabel: 0/1 label rows; distribution: label rows of non-negative reals summing to 1"
    )
    format: str = Field(description="the format it was read as (or the file's extension; inline for inline data)")
    n_samples: int = Field(description="rows (instances)")
    n_features: int = Field(description="feature columns")
    n_labels: int = Field(description="label columns")
    sha256: str = Field(description="sha256 of what was uploaded: the files and the parse options")
    warnings: list[str] = Field(description="what the parser changed or dropped (e.g. string attributes)")
    created_at: datetime = Field(description="when it was stored (UTC)")
    parent_id: str | None = Field(
        None, description="the dataset it was split from (POST /datasets/{id}/split); null for an upload"
    )
    split: dict[str, Any] | None = Field(
        None, description="how it was split from its parent: part (train or test), test_fraction, random_state, method"
    )

    model_config = ConfigDict(from_attributes=True)


class DatasetOut(DatasetSummary):
    """One dataset in full (upload response, ``GET /datasets/{id}``)."""

    feature_names: list[str] = Field(description="the feature names, in column order")
    label_names: list[str] = Field(description="the label names, in column order")
    storage: Literal["dense", "sparse"] | None = Field(
        None,
        description="how the features are stored: dense, or sparse (CSR: only the non-zeros; sparse ARFF and "
        "LIBSVM uploads, and tables mostly of zeros); null when the stored file is missing",
    )
    density: float | None = Field(
        None,
        description="share of non-zero feature values (0-1); null for datasets stored by 0.1.x (dense float64 files) "
        "or when the stored file is missing",
    )
    stored_bytes: int | None = Field(
        None, description="size of the stored file in bytes (compressed); null when the stored file is missing"
    )


class SplitRequest(Strict):
    """Split a stored dataset into a train and a test dataset."""

    test_fraction: Number = Field(
        0.2, gt=0, lt=1, description="share of the rows that go to the test part (rounded up to whole rows)"
    )
    random_state: Integer = Field(
        0, ge=0, le=2**32 - 1, description="seed of the split: the same dataset, fraction and seed split the same way"
    )
    train_name: DatasetName | None = Field(
        None,
        description="name of the train part (default: the parent's name + -train, + -train-2 ... when another dataset holds that name); the names of uploads",
    )
    test_name: DatasetName | None = Field(
        None,
        description="name of the test part (default: the parent's name + -test, + -test-2 ... when another dataset holds that name); the names of uploads",
    )


class SplitOut(BaseModel):
    """The two parts of a split, each a dataset whose ``parent_id`` is the split one."""

    train: DatasetOut = Field(description="the train part")
    test: DatasetOut = Field(description="the test part")


# methods ----------------------------------------------------------------------------------
class MethodOut(BaseModel):
    """A learning method of the catalog: what it does, what it needs, what it can predict."""

    id: str = Field(description="the method id POST /train takes")
    task: str = Field(description="multilabel (classifiers), distribution (LDL) or selection (feature selectors)")
    outputs: list[str] = Field(description="the outputs POST /predict can ask for; the first is the default")
    dataset_kind: str = Field(description="the dataset kind it trains on: multilabel or distribution")
    summary: str = Field(description="what the method does, in one line")
    paper: str = Field(description="the paper it comes from (empty for baselines without one)")
    stages: list[str] = Field(description="the stages a training job of it reports, in order")
    params: dict[str, Any] = Field(description="JSON schema of the hyperparameters")


# training and jobs ------------------------------------------------------------------------
class InlineData(Strict):
    """A small dataset sent in the request; it is stored like an upload, so models keep lineage."""

    X: list[list[Number]] = Field(min_length=2, description="feature rows, one per sample (n x d)")
    Y: list[list[Number]] = Field(
        min_length=2, description="label rows (n x q): 0/1 for multi-label data, distributions (sum 1) for LDL"
    )
    feature_names: list[str] | None = Field(None, description="d feature names (default f0, f1, ...)")
    label_names: list[str] | None = Field(None, description="q label names (default l0, l1, ...)")


class FeatureSelection(Strict):
    """Train on the features a selector model chose (its best ``top_k`` or ``top_fraction``)."""

    model: ModelReference = Field(description="selector model reference: name, name@version or name@alias")
    top_k: Integer | None = Field(None, ge=1, description="keep the selector's best top_k features (or top_fraction)")
    top_fraction: Number | None = Field(
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
    random_state: Integer | None = Field(
        None, ge=0, le=2**32 - 1, description="seed for methods with randomness (drawn and recorded when omitted)"
    )
    feature_selector: FeatureSelection | None = Field(
        None, description="classifiers: train on the features a selector model chose"
    )
    max_seconds: float | None = Field(
        None,
        gt=0,
        description="stop the job (failed, naming this limit) at its first progress report past this many seconds; "
        "at most the server's LABELSERVE_MAX_JOB_SECONDS (default 6 hours); null: the server's limit alone",
    )

    @model_validator(mode="after")
    def _one_source(self) -> TrainRequest:
        if (self.dataset_id is None) == (self.data is None):
            raise ValueError("give exactly one of dataset_id and data")
        return self


class CompareRequest(Strict):
    """Cross-validate several methods on one dataset, as a job."""

    dataset_id: DatasetRef = Field(description="the dataset to compare the methods on")
    methods: list[MethodId] | None = Field(
        None, min_length=1, description="methods to compare; null = every method fitting the dataset"
    )
    metric: str | None = Field(None, description="metric to rank by; default average_precision or chebyshev")
    cv: Integer = Field(5, ge=2, le=20, description="folds of the cross-validation")
    random_state: Integer | None = Field(
        None, ge=0, le=2**32 - 1, description="seed of the folds and the methods (drawn and recorded when omitted)"
    )
    max_seconds: float | None = Field(
        None,
        gt=0,
        description="stop the job (failed, naming this limit) at its first progress report past this many seconds; "
        "at most the server's LABELSERVE_MAX_JOB_SECONDS (default 6 hours); null: the server's limit alone",
    )


class ModelPointer(BaseModel):
    """The model version a job registered (or used)."""

    name: str = Field(description="the model name")
    version: int = Field(description="the version number")


class JobOut(BaseModel):
    """A background job: a training, a comparison, or a large batch prediction."""

    id: str = Field(description="the job's id")
    kind: str = Field(description="train, compare or predict (a batch prediction)")
    status: JobStatus = Field(description="queued, running, succeeded, failed or cancelled")
    progress: float = Field(description="0.0 to 1.0, as the method reports it")
    stage: str = Field(description="what the job is doing now (the method's stages, then done)")
    method: str | None = Field(description="the method trained or used; null for a comparison")
    dataset_id: str | None = Field(description="the dataset it trains on, compares on or predicts")
    created_at: datetime = Field(description="when it was queued (UTC)")
    started_at: datetime | None = Field(description="when a worker started it (UTC); null while queued")
    finished_at: datetime | None = Field(description="when it ended (UTC); null until then")
    model: ModelPointer | None = Field(description="the version a training registered; null until it succeeded")
    error: str | None = Field(description="why it failed or was cancelled; null otherwise")
    result_url: str | None = Field(
        None, description="where a succeeded comparison or batch prediction's result is; null otherwise"
    )
    queue_position: int | None = Field(
        None,
        description="while queued, its place in the queue (1: the next to start, once a training process is "
        "free); null otherwise",
    )
    random_state: int | None = Field(
        None,
        description="the seed the job runs with (auto: its folds and candidates, fixed at 0 unless the request gave "
        "one; a method: its random_state, drawn when omitted): the same request with this seed does the same; "
        "null when the job has none",
    )
    max_seconds: float | None = Field(
        None,
        description="the request's own time limit in seconds (max_seconds); null when it gave none (the server's "
        "LABELSERVE_MAX_JOB_SECONDS still applies)",
    )
    submitted_by: str | None = Field(
        None, description="the name of the API key that queued it; null when the server has no keys"
    )


class JobAccepted(JobOut):
    """A queued job (202), the one answer of every route that queues one (``POST /train``,
    ``POST /compare``, a batch ``POST /predict``): the job record as ``GET /jobs/{job_id}`` shows
    it, plus ``job_id`` and ``status_url``; poll ``status_url`` until its status is final."""

    job_id: str = Field(description="the job's id (the same as id)")
    status_url: str = Field(description="where to read the job: /jobs/{job_id}")

    @classmethod
    def of(cls, job: JobOut) -> JobAccepted:
        return cls.model_validate(job.model_dump() | {"job_id": job.id, "status_url": f"/jobs/{job.id}"})


# audit ------------------------------------------------------------------------------------
AuditAction = Literal["alias.set", "alias.delete", "version.delete", "model.delete", "dataset.delete"]


class AuditEventOut(BaseModel):
    """A change that leaves no row of its own to say who made it (``GET /audit``)."""

    id: int = Field(description="the event's number, increasing in the order of the changes")
    at: datetime = Field(description="when the change committed (UTC)")
    action: AuditAction = Field(description="what changed")
    target: str = Field(description="``name@alias``, ``name@version``, a model name or a dataset id")
    key_name: str | None = Field(description="the name of the API key that made it; null with no keys")
    address: str | None = Field(description="the client's address")
    detail: dict[str, Any] | None = Field(
        description="the rest: the version an alias points to and the one before, ..."
    )


# registry ---------------------------------------------------------------------------------
class FitWarningOut(BaseModel):
    """A warning the training raised."""

    category: str = Field(description="Warning class, e.g. ConvergenceWarning or EmptyLabelSetWarning.")
    message: str = Field(description="the warning's text")


class EvaluationOut(BaseModel):
    """One ``POST /evaluate`` of a version: the dataset, the figures and what shaped them."""

    dataset_id: str = Field(description="the dataset evaluated on")
    dataset_sha256: str | None = Field(description="its sha256 at the time (it stays if the dataset is deleted)")
    n_samples: int | None = Field(description="rows evaluated")
    metrics: dict[str, float | None] = Field(
        description="metric name to value; null where a metric is undefined on the data"
    )
    options: dict[str, Any] = Field(description="threshold, and for selectors the downstream classifier")
    created_at: datetime = Field(description="when it was evaluated (UTC)")

    model_config = ConfigDict(from_attributes=True)


class VersionOut(BaseModel):
    """One registered model version: what was trained, on what, and how it did. Immutable."""

    name: str = Field(description="the model name")
    version: int = Field(description="the version number (1, 2, ... for the name; never reused)")
    method: str = Field(description="the method id it was trained with")
    params: dict[str, Any] = Field(description="the hyperparameters used, defaults filled in")
    dataset_id: str | None = Field(
        description="the training dataset's id (kept for lineage even if that dataset was deleted with force=true)"
    )
    dataset_sha256: str = Field(description="the training dataset's sha256")
    feature_names: list[str] = Field(description="the features it expects, in order")
    label_names: list[str] = Field(description="the labels it predicts, in order")
    metrics: dict[str, Any] | None = Field(
        description="the latest evaluation's metrics on each dataset evaluated, by dataset id; null before any"
    )
    training_seconds: float = Field(description="wall time of the fit")
    warnings: list[FitWarningOut] = Field(
        default_factory=list,
        description="Warnings the training raised: a fit that stopped without converging or met a degenerate case.",
    )
    library_versions: dict[str, str] = Field(description="versions of the libraries it was trained with")
    artifact_sha256: str = Field(description="sha256 of the stored model file, checked before every load")
    job_id: str | None = Field(description="the training job that registered it")
    created_at: datetime = Field(description="when it was registered (UTC)")
    created_by: str | None = Field(
        None, description="the name of the API key whose training registered it; null when the server has no keys"
    )
    evaluations: list[EvaluationOut] = Field(description="every evaluation of this version, oldest first")
    selection: dict[str, Any] | None = Field(
        None,
        description='how "method": "auto" chose this method: metric, cv and the leaderboard (best first); '
        "left_out: the candidates whose memory estimate exceeded LABELSERVE_MAX_MODEL_MB, with the reason; "
        "resized: those cross-validated at the largest size that fits it (params, e.g. rf's n_estimators), with the "
        "reason they did not fit at their defaults",
    )
    fit_details: dict[str, Any] | None = Field(
        None,
        description="what the fit measured, for the methods that record something: mlknn and dmknn give "
        "neighbour_search ('exact' or 'approximate'), neighbour_recall (the sampled recall of the true k "
        "nearest neighbours in the training graph of an approximate index) and neighbour_query_recall (the same for "
        "its queries of new rows, measured on training rows), both null for exact search; dmknn label_rule; "
        "br, ecc, rf and gbm threshold and fill_empty (their learned label-set rule); aa-knn k and shrinkage; "
        "mi-filter estimator; every training gives "
        "memory_mb: estimate_peak and estimate_model (the estimate checked at submit), measured_peak (resident "
        "growth during the fit), resident_peak and artifact (the saved file), in MB",
    )


class ModelOut(BaseModel):
    """A model name with its versions and aliases."""

    name: str = Field(description="the model name")
    latest_version: int | None = Field(description="the newest version (what the bare name refers to)")
    aliases: dict[str, int] = Field(description="alias to version (name@alias refers to that version)")
    versions: list[VersionOut] = Field(description="every version, oldest first")


class AliasIn(Strict):
    version: Integer = Field(ge=1, le=MAX_DB_INT, description="the version the alias points to")


# prediction and evaluation ----------------------------------------------------------------
class CsrInstances(Strict):
    """Instances as a CSR matrix (SciPy's triplet): row i's stored values are
    ``values[indptr[i]:indptr[i + 1]]`` at the 0-based feature ``indices`` of the same slice; every
    other feature is 0. Its width is the model's number of features."""

    indptr: list[Integer] = Field(description="n + 1 non-decreasing offsets into indices and values, from 0")
    indices: list[Integer] = Field(description="0-based feature index of each stored value (training order)")
    values: list[Number] = Field(
        description=f"the stored values, as many as indices (finite numbers within +-{MAX_ABS_FEATURE:g})"
    )


class PredictRequest(Strict):
    """Predict ``instances`` or a stored dataset; a selector's ``features`` need neither."""

    model: ModelReference = Field(description="model reference: name (latest version), name@version or name@alias")
    instances: list[list[Number]] | list[dict[str, Number]] | None = Field(
        None,
        description="feature vectors in training feature order, or {feature_name: value} objects; every value "
        f"a finite number within +-{MAX_ABS_FEATURE:g}, as in datasets",
    )
    csr: CsrInstances | None = Field(
        None, description="instances as a sparse CSR matrix instead of lists (a model of sparse data keeps it sparse)"
    )
    dataset_id: DatasetRef | None = Field(None, description="predict a stored dataset instead of instances")
    output: OutputName | None = Field(
        None,
        description="one of the model's outputs; default labels (classifiers), distribution (LDL), features "
        "(selectors); 'scores' (any classifier or LDL model): the label names once and a row-major score matrix",
    )
    threshold: Number | None = Field(None, description="labels: score above which a label is predicted")
    top_k: Integer | None = Field(None, ge=1, description="ranking, features: keep only the best top_k")
    include_scores: Flag = Field(False, description="labels: add each label's score")
    format: Literal["jsonl", "csv"] = Field(
        "jsonl", description="result file format when a large dataset is predicted as a job"
    )


class ModelInfo(BaseModel):
    """The model version that answered."""

    name: str = Field(description="the model name")
    version: int = Field(description="the version the reference resolved to")
    method: str = Field(description="the method id it was trained with")


# The answer's items, one schema each so that generated clients type them; the service builds the
# JSON itself (``services.prediction.Answer``), these only document it.
class LabelSetPrediction(BaseModel):
    """``labels``: one instance's predicted label set."""

    labels: list[str] = Field(description="the predicted labels, in the model's label order")
    scores: dict[str, float] | None = Field(None, description="include_scores: every label's score")
    branch: Literal["itemset", "independent"] | None = Field(
        None, description="dmknn: the stage that gave the set, a training label set or each label on its own"
    )
    itemset: list[str] | None = Field(
        None, description="dmknn: the training label set it chose (null from the independent stage)"
    )


class RankedLabel(BaseModel):
    """A label of a ranking and its score."""

    label: str = Field(description="the label name")
    score: float = Field(description="the method's own score for the label")


class RankingPrediction(BaseModel):
    """``ranking``: one instance's labels, best first."""

    ranking: list[RankedLabel] = Field(description="every label, or the top_k best, best first")


class DistributionPrediction(BaseModel):
    """``distribution``: one instance's label distribution."""

    distribution: dict[str, float] = Field(description="each label's share; they sum to 1")


class SelectedFeature(BaseModel):
    """``features``: one of a selector's features."""

    index: int = Field(description="0-based, in the training feature order")
    name: str = Field(description="the feature name")
    score: float = Field(description="the selector's score for the feature")


class PredictResponse(BaseModel):
    """Predictions, one per instance in order; a selector's ranked features instead."""

    model: ModelInfo = Field(description="the version that predicted")
    output: OutputName = Field(description="the output given")
    predictions: list[LabelSetPrediction | RankingPrediction | DistributionPrediction] | None = Field(
        None,
        description="labels, ranking, distribution: one per instance, each of the output's shape (a method "
        "may add fields of its own)",
    )
    features: list[SelectedFeature] | None = Field(
        None, description="features (selectors): the best first, top_k of them when given"
    )
    labels: list[str] | None = Field(None, description="scores: the label names, the columns of scores")
    scores: list[list[float]] | None = Field(
        None, description="scores: one row per instance, one score per label (float32 precision)"
    )


class EvaluateRequest(Strict):
    """The standard metrics of the model's task on a stored dataset with the true labels."""

    model: ModelReference = Field(description="model reference: name (latest version), name@version or name@alias")
    dataset_id: DatasetRef = Field(description="a stored dataset with the same features and labels")
    threshold: Number | None = Field(None, description="classifiers: score above which a label is predicted")
    downstream: Literal["mlknn"] = Field(
        "mlknn", description="selectors: the classifier trained on the selected features"
    )
    top_k: Integer | None = Field(None, ge=1, description="selectors: how many features to keep")
    train_dataset_id: DatasetRef | None = Field(
        None,
        description="selectors: training data for the downstream classifier "
        "(default: the selector's own training dataset)",
    )


class EvaluateResponse(BaseModel):
    """The metrics of a model version on a dataset (also stored with the version)."""

    model: ModelInfo = Field(description="the version evaluated")
    dataset_id: str = Field(description="the dataset evaluated on")
    n_samples: int = Field(description="rows evaluated")
    metrics: dict[str, float | None] = Field(
        description="the task's standard metrics by name; null where a metric is undefined on the data"
    )
    downstream: dict[str, Any] | None = Field(
        None, description="selectors: the downstream classifier (method, k, top_k, train_dataset_id)"
    )
