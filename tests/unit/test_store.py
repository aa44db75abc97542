"""The file store: dataset reads verified once per process while the file is unchanged; artifacts
verified before loading."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from app.storage import store as store_module
from app.storage.dataset_files import StoredArrays
from app.storage.store import ArtifactIntegrityError, DatasetUnavailable, Store, VerifiedDatasets


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setattr(store_module, "VERIFIED", VerifiedDatasets(1 << 20))
    return Store(tmp_path)


def _arrays(seed: int = 0, n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((n, 4)), (rng.random((n, 2)) > 0.5).astype(float)


def _counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = np.load

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args[0])
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(store_module.np, "load", counting)
    return calls


def test_a_second_read_of_an_unchanged_file_is_not_read_again_and_gets_its_own_copies(store, monkeypatch):
    X, Y = _arrays()
    store.save_dataset("a" * 64, X, Y)
    loads = _counting_loads(monkeypatch)
    X1, Y1 = store.load_dataset("a" * 64)
    X1[:] = -1.0  # a caller scaling its copy in place must not change what the next caller gets
    X2, Y2 = store.load_dataset("a" * 64)
    assert len(loads) == 1
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(Y2, Y)
    assert not np.shares_memory(X1, X2)


def test_a_changed_or_removed_file_is_read_and_verified_again(store, monkeypatch):
    X, Y = _arrays()
    store.save_dataset("b" * 64, X, Y)
    store.load_dataset("b" * 64)
    path = store.dataset_path("b" * 64)
    data = bytearray(path.read_bytes())
    data[-200] ^= 0xFF  # corrupt it on disk (a new write: new modification time)
    os.unlink(path)
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetUnavailable, match="corrupt"):
        store.load_dataset("b" * 64)
    path.unlink()
    with pytest.raises(DatasetUnavailable, match="missing"):
        store.load_dataset("b" * 64)


def test_the_budget_keeps_the_most_recently_used():
    cache = VerifiedDatasets(budget_bytes=3 * 800)
    arrays = {i: StoredArrays(np.zeros((10, 8)), np.zeros((0, 1))) for i in range(4)}  # 640 bytes each
    for i in range(3):
        cache.put((str(i), 0, 0, 0), arrays[i])
    assert cache.get(("0", 0, 0, 0)) is not None  # now the most recent
    cache.put(("3", 0, 0, 0), arrays[3])
    kept = [i for i in range(4) if cache.get((str(i), 0, 0, 0)) is not None]
    assert kept == [0, 2, 3]
    cache.put(("big", 0, 0, 0), StoredArrays(np.zeros((100, 100)), np.zeros((0, 1))))  # over the budget: not kept
    assert cache.get(("big", 0, 0, 0)) is None and cache.get(("3", 0, 0, 0)) is not None


def test_artifacts_are_pickles_verified_before_loading(store):
    model = {"weights": np.arange(6.0).reshape(2, 3), "name": "m"}
    sha = store.save_artifact(model)
    path = store.artifact_path(sha)
    assert path.suffix == ".pkl" and path.exists() and store.stored_artifact(sha) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    loaded = store.load_artifact(sha)
    assert loaded["name"] == "m" and np.array_equal(loaded["weights"], model["weights"])
    assert store.artifact_size(sha) == path.stat().st_size
    path.write_bytes(path.read_bytes()[:-4] + b"oops")
    with pytest.raises(ArtifactIntegrityError):
        store.load_artifact(sha)
    store.delete_artifact(sha)
    assert list(store.artifacts.iterdir()) == [] and store.artifact_size(sha) == 0
    with pytest.raises(FileNotFoundError):
        store.load_artifact(sha)
    with pytest.raises(FileNotFoundError):
        store.stored_artifact(sha)


def test_an_artifact_naming_a_class_where_release_0_1_kept_it_loads(store, monkeypatch):
    """0.1.0 pickled the selected-features wrapper as ``app.pipeline.SelectedFeatures``."""
    import pickle
    import sys
    import types

    from app.serving.selected_features import SelectedFeatures

    old = types.ModuleType("app.pipeline")
    legacy = type("SelectedFeatures", (SelectedFeatures,), {"__module__": "app.pipeline"})
    old.SelectedFeatures = legacy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "app.pipeline", old)
    written = pickle.dumps(legacy(None, np.array([2, 0]), "selector@1"), protocol=5)
    monkeypatch.delitem(sys.modules, "app.pipeline")
    assert b"app.pipeline" in written
    sha256 = hashlib.sha256(written).hexdigest()
    (store.artifacts / f"{sha256}.pkl").write_bytes(written)
    loaded = store.load_artifact(sha256)
    assert type(loaded) is SelectedFeatures
    assert loaded.feature_indices.tolist() == [2, 0] and loaded.selector_ref == "selector@1"
