"""The parameter table of each ``docs/methods/<id>.md`` page, rendered from the method's declaration.

The ``*Params`` model is the one declaration of a method's hyperparameters; the pages show it as
a Markdown table between two marker comments, written by this module so that they cannot drift
from it (``tests/unit/methods/test_docs.py`` fails when a page's table is not the rendering of
the current declaration). After changing a declaration, run::

    python -m app.methods.params_doc docs/methods
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.methods.base import MethodParams, MethodSpec

START = "<!-- params: generated from the Params declaration by `python -m app.methods.params_doc docs/methods` -->"
END = "<!-- params: end -->"

_BOUNDS = (("exclusiveMinimum", ">"), ("minimum", ">="), ("exclusiveMaximum", "<"), ("maximum", "<="))


def _type(prop: dict[str, Any]) -> str:
    """A JSON schema property as a short type: ``int >= 1``, ``"minmax" | "none"``, ``float | null``."""
    if "anyOf" in prop:
        return " \\| ".join(_type(option) for option in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "null": "null"}.get(
        prop.get("type", ""), prop.get("type", "object")
    )
    if kind == "array":
        items = prop.get("prefixItems") or ([prop["items"]] if "items" in prop else [])
        kind = f"[{', '.join(_type(item) for item in items)}]" if items else "list"
        if "minItems" in prop and "prefixItems" not in prop:
            kind += f" (at least {prop['minItems']})"
    bounds = [f"{op} {_number(prop[key])}" for key, op in _BOUNDS if key in prop]
    return f"{kind} {', '.join(bounds)}" if bounds else kind


def _number(value: float) -> str:
    """A bound as written in the declaration: pydantic 2.6 (the floor) gives ``gt=0`` on a float
    field as ``0.0`` in the schema, 2.14 as ``0``; the page must not depend on which."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def params_table(model: type[MethodParams]) -> str:
    """The Markdown table of ``model``: name, type and bounds, default, description."""
    schema = model.model_json_schema()
    defaults = model().model_dump(mode="json")
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for name, prop in schema["properties"].items():
        if "$ref" in prop or "items" in prop and "$ref" in prop["items"]:
            kind = "list of members" if "items" in prop else "object"
        else:
            kind = _type(prop)
        description = prop.get("description", "").replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | `{json.dumps(defaults[name])}` | {description} |")
    return "\n".join(rows)


def table_block(spec: MethodSpec) -> str:
    """The marked block a page holds for ``spec``."""
    return f"{START}\n{params_table(spec.params)}\n{END}"


def rewrite(page: Path, spec: MethodSpec) -> bool:
    """Replace the marked block of ``page`` by the current rendering; True when the page changed."""
    text = page.read_text(encoding="utf-8")
    head, found, rest = text.partition(START)
    if not found:
        raise SystemExit(f"{page}: no parameter block (add the two marker lines where the table goes)")
    updated = head + table_block(spec) + rest.partition(END)[2]
    if updated != text:
        page.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: list[str]) -> int:
    from app.methods.catalog import catalog

    folder = Path(argv[0] if argv else "docs/methods")
    for spec in catalog().values():
        if rewrite(folder / f"{spec.id}.md", spec):
            print(f"updated {spec.id}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
