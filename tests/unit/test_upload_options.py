"""The upload options are declared once (``app.upload_options``): every place that spells them agrees.

The route's form fields, ``ParseOptions``, the client's keywords and the CLI's options are derived
from the declaration; these tests fail when one of them is spelled by hand again and drifts.
"""

from __future__ import annotations

import inspect
import typing

import pytest
import typer.main
from typer.testing import CliRunner

from app.client import Client
from app.client.cli import cli
from app.formats import ParseOptions, check_options
from app.formats.common import DatasetFormatError
from app.upload_options import OPTIONS_BY_NAME, PARSE_OPTIONS, UPLOAD_OPTIONS, form_values


def test_parse_options_are_the_declared_parser_options() -> None:
    fields = ParseOptions.model_fields
    assert list(fields) == [option.name for option in PARSE_OPTIONS]
    for option in PARSE_OPTIONS:
        field = fields[option.name]
        assert field.default == option.default and field.description == option.description
        bounds = [getattr(item, "ge", None) for item in field.metadata if hasattr(item, "ge")]
        assert bounds == ([option.minimum] if option.minimum is not None else [])
        literal = [arg for arg in typing.get_args(field.annotation) or [field.annotation]]
        if option.choices:  # the Literal of the annotation lists exactly the declared choices
            assert typing.get_origin(field.annotation) is typing.Literal and tuple(literal) == option.choices


def test_the_client_and_the_cli_take_every_declared_option(tmp_path) -> None:
    for method in (Client.upload_dataset, Client.store_dataset):
        keywords = inspect.signature(method).parameters
        assert [name for name in keywords if name in OPTIONS_BY_NAME] == [option.name for option in UPLOAD_OPTIONS]
    command = typer.main.get_command(cli).commands["datasets"].commands["upload"]  # type: ignore[attr-defined]
    flags = {flag for param in command.params for flag in param.opts}
    assert {"--" + option.name.replace("_", "-") for option in UPLOAD_OPTIONS} <= flags
    # a wrong choice or bound is a usage error (exit 2) before any request (the URL is a closed port)
    (tmp_path / "d.csv").write_text("a,b\n1,0\n")
    for wrong in (["--part", "valid"], ["--label-count", "0"]):
        result = CliRunner().invoke(
            cli, ["--url", "http://127.0.0.1:9", "datasets", "upload", str(tmp_path / "d.csv"), *wrong]
        )
        assert result.exit_code == 2 and wrong[0] in result.output


def test_form_values() -> None:
    assert form_values({"label_columns": ["a", "b"], "label_count": None, "n_features": 3}) == {
        "label_columns": "a,b",
        "n_features": "3",
    }
    assert form_values({"label_columns": '["a,b"]'}) == {"label_columns": '["a,b"]'}  # a string goes as it is
    with pytest.raises(TypeError, match="label_cuont.*the options are name, format, label_count"):
        form_values({"label_cuont": 2})


@pytest.mark.parametrize("option", [o for o in PARSE_OPTIONS if not o.everywhere], ids=lambda o: o.name)
def test_check_options_follows_the_declared_formats(option) -> None:
    """Each option is refused for every format the declaration does not list, accepted for the others."""
    value = option.choices[-1] if option.choices else ["a"] if option.listed else 2
    extra = {"label_count": 1} if option.name == "label_location" else {}
    for fmt in ("arff", "csv", "libsvm", "mat"):
        options = ParseOptions(**{option.name: value, **extra})
        if fmt in option.formats and (not extra or fmt in OPTIONS_BY_NAME["label_count"].formats):
            check_options(options, fmt, has_labels_file=False)
        else:
            with pytest.raises(DatasetFormatError, match="applies to"):
                check_options(options, fmt, has_labels_file=False)
