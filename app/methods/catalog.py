"""The method catalog, discovered from the modules of ``app.methods`` that define ``SPEC``."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

import app.methods as methods_pkg
from app.methods.base import MethodSpec


@lru_cache(maxsize=1)
def catalog() -> dict[str, MethodSpec]:
    """Every available method, by id, in id order."""
    found: dict[str, MethodSpec] = {}
    for info in pkgutil.iter_modules(methods_pkg.__path__):
        module = importlib.import_module(f"{methods_pkg.__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, MethodSpec):
            found[spec.id] = spec
    return dict(sorted(found.items()))


def get_method(method_id: str) -> MethodSpec | None:
    return catalog().get(method_id)
