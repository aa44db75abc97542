"""The interactive docs: assets served by the service itself, the API key as a security scheme."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_every_asset_from_the_service(client: TestClient, page: str) -> None:
    html = client.get(page).text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(r"""url: *['"]([^'"]+)['"]""", html)
    assert urls, html
    for url in urls:
        assert url.startswith("/"), f"{page} loads {url} from outside the service"
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) > 100, url


def test_api_key_is_an_openapi_security_scheme(settings) -> None:
    """With a key configured, the schemes Swagger UI's "Authorize" offers; without one, none."""
    settings.api_key = "s3cret"
    with TestClient(create_app(settings)) as client:
        spec = client.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["APIKeyHeader"]["type"] == "apiKey" and schemes["APIKeyHeader"]["name"] == "X-API-Key"
    assert schemes["APIKeyHeader"]["in"] == "header"
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    guarded = spec["paths"]["/datasets"]["get"]["security"]
    assert {"APIKeyHeader": []} in guarded and {"HTTPBearer": []} in guarded
    assert "security" not in spec["paths"]["/health"]["get"]


def test_no_security_scheme_without_a_key(client: TestClient) -> None:
    assert "securitySchemes" not in client.get("/openapi.json").json().get("components", {})


def test_api_key_semantics_are_kept(settings) -> None:
    settings.api_key = "s3cret"
    with TestClient(create_app(settings)) as client:
        missing = client.get("/datasets")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert client.get("/datasets", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/datasets", headers={"Authorization": "bearer s3cret"}).status_code == 200
        assert client.get("/datasets", headers={"Authorization": "Basic s3cret"}).status_code == 401
        # the X-API-Key header is the one that counts when both are sent
        both = {"X-API-Key": "wrong", "Authorization": "Bearer s3cret"}
        assert client.get("/datasets", headers=both).status_code == 401
        assert client.get("/redoc").status_code == 200
        # the docs pages and their assets stay open, so the Authorize button can be reached
        assert client.get("/docs").status_code == 200
        assert client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200
        assert client.get("/openapi.json").status_code == 200


def _undescribed(node: object, where: str) -> list[str]:
    """Every property of every object schema under ``node`` (components and inline schemas alike)
    that has no description, as ``where.property``."""
    found: list[str] = []
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and not prop.get("description"):
                found.append(f"{where}.{name}")
        for key, child in node.items():
            found += _undescribed(child, f"{where}.{key}" if key != "properties" else where)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += _undescribed(child, f"{where}[{i}]")
    return found


@pytest.mark.parametrize("api_key", [None, "s3cret"])
def test_every_field_of_every_request_and_response_is_described(tmp_path, api_key: str | None) -> None:
    """Swagger UI and ReDoc show a field's description beside it; a bare name is not documentation.

    A schema FastAPI adds by itself (its HTTPValidationError, for a route with parameters that
    does not declare ``responses(422)``) fails here too: it is not the shape the API answers.
    """
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", model_dir=tmp_path / "store", api_key=api_key)
    spec = create_app(settings).openapi()
    assert {"DatasetOut", "JobOut", "VersionOut", "TrainRequest", "ErrorBody"} <= set(spec["components"]["schemas"])
    assert _undescribed(spec, "openapi") == []


def test_the_api_page_names_every_operation(client: TestClient) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/api.md").read_text()
    spec = client.get("/openapi.json").json()
    operations = [f"{method.upper()} {path}" for path, methods in spec["paths"].items() for method in methods]
    assert [operation for operation in operations if f"`{operation}`" not in page] == []
    for address in ("/docs", "/redoc", "/openapi.json"):
        assert f"`{address}`" in page
