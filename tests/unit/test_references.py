"""The generated reference pages are current: docs/cli.md is the command as it is (every command,
argument and option) and docs/client.md lists every public ``Client`` method with its signature
and the first paragraph of its docstring (``python -m app.client.reference docs`` writes them)."""

from __future__ import annotations

import inspect
from pathlib import Path

from app.client import reference

DOCS = Path(__file__).resolve().parents[2] / "docs"
STALE = "stale: run python -m app.client.reference docs"


def test_the_cli_page_is_the_command() -> None:
    assert (DOCS / "cli.md").read_text() == reference.cli_page(), STALE


def test_the_client_page_lists_every_public_method() -> None:
    text = (DOCS / "client.md").read_text()
    assert text == reference.client_page(text), STALE
    assert reference.CLIENT_START in text and reference.CLIENT_END in text
    for name, method in reference.client_methods():
        assert inspect.getdoc(method), f"Client.{name} has no docstring to summarise"
        assert f"- `{name}(" in text, name
    assert {"upload_dataset", "store_dataset", "train", "wait", "predict", "predict_array"} <= {
        name for name, _ in reference.client_methods()
    }
