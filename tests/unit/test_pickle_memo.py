"""drop_unread_memo: the same objects back, without the memo holding what nothing reads again."""

from __future__ import annotations

import io
import pickle
import pickletools
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.config import Settings
from app.core import Core
from app.storage.pickle_memo import drop_unread_memo
from app.storage.store import Store

#: weak references to the arrays the unpickler handed to ``Copying._rebuild``
_HANDED: list[weakref.ref[np.ndarray]] = []


class Copying:
    """Copies its array on load, as scikit-learn's trees do in ``__setstate__``."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __reduce__(self) -> tuple[Any, ...]:
        return (Copying._rebuild, (self.values.copy(),))

    @staticmethod
    def _rebuild(values: np.ndarray) -> Copying:
        _HANDED.append(weakref.ref(values))
        return Copying(values.copy())


class Witness:
    """Loaded last: records how many of the arrays handed over before it are still alive."""

    alive: int | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Witness._rebuild, ())

    @staticmethod
    def _rebuild() -> Witness:
        Witness.alive = sum(ref() is not None for ref in _HANDED)
        return Witness()


def _rewritten(obj: Any, tmp_path: Path) -> bytes:
    source = tmp_path / "plain.pkl"
    source.write_bytes(pickle.dumps(obj, protocol=5))
    out = io.BytesIO()
    drop_unread_memo(source, out)
    return out.getvalue()


def test_objects_copied_on_load_are_not_kept_until_the_load_ends(tmp_path):
    model = [Copying(np.full(200_000, float(i))) for i in range(5)] + [Witness()]
    _HANDED.clear()
    pickle.loads(pickle.dumps(model, protocol=5))
    assert Witness.alive == 5  # the plain pickle's memo keeps every array handed over
    _HANDED.clear()
    loaded = pickle.loads(_rewritten(model, tmp_path))
    assert Witness.alive == 0
    assert all(np.array_equal(a.values, b.values) for a, b in zip(model[:5], loaded[:5]))


def test_shared_and_recursive_objects_stay_shared(tmp_path):
    shared = np.arange(100_000.0)  # larger than a frame: copied outside frames
    names = [f"label {i}" for i in range(300)]  # more than 256 memo entries read back
    cycle: list[Any] = ["head"]
    cycle.append(cycle)
    model = {"a": shared, "b": shared, "names": names, "again": names, "cycle": cycle, "many": [names[:3]] * 3}
    model["names_twice"] = [names[i] for i in range(300)] * 2
    data = _rewritten(model, tmp_path)
    loaded = pickle.loads(data)
    assert loaded["a"] is loaded["b"] and np.array_equal(loaded["a"], shared)
    assert loaded["names"] is loaded["again"] and loaded["names"] == names
    assert loaded["cycle"][1] is loaded["cycle"]
    assert loaded["many"][0] is loaded["many"][2] and loaded["names_twice"] == names * 2
    pickletools.dis(data, out=io.StringIO())  # a well-formed pickle


def test_only_read_entries_remain(tmp_path):
    model = [np.ones(10) * i for i in range(50)]
    plain = pickle.dumps(model, protocol=5)
    data = _rewritten(model, tmp_path)
    memoized, read_back = _memo(plain)
    assert memoized > 3 * 50  # every array, its buffer, its shape...; read back: the global, dtype, order
    assert _memo(data) == (read_back, read_back)
    assert all(np.array_equal(a, b) for a, b in zip(pickle.loads(data), model))


def _memo(pickled: bytes) -> tuple[int, int]:
    """(entries memoized, distinct entries read back)"""
    ops = list(pickletools.genops(pickled))
    return sum(op.name == "MEMOIZE" for op, _, _ in ops), len({arg for op, arg, _ in ops if "GET" in op.name})


def test_not_a_pickle_is_refused(tmp_path):
    source = tmp_path / "bad.pkl"
    source.write_bytes(b"\x80\x05\xff")
    with pytest.raises(ValueError, match="not a pickle"):
        drop_unread_memo(source, io.BytesIO())


def test_the_store_rewrites_large_artifacts(tmp_path, monkeypatch):
    monkeypatch.setattr("app.storage.store.PRUNE_BYTES", 1 << 20)
    store = Store(tmp_path)
    large = {"weights": [np.full(300_000, float(i)) for i in range(3)]}
    small = {"weights": np.ones(10)}
    for model, rewritten in ((large, True), (small, False)):
        sha = store.save_artifact(model)
        raw = store.artifact_path(sha).read_bytes()
        assert (raw != pickle.dumps(model, protocol=5)) is rewritten
        loaded = store.load_artifact(sha)
        assert pickle.dumps(loaded, protocol=5) == pickle.dumps(model, protocol=5)
    assert sorted(p.suffix for p in store.artifacts.iterdir()) == [".pkl", ".pkl"]  # no draft left


def test_the_core_saves_large_artifacts_pruned_unless_switched_off(tmp_path, monkeypatch):
    """The guard of ``LABELSERVE_PRUNE_PICKLES``: on, a large artifact has no unread memo entry;
    off, it is the plain pickle."""
    monkeypatch.setattr("app.storage.store.PRUNE_BYTES", 1 << 20)
    model = {"weights": [np.full(300_000, float(i)) for i in range(3)]}
    plain = pickle.dumps(model, protocol=5)
    for on in (True, False):
        store = Core.open(Settings(model_dir=tmp_path / str(on), prune_pickles=on)).store
        sha = store.save_artifact(model)
        saved = store.artifact_path(sha).read_bytes()
        memoized, read_back = _memo(saved)
        assert (memoized == read_back and len(saved) < len(plain)) is on
        assert (saved == plain) is not on
        assert pickle.dumps(store.load_artifact(sha), protocol=5) == plain
