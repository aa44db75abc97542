"""The request examples the interactive docs offer, one per upload format, method family and output
kind, and the example of the queued-job answer (202) of every route that queues a job.

They are meant to be tried in order in the Swagger UI ("Try it out") and each one succeeds:
the inline-data trainings need nothing else; the others use the sample files shipped in
``samples/``, whose dataset ids are fixed because an id is derived from the uploaded content
(``toy.csv`` with ``label_count=2`` is ``75c45770f7ed1dc3``, ``toy-ldl.csv`` with
``label_count=3`` is ``9ae7f5cbfc3db94f``, ``shapes-train.arff`` / ``shapes-test.arff`` with
``labels_file=shapes.xml`` are ``bd286ed6ce07d76d`` / ``f3c9952c957584fb``). A test runs every
example against the app, so they cannot go stale.
"""

from __future__ import annotations

from typing import Any

TOY = "75c45770f7ed1dc3"
TOY_LDL = "9ae7f5cbfc3db94f"
SHAPES_TRAIN = "bd286ed6ce07d76d"
SHAPES_TEST = "f3c9952c957584fb"

_TOY_X = [[0.9, 0.1, 0.3], [0.8, 0.2, 0.1], [0.7, 0.3, 0.9], [0.2, 0.9, 0.8], [0.1, 0.8, 0.7], [0.3, 0.7, 0.2]]
_TOY_Y = [[1, 0], [1, 0], [1, 1], [0, 1], [0, 1], [0, 1]]
_TOY_NAMES = {"feature_names": ["f0", "f1", "f2"], "label_names": ["happy", "calm"]}

# The files each upload example sends (from samples/), by form field. Swagger UI shows no examples
# for a multipart form, so the operation's description lists them (UPLOAD_GUIDE) for its form;
# ReDoc and the generators read UPLOAD, whose values are the form's other fields.
UPLOAD_SAMPLES: dict[str, dict[str, str]] = {
    "csv": {"file": "toy.csv"},
    "arff": {"file": "shapes-train.arff", "labels_file": "shapes.xml"},
    "libsvm": {"file": "toy.svm"},
    "mat": {"file": "toy-ldl.mat"},
}


def _upload(example: str, summary: str, form: dict[str, Any], note: str = "") -> dict[str, Any]:
    fields = [f"{field} `samples/{name}`" for field, name in UPLOAD_SAMPLES[example].items()]
    fields += [f"{field} `{value}`" for field, value in form.items()]
    return {"summary": summary, "description": ", ".join(fields) + note, "value": form}


UPLOAD: dict[str, Any] = {
    "csv": _upload("csv", "CSV, the last 2 columns are labels", {"label_count": 2}, f" (its id is {TOY})"),
    "arff": _upload("arff", "ARFF with a Mulan XML file naming the labels", {}, f" (its id is {SHAPES_TRAIN})"),
    "libsvm": _upload("libsvm", "multi-label LIBSVM, label ids before the features", {"n_features": 3}),
    "mat": _upload("mat", "MATLAB .mat of label distributions (variables features and labels)", {}),
}
UPLOAD_GUIDE = "Examples, one per format (the files are in the repository's `samples/`):\n\n" + "\n".join(
    f"- {example['summary']}: {example['description']}" for example in UPLOAD.values()
)

TRAIN: dict[str, Any] = {
    "mlknn": {
        "summary": "classifier (mlknn) on an uploaded dataset",
        "description": f"Upload samples/toy.csv with label_count=2 first (its id is {TOY}).",
        "value": {"method": "mlknn", "dataset_id": TOY, "model_name": "toy-mlknn", "params": {"k": 3}},
    },
    "dmknn-inline": {
        "summary": "classifier (dmknn) on inline data",
        "description": "Small data can come in the request; it is stored like an upload.",
        "value": {
            "method": "dmknn",
            "data": {"X": _TOY_X, "Y": _TOY_Y, **_TOY_NAMES},
            "model_name": "toy-dmknn",
            "params": {"k": 3},
        },
    },
    "ldlkm-inline": {
        "summary": "label distribution learning (ldlkm) on inline data",
        "description": "Each row of Y is a distribution over the labels (non-negative, sums to 1).",
        "value": {
            "method": "ldlkm",
            "data": {
                "X": [[0.1, 0.2], [0.2, 0.1], [0.5, 0.5], [0.4, 0.6], [0.9, 0.8], [0.8, 0.9]],
                "Y": [
                    [0.7, 0.2, 0.1],
                    [0.6, 0.3, 0.1],
                    [0.2, 0.6, 0.2],
                    [0.1, 0.7, 0.2],
                    [0.1, 0.2, 0.7],
                    [0.0, 0.3, 0.7],
                ],
                "feature_names": ["f0", "f1"],
                "label_names": ["low", "mid", "high"],
            },
            "model_name": "toy-ldl",
            "params": {"k": 3},
            "random_state": 0,
        },
    },
    "ghc-dr-inline": {
        "summary": "feature selector (ghc-dr) on inline data",
        "value": {"method": "ghc-dr", "data": {"X": _TOY_X, "Y": _TOY_Y, **_TOY_NAMES}, "model_name": "toy-ghc"},
    },
    "selected-features": {
        "summary": "classifier on the features a selector chose",
        "description": "Needs toy-ghc (the selector example) and the toy.csv upload.",
        "value": {
            "method": "mlknn",
            "dataset_id": TOY,
            "model_name": "toy-selected",
            "params": {"k": 3},
            "feature_selector": {"model": "toy-ghc", "top_k": 2},
        },
    },
    "ghc-dr-shapes": {
        "summary": "feature selector (ghc-dr) on an uploaded ARFF training split",
        "description": f"Upload samples/shapes-train.arff with labels_file=samples/shapes.xml first ({SHAPES_TRAIN}).",
        "value": {"method": "ghc-dr", "dataset_id": SHAPES_TRAIN, "model_name": "shapes-ghc"},
    },
}

