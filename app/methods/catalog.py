"""The method catalog, discovered from the modules of ``app.methods`` that define ``SPEC``.

This is the one walk over the method modules: the catalog and the job backends (which import
every method module before forking or accepting work, so a fit never pays the import) both use
:func:`method_modules`.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

import app.methods as methods_pkg
from app.methods.base import MethodSpec


def method_module_names() -> list[str]:
    """Dotted names of every module of ``app.methods``, in name order (without importing them)."""
    return sorted(f"{methods_pkg.__name__}.{info.name}" for info in pkgutil.iter_modules(methods_pkg.__path__))


@lru_cache(maxsize=1)
def method_modules() -> tuple[ModuleType, ...]:
    """Every module of ``app.methods``, imported."""
    return tuple(importlib.import_module(name) for name in method_module_names())


@lru_cache(maxsize=1)
def catalog() -> dict[str, MethodSpec]:
    """Every available method, by id, in id order."""
    found: dict[str, MethodSpec] = {}
    for module in method_modules():
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, MethodSpec):
            found[spec.id] = spec
    return dict(sorted(found.items()))


def get_method(method_id: str) -> MethodSpec | None:
    return catalog().get(method_id)
