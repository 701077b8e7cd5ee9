"""`inferwatch doctor` against a local server serving the recorded vLLM 0.32 page (and its
/version), the same page changed, and nothing at all."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from monitor.cli import main
from monitor.collect.doctor import VERSION_PROBES, _netloc
from tests.asgi_thread import serving
from tests.exporters.engine_fixtures import read_fixture

LIVE = read_fixture("vllm-0.32-cpu-live.prom")
PROM = "text/plain; version=0.0.4; charset=utf-8"


@contextmanager
def engine(page: str = LIVE, version: dict[str, Any] | None = None) -> Iterator[str]:
    """A vLLM-like server: /metrics gives ``page``; /version gives ``version`` (404 if None)."""

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(page, media_type=PROM)

    async def version_route(_: Request) -> Response:
        if version is None:
            return PlainTextResponse("not found", status_code=404)
        return JSONResponse(version)

    app = Starlette(routes=[Route("/metrics", metrics), Route("/version", version_route)])
    with serving(app) as url:
        yield url


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["doctor", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_live_vllm_page_is_complete_and_its_version_read(
        capsys: pytest.CaptureFixture[str]) -> None:
    with engine(version={"version": "0.32.0"}) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics")
    assert status == 0
    lines = out.splitlines()
    assert "engine:     vllm" in lines
    assert f"version:    0.32.0 (GET {url}/version)" in lines
    assert "mapped:     30 families" in lines and "  vllm:prefix_cache_hits_total" in lines
    assert "  http_requests_total" in lines  # its 4xx and 5xx (issue 30)
    assert "  vllm:request_num_preemptions: per-request preemption counts; " \
           "num_preemptions_total is mapped" in lines
    assert any(line.startswith("  *_created: 38 (") for line in lines)
    assert any(line.startswith("undecided:  0 families") for line in lines)
    assert lines[-1].startswith("complete")


def test_json_for_machines(capsys: pytest.CaptureFixture[str]) -> None:
    with engine(version={"version": "0.32.0"}) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics", "--json")
    body = json.loads(out)
    assert status == 0 and body["exit_status"] == 0 and body["complete"] is True
    assert set(body) == {"url", "engines", "version", "coverage", "complete", "exit_status"}
    assert body["engines"] == ["vllm"]
    assert body["version"] == {"value": "0.32.0", "source": f"GET {url}/version"}
    coverage = body["coverage"]
    assert set(coverage) == {"engines", "mapped", "not_mapped", "ignored", "ignored_families",
                             "undecided", "missing", "absent"}
    assert len(coverage["mapped"]) == 30 and len(coverage["not_mapped"]) == 10
    assert coverage["ignored"] == {"*_created": 38, "http_*": 4, "process_*": 6, "python_*": 4}
    assert (coverage["undecided"], coverage["missing"], coverage["absent"]) == ([], [], {})


def test_an_undecided_family_and_a_missing_metric_exit_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    page = "\n".join(line for line in LIVE.splitlines()
                     if "vllm:kv_cache_usage_perc" not in line)
    page += '\n# TYPE vllm:new_thing gauge\nvllm:new_thing{model_name="tiny"} 1\n'
    with engine(page, version={"version": "0.33.0"}) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics", "--json")
    body = json.loads(out)
    assert status == 1 and body["exit_status"] == 1 and body["complete"] is False
    assert body["coverage"]["undecided"] == ["vllm:new_thing"]
    assert body["coverage"]["missing"] == ["gen_ai_server_kv_cache_usage_ratio"]


def test_without_a_version_endpoint_the_version_is_unknown_and_says_why(
        capsys: pytest.CaptureFixture[str]) -> None:
    with engine(version=None) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics")
    assert status == 0
    assert f"version:    unknown (GET {url}/version: HTTP 404)" in out.splitlines()


def test_an_unreachable_page_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, then closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    status, _, err = doctor(capsys, url)
    assert status == 2 and "(connect)" in err
    status, out, _ = doctor(capsys, url, "--json")
    assert status == 2
    assert json.loads(out)["error"]["reason"] == "connect"


@pytest.mark.parametrize(("page", "reason"), [
    ("<html>not metrics</html>\n", "parse"),
    ('# TYPE some_app_requests_total counter\nsome_app_requests_total 3\n', "unknown_engine"),
], ids=["no sample", "no known engine"])
def test_a_page_that_is_not_an_engines_exits_2(capsys: pytest.CaptureFixture[str], page: str,
                                               reason: str) -> None:
    with engine(page) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics", "--json")
    assert status == 2 and json.loads(out)["error"]["reason"] == reason


@pytest.mark.parametrize(("url", "offset", "netloc"), [
    ("http://127.0.0.1:8002/metrics", -2, "127.0.0.1:8000"),
    ("http://127.0.0.1:8002/metrics", 0, "127.0.0.1:8002"),
    ("http://[::1]:8002/metrics", -2, "[::1]:8000"),
    ("http://triton.example/metrics", -2, None),   # no port to move
    ("http://127.0.0.1:1/metrics", -2, None),      # no port below 1
])
def test_a_version_endpoint_on_another_port_is_found_by_its_offset(
        url: str, offset: int, netloc: str | None) -> None:
    """Triton's version is on its HTTP API (8000), beside /metrics on 8002."""
    assert _netloc(urlsplit(url), offset) == netloc


def test_triton_version_is_asked_of_its_http_port_first() -> None:
    probes = VERSION_PROBES["triton"]
    assert [(p.path, p.keys, p.port_offset) for p in probes] == [
        ("/v2", ("version",), -2), ("/v2", ("version",), 0)]


def test_the_recorded_cpu_triton_page_is_complete_with_absent_metrics_listed(
        capsys: pytest.CaptureFixture[str]) -> None:
    """No version endpoint answers here (no HTTP API beside it): unknown, saying why."""
    with engine(read_fixture("triton-2.51-cpu-live.prom")) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics")
    lines = out.splitlines()
    assert status == 0 and lines[-1].startswith("complete")
    assert "engine:     triton" in lines
    assert next(line for line in lines if line.startswith("version:")).startswith(
        "version:    unknown (")
    assert any(line.startswith("absent:     14 schema metrics") for line in lines)
    assert "  gen_ai_server_kv_cache_usage_ratio: needs the TensorRT-LLM backend" in lines
    assert "missing:    0 schema metrics (mapped, but no source on the page)" in lines


def test_the_live_llamacpp_page_is_complete_and_its_build_read_from_props(
        capsys: pytest.CaptureFixture[str]) -> None:
    """llama.cpp b11434 as recorded: its page and its GET /props, where build_info holds
    the release ("b11434-unknown": built from a source tree without git)."""
    page = read_fixture("llamacpp-b11434-cpu-live.prom")
    props = json.loads(read_fixture("llamacpp-b11434-cpu-live-props.json"))

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(page, media_type="text/plain; version=0.0.4")

    async def props_route(_: Request) -> Response:
        return JSONResponse(props)

    app = Starlette(routes=[Route("/metrics", metrics), Route("/props", props_route)])
    with serving(app) as url:
        status, out, _ = doctor(capsys, f"{url}/metrics", "--json")
    body = json.loads(out)
    assert status == 0 and body["complete"] is True
    assert body["engines"] == ["llamacpp"]
    assert body["version"] == {"value": "b11434-unknown", "source": f"GET {url}/props"}
    assert len(body["coverage"]["mapped"]) == 6 and len(body["coverage"]["not_mapped"]) == 9
