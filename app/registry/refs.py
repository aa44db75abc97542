"""Model references: ``name`` (latest version), ``name@3`` (a version) or ``name@alias``.

The grammar of names, aliases and references, declared once: the API's path and body
parameters, the dashboard's forms and the registry's lookups all use these patterns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
# 1 .. 2**31 - 1 without leading zeros, digit by digit, so that the schema states the exact range
_VERSION = (
    r"(?:[1-9][0-9]{0,8}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}|2147[0-3][0-9]{5}"
    r"|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7])"
)
# letters, digits, '-' and '_', at least one of them not a digit (``name@3`` is a version)
_ALIAS = r"[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*"
NAME_PATTERN = rf"^{_NAME}$"
ALIAS_PATTERN = rf"^{_ALIAS}$"
ALIAS_MAX_LENGTH = 64
REF_PATTERN = rf"^{_NAME}(?:@(?:{_VERSION}|{_ALIAS}))?$"
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # dataset and job ids (hex digests, uuids)
MAX_DB_INT = 2**31 - 1  # bound of versions, offsets and other integers that reach the database
_NAME_RE = re.compile(NAME_PATTERN)
_REF_RE = re.compile(REF_PATTERN)


class RegistryError(LookupError):
    """A reference that does not resolve (the API answers 404)."""


@dataclass(frozen=True)
class ModelRef:
    name: str
    selector: str | None  # None = latest; digits = version; otherwise an alias

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        """Split a reference; ValueError saying what is wrong unless it matches ``REF_PATTERN``.

        An alias longer than aliases can be is not an error here: it names no alias (404).
        """
        name, _, selector = ref.partition("@")
        if _REF_RE.fullmatch(ref):
            return cls(name, selector or None)
        if not _NAME_RE.fullmatch(name) or ref.count("@") > 1 or (ref.count("@") == 1 and not selector):
            raise ValueError(f"'{ref}' is not a model reference (name, name@version or name@alias)")
        if selector.isascii() and selector.isdigit():
            raise ValueError(f"'{ref}': version must be between 1 and {MAX_DB_INT}, without leading zeros")
        raise ValueError(f"'{ref}': an alias is letters, digits, '-' or '_', and not only digits")


# aliases a reader would take for something else: ``latest`` (the default), or a version
# number in disguise (``-1``, ``+2``, ``v3``)
_RESERVED_ALIAS_RE = re.compile(r"latest|[+-]?[0-9]+|[vV][0-9]+", re.IGNORECASE)


def reserved_alias(text: str) -> bool:
    """Aliases that may not be created: ``latest`` and version-like ones (``-1``, ``v3``)."""
    return _RESERVED_ALIAS_RE.fullmatch(text) is not None


def is_version_number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also admits other scripts' digits (``'٣'``)."""
    return text.isascii() and text.isdigit()
