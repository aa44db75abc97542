"""Forms of the dashboard built from declarations, and what the browser sends turned back into values.

A training form is generated from a method's JSON schema (``GET /methods``: each
hyperparameter's type, default, range and description), so a new method needs no template.
Every field left empty keeps the method's default; the values are checked by the service as
an API request's are, and its errors name the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: rows the playground accepts pasted (a larger set is a stored dataset's job)
MAX_PASTED_ROWS = 1000
MAX_PASTED_CHARS = 2_000_000


@dataclass(frozen=True)
class ParamField:
    """One hyperparameter as a form field."""

    name: str
    kind: str  # int, float, bool, choice, list, json, text
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    optional: bool = False
    #: the bounds themselves are excluded (pydantic's gt / lt)
    open_low: bool = False
    open_high: bool = False

    @property
    def default_text(self) -> str:
        if self.default is None:
            return ""
        return json.dumps(self.default) if self.kind in ("json", "list") else str(self.default)

    @property
    def range_text(self) -> str:
        low = "" if self.minimum is None else f"{'>' if self.open_low else '≥'} {self.minimum:g}"
        high = "" if self.maximum is None else f"{'<' if self.open_high else '≤'} {self.maximum:g}"
        return ", ".join(p for p in (low, high) if p)


def _bounds(prop: Mapping[str, Any]) -> tuple[float | None, float | None]:
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum", prop.get("exclusiveMaximum"))
    return low, high


def param_fields(schema: Mapping[str, Any]) -> list[ParamField]:
    """The fields of a pydantic JSON schema's properties, in declaration order."""
    fields = []
    for name, prop in schema.get("properties", {}).items():
        variants = [v for v in prop.get("anyOf", [prop]) if v.get("type") != "null"]
        optional = len(variants) < len(prop.get("anyOf", [prop]))
        shape = variants[0] if len(variants) == 1 else {}
        kind = "text"
        choices: tuple[str, ...] = ()
        if shape.get("type") == "integer":
            kind = "int"
        elif shape.get("type") == "number":
            kind = "float"
        elif shape.get("type") == "boolean":
            kind = "bool"
        elif "enum" in shape or "const" in shape:
            kind, choices = "choice", tuple(str(c) for c in shape.get("enum", [shape.get("const")]))
        elif shape.get("type") == "array" and shape.get("items", {}).get("type") == "string":
            kind = "list"
        elif shape.get("type") in ("array", "object") or "$ref" in shape or "items" in prop:
            kind = "json"
        low, high = _bounds(shape)
        fields.append(
            ParamField(
                name=name,
                kind=kind,
                default=prop.get("default"),
                description=str(prop.get("description", "")),
                choices=choices,
                minimum=low,
                maximum=high,
                optional=optional,
                open_low="exclusiveMinimum" in shape,
                open_high="exclusiveMaximum" in shape,
            )
        )
    return fields


class FieldError(ValueError):
    """A form value that is not of its field's type (before any rule is checked)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


def parse_params(fields: list[ParamField], form: Mapping[str, Any], prefix: str = "p.") -> dict[str, Any]:
    """The parameters the form sets (empty fields are left to the defaults)."""
    params: dict[str, Any] = {}
    for field in fields:
        raw = form.get(prefix + field.name)
        if not isinstance(raw, str) or raw.strip() == "":
            continue
        text = raw.strip()
        try:
            params[field.name] = _value(field, text)
        except ValueError as exc:
            raise FieldError(field.name, str(exc)) from None
    return params


def _value(field: ParamField, text: str) -> Any:
    if field.kind == "int":
        return int(text)
    if field.kind == "float":
        value = float(text)
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value
    if field.kind == "bool":
        if text not in ("true", "false"):
            raise ValueError("must be true or false")
        return text == "true"
    if field.kind == "choice":
        return text
    if field.kind == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    if field.kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc.msg})") from None
    try:  # a field of several types (a number or 'inf', ...): a number when it reads as one
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_rows(text: str) -> list[list[float]]:
    """Pasted feature rows: a JSON array of rows, or one row a line (commas, tabs or spaces)."""
    if len(text) > MAX_PASTED_CHARS:
        raise ValueError(f"at most {MAX_PASTED_CHARS:,} characters can be pasted; store a dataset instead")
    stripped = text.strip()
    if not stripped:
        raise ValueError("paste at least one row of feature values")
    if stripped.startswith("["):
        try:
            rows = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc.msg})") from None
        rows = rows if rows and isinstance(rows[0], list) else [rows]
    else:
        rows = [line.replace(",", " ").split() for line in stripped.splitlines() if line.strip()]
    if len(rows) > MAX_PASTED_ROWS:
        raise ValueError(f"at most {MAX_PASTED_ROWS} rows can be pasted; predict a stored dataset instead")
    try:
        return [[float(v) for v in row] for row in rows]
    except (TypeError, ValueError):
        raise ValueError("every value must be a number") from None


def suggested_name(dataset_name: str, method: str) -> str:
    """``<dataset>-<method>`` as a model name: characters a name cannot hold become ``-`` (the
    same rule as ``static/ui.js``, which suggests it again when the dataset changes)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{dataset_name}-{method}").lstrip("._-")
    return slug[:120] or method
