"""``ResolvedRefs``: resolutions are trusted only while the registry token read before them is current."""

from __future__ import annotations

from pathlib import Path

from app.registry.model_cache import Served
from app.registry.resolved_refs import ResolvedRefs
from app.storage.store import Store


def _served(version: int) -> Served:
    return Served(name="m", version=version, method="mlknn", feature_names=[], label_names=[], model=None)


def test_entries_last_until_the_registry_changes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    refs = ResolvedRefs(store)
    token, served = refs.get("m")
    assert served is None
    refs.put(token, "m", _served(1))
    assert refs.get("m")[1] == _served(1)
    store.registry_changed()
    assert refs.get("m") == (store.registry_token(), None)


def test_a_resolution_that_raced_a_change_is_not_kept(tmp_path: Path) -> None:
    store = Store(tmp_path)
    refs = ResolvedRefs(store)
    token, _ = refs.get("m")  # read before resolving ...
    store.registry_changed()  # ... a change commits meanwhile (possibly in another process) ...
    refs.get("other")  # ... and this process notices it
    refs.put(token, "m", _served(1))  # the stale resolution is dropped, not cached
    assert refs.get("m")[1] is None


def test_every_change_writes_a_new_token(tmp_path: Path) -> None:
    store = Store(tmp_path)
    tokens = {store.registry_token()}
    for _ in range(20):
        store.registry_changed()
        tokens.add(store.registry_token())
    assert len(tokens) == 21
    assert not list(tmp_path.glob(".registry.*"))  # no temporary files left


def test_the_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    refs = ResolvedRefs(Store(tmp_path), size=2)
    token, _ = refs.get("a")
    refs.put(token, "a", _served(1))
    refs.put(token, "b", _served(2))
    refs.get("a")
    refs.put(token, "c", _served(3))
    assert refs.get("b")[1] is None and refs.get("a")[1] is not None and refs.get("c")[1] is not None


def test_a_model_the_cache_lets_go_of_is_forgotten(tmp_path: Path) -> None:
    """Every reference resolved to an evicted model goes, so nothing keeps it in memory."""
    store = Store(tmp_path)
    refs = ResolvedRefs(store)
    token, _ = refs.get("m")
    evicted, kept = _served(1), _served(2)
    refs.put(token, "m@1", evicted)
    refs.put(token, "m@prod", evicted)
    refs.put(token, "m", kept)
    refs.forget(evicted)
    assert refs.get("m@1")[1] is None and refs.get("m@prod")[1] is None
    assert refs.get("m")[1] is kept
