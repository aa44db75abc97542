"""RF: scikit-learn's random forest, which handles multi-label targets natively.

``RandomForestClassifier`` fitted on the (n, q) label matrix grows each tree on all labels at
once (a multi-output tree: the split criterion is summed over the labels). A label's score is the
forest's mean leaf frequency of that label; the label set is every label with score > 0.5. Trees
need no feature scaling. A label constant in the training data is a one-class output, scored
with that constant.

The forest is grown in batches of trees with ``warm_start`` so that a job can report progress
and be cancelled between batches; with a fixed ``random_state`` the trees are the ones a single
``fit`` grows (tested). Prediction calls each tree's low-level ``tree_.predict`` directly (what
``predict_proba`` does after its per-call checks and thread pool).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field
from sklearn.ensemble import RandomForestClassifier

from app.methods.base import MethodEstimator, MethodParams, MethodSpec, ProgressFn
from app.methods.baseline_support import ProbabilityClassifierMixin

#: trees grown between two progress reports
_BATCH = 25


class RFParams(MethodParams):
    n_estimators: int = Field(200, ge=1, description="Number of trees.")
    max_features: Literal["sqrt", "log2"] | Annotated[float, Field(gt=0, le=1)] = Field(
        "sqrt", description="Features tried per split: 'sqrt', 'log2', or a fraction in (0, 1] of d."
    )
    min_samples_leaf: int = Field(1, ge=1, description="Minimum number of training samples in a leaf.")
    n_jobs: int | None = Field(None, description="Parallel jobs for fitting (None = 1, -1 = all cores).")
    random_state: int | None = Field(0, description="Seed of the bootstrap samples and feature draws.")


class RandomForest(ProbabilityClassifierMixin, MethodEstimator):
    """Native multi-label random forest; parameters as :class:`RFParams`.

    Fitted attributes: ``n_features_in_``, ``forest_`` (the ``RandomForestClassifier``),
    ``positive_`` (q,) index of class 1 in each output's classes (-1 when the label was never
    present in training).
    """

    _params_model = RFParams

    def __init__(
        self,
        *,
        n_estimators: int = 200,
        max_features: Literal["sqrt", "log2"] | float = "sqrt",
        min_samples_leaf: int = 1,
        n_jobs: int | None = None,
        random_state: int | None = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _fit(self, X: np.ndarray, Y: np.ndarray, progress: ProgressFn) -> None:
        seed = self.random_state if self.random_state is not None else int(np.random.default_rng().integers(2**31))
        forest = RandomForestClassifier(
            n_estimators=0,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            n_jobs=self.n_jobs,
            random_state=seed,
            warm_start=True,
        )
        grown = 0
        while grown < self.n_estimators:
            progress("trees", grown / self.n_estimators)
            grown = min(self.n_estimators, grown + _BATCH)
            forest.set_params(n_estimators=grown)
            forest.fit(X, Y.astype(np.int8))
        progress("trees", 1.0)
        forest.set_params(warm_start=False)
        classes = forest.classes_ if Y.shape[1] > 1 else [forest.classes_]
        self.positive_ = np.array([int(np.flatnonzero(c == 1)[0]) if (c == 1).any() else -1 for c in classes])
        self.forest_ = forest

    # ----------------------------------------------------------------------- prediction
    def _predict_scores(self, X: np.ndarray) -> np.ndarray:
        """Mean leaf frequency of each label (n, q) for a float64 (n, d) array already validated."""
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        q = self.positive_.shape[0]
        total = np.zeros((X.shape[0], q))
        has = self.positive_ >= 0
        cols = np.where(has, self.positive_, 0)
        for tree in self.forest_.estimators_:
            # class fractions or counts; (n, max classes) for one output, hence the reshape
            value = tree.tree_.predict(X32).reshape(X.shape[0], q, -1)
            value = value / value.sum(axis=2, keepdims=True)
            total += np.take_along_axis(value, cols[None, :, None], axis=2)[:, :, 0]
        total /= len(self.forest_.estimators_)
        total[:, ~has] = 0.0
        return total


SPEC = MethodSpec(
    id="rf",
    task="multilabel",
    outputs=("labels", "ranking"),
    params=RFParams,
    estimator=RandomForest,
    summary="Random forest (a baseline): scikit-learn RandomForestClassifier on the label matrix "
    "(multi-output trees); labels with forest probability > 0.5.",
    paper="Baseline. Breiman L. Random forests. Machine Learning 45(1):5-32, 2001. doi:10.1023/A:1010933404324",
    stages=("trees",),
)
