"""The compatibility window: artifacts written by 0.1.x load and predict as 0.1.0 predicted.

The fixtures (``tests/fixtures/artifacts-0.1``) were written by the 0.1.0 code itself
(``tests/fixtures/make_artifacts_0_1.py``): every method of its catalog and a selected-features
model, which 0.1.0 pickled as ``app.pipeline.SelectedFeatures``. Each goes through
``Store.load_artifact`` (sha256 checked, moved classes found) and answers the fixture's rows;
the training data, stored by 0.1.0 as a dense ``.npz``, loads through ``Store.load_dataset``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy
import sklearn

from app.methods.base import MethodEstimator
from app.serving.selected_features import SelectedFeatures
from app.storage.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "artifacts-0.1"
MANIFEST: dict[str, Any] = json.loads((FIXTURES / "manifest.json").read_text())
INSTALLED = {"numpy": np.__version__, "scipy": scipy.__version__, "scikit-learn": sklearn.__version__}


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A store holding every fixture under its content address, as 0.1.0's store held it."""
    written = {name: _minor(v) for name, v in MANIFEST["library_versions"].items()}
    if written != {name: _minor(v) for name, v in INSTALLED.items()}:
        # a pickle loads reliably only with the libraries it was written with (docs/operations.md)
        pytest.skip(f"fixtures written with {MANIFEST['library_versions']}, installed {INSTALLED}")
    store = Store(tmp_path_factory.mktemp("store"))
    for name, entry in MANIFEST["models"].items():
        shutil.copyfile(FIXTURES / f"{name}.pkl", store.artifacts / f"{entry['sha256']}.pkl")
    shutil.copyfile(FIXTURES / "dataset.npz", store.dataset_path(MANIFEST["dataset"]["sha256"]))
    return store


def test_the_fixtures_are_0_1_artifacts_of_every_0_1_method() -> None:
    assert MANIFEST["labelserve"].startswith("0.1.")
    methods = {entry["method"] for entry in MANIFEST["models"].values()}
    assert len(methods) == 14  # 0.1.0's catalog
    assert b"app.pipeline" in (FIXTURES / "selected-mlknn.pkl").read_bytes()  # the module that moved


def test_a_0_1_dataset_file_loads(store: Store) -> None:
    sha256 = MANIFEST["dataset"]["sha256"]
    X, Y = store.load_dataset(sha256)
    with np.load(FIXTURES / "expected.npz") as npz:
        np.testing.assert_array_equal(X, npz["train.X"])
        np.testing.assert_array_equal(Y, npz["train.Y"])
    storage = store.dataset_storage(sha256)
    assert storage is not None and (storage.storage, storage.density) == ("dense", None)


@pytest.mark.parametrize("name", sorted(MANIFEST["models"]))
def test_a_0_1_artifact_loads_and_predicts_as_0_1_did(store: Store, name: str) -> None:
    entry = MANIFEST["models"][name]
    with np.load(FIXTURES / "expected.npz") as npz:
        expected = {key.partition(".")[2]: npz[key] for key in npz.files if key.startswith(f"{name}.")}
        X = npz["X"]
    model = store.load_artifact(entry["sha256"])
    estimator = model.estimator if isinstance(model, SelectedFeatures) else model
    assert isinstance(estimator, MethodEstimator)
    estimator.get_params()  # every constructor parameter is there (repr, clone)
    model.derived_nbytes()  # what the model cache asks of a loaded model
    if entry["task"] == "multilabel":
        np.testing.assert_allclose(model._decision_function(X), expected["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(model.decision_function(X), expected["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(model._predict(X), expected["labels"])
        np.testing.assert_array_equal(model.predict(X), expected["labels"])
    elif entry["task"] == "distribution":
        np.testing.assert_allclose(model._predict(X), expected["distribution"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(model.predict(X), expected["distribution"], rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(model.ranking_, expected["ranking"])
        np.testing.assert_array_equal(model.feature_scores_, expected["feature_scores"])
    if name == "selected-mlknn":
        assert type(model) is SelectedFeatures
