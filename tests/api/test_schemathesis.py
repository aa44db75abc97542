"""The OpenAPI document tells the truth: schemathesis, with every check, finds nothing.

Every check runs (status codes, response schemas, content types, ``Allow`` headers, acceptance of
valid and rejection of invalid data, ...), on schema-valid and schema-invalid requests and in
sequences of calls that follow the links schemathesis infers between operations. The run is
bounded (a few hundred requests, a fixed derandomized seed) so that it fits the suite; a longer
run is ``schemathesis --config-file tests/api/schemathesis.toml run http://HOST/openapi.json -c all``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.python.asgi import shutdown_lifespans

from app.config import Settings
from app.main import create_app

CONFIG = Path(__file__).resolve().parent / "schemathesis.toml"
EXAMPLES = 25


def bounded(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture
def api(settings: Settings) -> Iterator[FastAPI]:
    """The app; schemathesis runs its lifespan (start-up) itself and keeps it for the process,
    so it is shut down here, before the database goes."""
    app = create_app(settings)
    yield app
    shutdown_lifespans()


@pytest.fixture
def schema(api: FastAPI) -> schemathesis.schemas.BaseSchema:
    config = SchemathesisConfig.from_path(CONFIG)
    return schemathesis.openapi.from_asgi("/openapi.json", api, config=config)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_every_operation_answers_as_documented(schema: schemathesis.schemas.BaseSchema, mode: GenerationMode) -> None:
    @given(case=schema.as_strategy(generation_mode=mode))
    @bounded(EXAMPLES * 4)
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate()

    check()


@pytest.mark.slow  # stateful sequences: in the full suite, out of the quick subset
def test_call_sequences_along_the_links_answer_as_documented(schema: schemathesis.schemas.BaseSchema) -> None:
    schema.as_state_machine().run(settings=bounded(EXAMPLES // 3))
