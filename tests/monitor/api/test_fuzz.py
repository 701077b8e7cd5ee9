"""The API fuzzed from its own OpenAPI spec (schemathesis): for every operation, generated
requests (valid and not) never get a 5xx, and every answer conforms to the documented schema
(status code, content type, body). Schema-valid requests may still be refused with a 400 that
names the field, where a constraint spans fields (uniform LO <= HI, end after start, a time
given as text): JSON Schema cannot say those, so the acceptance check is left out.
A real uvicorn server on a port-0 socket, over the real store of conftest, with the bearer
token (so the routes that start runs are reached too).

Each operation is driven with hypothesis directly: schemathesis' lazy pytest loader does not
work with pytest 9 (it writes a private attribute of the test node)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.monitor.api.conftest import TOKEN, served_api

EXAMPLES_PER_OPERATION = 40


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with served_api(tmp_path_factory.mktemp("fuzz")) as api:
        yield schemathesis.openapi.from_url(f"{api.url}/openapi.json")


def _operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


def test_the_spec_lists_every_route(api_schema: Any) -> None:
    paths = {(op.method.upper(), op.path) for op in _operations(api_schema)}
    assert {("GET", "/api/v1/slos/{name}/report"), ("GET", "/api/v1/targets/{name}/series"),
            ("POST", "/api/v1/sweeps"), ("POST", "/api/v1/canaries"), ("GET", "/readyz"),
            ("GET", "/api/v1/alerts"), ("GET", "/metrics")} <= paths


def test_no_request_gets_a_server_error_or_an_undocumented_answer(api_schema: Any) -> None:
    failures: list[str] = []
    for operation in _operations(api_schema):
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30,
                                   excluded_checks=[positive_data_acceptance])
        try:
            check()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
