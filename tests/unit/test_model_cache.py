"""ModelCache: bounded by the bytes of the models it keeps, room made before a load."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from app.registry.model_cache import ModelCache
from app.registry.versions import VersionKey

MB = 1024 * 1024


class FakeStore:
    """Artifacts of given sizes; records which loads happened and what was held during each."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.loads: list[str] = []
        self.cache: ModelCache | None = None
        self.held_during_load: list[int] = []
        self.delay = 0.0

    def artifact_size(self, sha256: str) -> int:
        return self.sizes[sha256]

    def load_artifact(self, sha256: str) -> Any:
        if self.cache is not None:
            self.held_during_load.append(self.cache.bytes_held)
        time.sleep(self.delay)
        self.loads.append(sha256)
        return {"model": sha256}


def key(i: int) -> VersionKey:
    return (i, datetime(2026, 1, 1))


def make_cache(store: FakeStore, monkeypatch: pytest.MonkeyPatch, *, size: int = 16, max_mb: int = 1000) -> ModelCache:
    cache = ModelCache(store, "sqlite://", size, max_bytes=max_mb * MB)  # type: ignore[arg-type]
    rows = {
        i: SimpleNamespace(
            model_name=f"m{i}", version=1, method="rf", feature_names=[], label_names=[], artifact_sha256=f"a{i}"
        )
        for i in range(10)
    }
    monkeypatch.setattr(cache, "_version_row", lambda k: rows[k[0]])
    store.cache = cache
    return cache


def test_evicts_by_bytes_least_recently_used_first(monkeypatch):
    store = FakeStore({f"a{i}": 400 * MB for i in range(4)})
    cache = make_cache(store, monkeypatch)
    assert cache.get(key(0))[1] is False and cache.get(key(1))[1] is False
    assert cache.get(key(0))[1] is True  # 0 is now the most recent
    cache.get(key(2))  # 1200 MB would not fit: 1 goes
    assert len(cache) == 2 and cache.bytes_held == 800 * MB
    assert cache.get(key(0))[1] is True and cache.get(key(1))[1] is False
    # room is made before each load: never more than the budget held while a model loads
    assert max(store.held_during_load) + 400 * MB <= 1000 * MB


def test_count_bound_still_applies(monkeypatch):
    store = FakeStore({f"a{i}": MB for i in range(5)})
    cache = make_cache(store, monkeypatch, size=2)
    for i in range(5):
        cache.get(key(i))
    assert len(cache) == 2 and cache.get(key(4))[1] and cache.get(key(3))[1]


def test_a_model_larger_than_the_budget_is_served_and_kept_alone(monkeypatch):
    store = FakeStore({"a0": 100 * MB, "a1": 1500 * MB})
    cache = make_cache(store, monkeypatch)
    cache.get(key(0))
    served, hit = cache.get(key(1))
    assert served.model == {"model": "a1"} and not hit
    assert len(cache) == 1 and cache.get(key(1))[1] is True
    assert store.held_during_load[-1] == 0  # the small one went before the large one was read


def test_concurrent_first_requests_load_once(monkeypatch):
    store = FakeStore({"a0": MB})
    store.delay = 0.2
    cache = make_cache(store, monkeypatch)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(key(0))[1])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.loads == ["a0"] and sorted(results) == [False, True, True, True]


def test_a_failed_load_is_not_cached(monkeypatch):
    store = FakeStore({"a0": MB})
    cache = make_cache(store, monkeypatch)
    real = store.load_artifact
    monkeypatch.setattr(store, "load_artifact", lambda sha: (_ for _ in ()).throw(OSError("gone")))
    with pytest.raises(OSError):
        cache.get(key(0))
    monkeypatch.setattr(store, "load_artifact", real)
    assert cache.get(key(0))[1] is False and len(cache) == 1


def test_eviction_listeners_hear_of_every_model_let_go(monkeypatch):
    store = FakeStore({f"a{i}": 600 * MB for i in range(3)})
    cache = make_cache(store, monkeypatch)
    gone: list[object] = []
    cache.on_evict(lambda served: gone.append(served.model))
    cache.get(key(0))
    cache.get(key(1))  # 1200 MB would not fit: 0 goes
    assert gone == [{"model": "a0"}]
    cache.clear()
    assert gone == [{"model": "a0"}, {"model": "a1"}] and cache.bytes_held == 0


class _Deriving:
    """A model that builds arrays of ``derived`` bytes when it loads (as a forest's flat nodes)."""

    def __init__(self, derived: int) -> None:
        self.derived = derived

    def derived_nbytes(self) -> int:
        return self.derived


def test_a_model_counts_what_it_derives_on_load(monkeypatch):
    store = FakeStore({f"a{i}": 400 * MB for i in range(3)})
    monkeypatch.setattr(store, "load_artifact", lambda sha: _Deriving(100 * MB))
    cache = make_cache(store, monkeypatch)
    cache.get(key(0))
    assert cache.bytes_held == 500 * MB
    cache.get(key(1))  # 500 + 500 fit the 1000 MB
    cache.get(key(2))  # room for its 400 MB file before the load, for its 500 MB after: 0 goes
    assert len(cache) == 2 and cache.bytes_held == 1000 * MB and cache.get(key(1))[1] is True
