"""The upload route's form fields are the one declaration of the upload options."""

from __future__ import annotations

from app.main import create_app
from app.upload_options import UPLOAD_OPTIONS


def test_the_route_form_is_the_declaration(tmp_path) -> None:
    from app.config import Settings

    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/x.db", model_dir=str(tmp_path)))
    schema = app.openapi()
    body = schema["paths"]["/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    ref = body["$ref"].rsplit("/", 1)[1]
    properties = schema["components"]["schemas"][ref]["properties"]
    assert list(properties) == ["file", "labels_file", *(option.name for option in UPLOAD_OPTIONS)]
    for option in UPLOAD_OPTIONS:
        field = properties[option.name]
        assert field["description"] == option.description
        if option.choices:
            assert field["enum"] == list(option.choices) and field["default"] == option.default
        if option.minimum is not None:
            assert {"type": "integer", "minimum": option.minimum} in field["anyOf"]


def test_file_fields_are_binary_for_client_generators(tmp_path) -> None:
    # contentMediaType alone: openapi-python-client and openapi-generator type the field as a string
    from app.config import Settings

    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/x.db", model_dir=str(tmp_path)))
    schema = app.openapi()
    body = schema["paths"]["/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    properties = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"]
    binary = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
    assert binary.items() <= properties["file"].items()
    assert properties["labels_file"]["anyOf"] == [binary, {"type": "null"}]