PREDICT: dict[str, Any] = {
    "labels": {
        "summary": "labels: label sets (classifiers), with scores",
        "value": {"model": "toy-mlknn", "instances": [[0.85, 0.15, 0.2], [0.2, 0.9, 0.6]], "include_scores": True},
    },
    "ranking": {
        "summary": "ranking: labels best first, by feature name",
        "value": {
            "model": "toy-mlknn@1",
            "instances": [{"f0": 0.85, "f1": 0.15, "f2": 0.2}],
            "output": "ranking",
            "top_k": 2,
        },
    },
    "dmknn-labels": {
        "summary": "labels from dmknn (says which branch produced the set)",
        "value": {"model": "toy-dmknn", "instances": [[0.85, 0.15, 0.2]]},
    },
    "distribution": {
        "summary": "distribution: label distributions (LDL models)",
        "value": {"model": "toy-ldl", "instances": [[0.15, 0.2]]},
    },
    "features": {
        "summary": "features: a selector's best features (no instances)",
        "value": {"model": "toy-ghc", "top_k": 2},
    },
    "dataset": {
        "summary": "a stored dataset instead of instances",
        "value": {"model": "toy-mlknn", "dataset_id": TOY, "output": "ranking"},
    },
}

EVALUATE: dict[str, Any] = {
    "classifier": {
        "summary": "classifier: the multi-label metrics",
        "value": {"model": "toy-mlknn", "dataset_id": TOY},
    },
    "distribution": {
        "summary": "LDL model: the distribution metrics",
        "description": f"Upload samples/toy-ldl.csv with label_count=3 first ({TOY_LDL}).",
        "value": {"model": "toy-ldl", "dataset_id": TOY_LDL},
    },
    "selector": {
        "summary": "selector: ML-kNN on its top features, on a test split",
        "description": f"Upload samples/shapes-test.arff with labels_file=samples/shapes.xml first ({SHAPES_TEST}).",
        "value": {"model": "shapes-ghc", "dataset_id": SHAPES_TEST, "top_k": 3},
    },
}

COMPARE: dict[str, Any] = {
    "classifiers": {
        "summary": "two classifiers by 2-fold cross-validation, stopped if it runs past 10 minutes",
        "description": f"Upload samples/toy.csv with label_count=2 first ({TOY}).",
        "value": {"dataset_id": TOY, "methods": ["br", "mlknn"], "cv": 2, "max_seconds": 600},
    },
}

# What every route that queues a job answers (202): the job record with job_id and status_url.
_JOB_ID = "63847eb6d1f04c4aa1a0e1a5a0b0c7f2"
ACCEPTED: dict[str, Any] = {
    "id": _JOB_ID,
    "kind": "train",
    "status": "queued",
    "progress": 0.0,
    "stage": "queued",
    "method": "mlknn",
    "dataset_id": TOY,
    "created_at": "2026-12-03T17:40:00Z",
    "started_at": None,
    "finished_at": None,
    "model": None,
    "error": None,
    "result_url": None,
    "queue_position": None,
    "random_state": 1234567,
    "max_seconds": None,
    "submitted_by": "ci",
    "job_id": _JOB_ID,
    "status_url": f"/jobs/{_JOB_ID}",
}


def accepted(description: str) -> dict[str, Any]:
    """The 202 entry of a route's ``responses``: the one queued-job answer, with its example."""
    return {"description": description, "content": {"application/json": {"example": ACCEPTED}}}
