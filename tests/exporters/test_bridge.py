"""The bridge against real HTTP: a target server on a port-0 loopback socket serving recorded
pages (and broken ones), the bridge's own /metrics server on port 0, scraped with httpx."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from exporters import bridge_cli
from exporters.bridge import (
    SCRAPE_ERROR_REASONS,
    Bridge,
    BridgeConfig,
    ProblemLog,
    serve_metrics,
)
from exporters.exposition import PageProblem, ParsedPage, parse_page
from exporters.schema import get_spec

from .engine_fixtures import read_fixture

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
NOW = 1_700_000_000.0
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    delay_seconds: float = 0.0
    content_length: bool = True  # False: the body ends when the connection closes


class Target:
    """An HTTP server on 127.0.0.1:<free port> answering each path with its Route."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                route = routes.get(self.path, Route(b"not found", 404))
                time.sleep(route.delay_seconds)
                self.send_response(route.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                if route.content_length:
                    self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                self.wfile.write(route.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up on a slow route: nothing to report

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def serve(self, path: str, route: Route) -> str:
        self.routes[path] = route
        return self.base + path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target()
    yield server
    server.close()


@dataclass
class RunningBridge:
    bridge: Bridge
    url: str
    target: str

    def page(self) -> ParsedPage:
        response = httpx.get(self.url + "/metrics", timeout=5, trust_env=False)
        response.raise_for_status()
        page = parse_page(response.text, self.url)
        assert page.problems == [], page.problems
        return page

    def value(self, name: str, **labels: str) -> float | None:
        return sample_value(self.page(), name, labels)

    def health(self) -> dict[str, float | None]:
        page = self.page()
        health = {
            name: sample_value(page, f"inferwatch_bridge_{name}", {"target": self.target})
            for name in ("up", "page_problems_total", "last_success_timestamp_seconds",
                         "scrape_duration_seconds")
        }
        for reason in SCRAPE_ERROR_REASONS:
            health[reason] = sample_value(page, "inferwatch_bridge_scrape_errors_total",
                                          {"target": self.target, "reason": reason})
        return health


def sample_value(page: ParsedPage, name: str, labels: Mapping[str, str]) -> float | None:
    for family in page.families.values():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def engine_series(page: ParsedPage) -> list[str]:
    return [name for name, family in page.families.items()
            if family.samples and not name.startswith("inferwatch_bridge_")]


@contextmanager
def running_bridge(target_url: str, **config: Any) -> Iterator[RunningBridge]:
    registry = CollectorRegistry()
    with httpx.Client(trust_env=False) as client:
        bridge = Bridge(BridgeConfig(target=target_url, **config), registry, client,
                        clock=lambda: NOW)
        server, url = serve_metrics(registry, "127.0.0.1", 0)
        try:
            yield RunningBridge(bridge, url, target_url)
        finally:
            server.shutdown()
            server.server_close()


def no_errors() -> dict[str, float]:
    return dict.fromkeys(SCRAPE_ERROR_REASONS, 0.0)


# --- a good page -------------------------------------------------------------------------------

def test_the_vllm_page_is_served_normalized_with_the_health_series(target: Target) -> None:
    url = target.serve("/metrics", Route(read_fixture("vllm.prom").encode()))
    with running_bridge(url) as bridge:
        assert bridge.bridge.scrape_once()
        page = bridge.page()
        assert sample_value(page, "gen_ai_server_requests_running", {"model": LLAMA}) == 8.0
        assert sample_value(page, "gen_ai_server_requests_total",
                            {"model": LLAMA, "finish_reason": "length"}) == 131.0
        assert sample_value(page, "gen_ai_server_time_to_first_token_seconds_bucket",
                            {"model": LLAMA, "le": "0.02"}) == 13.0
        requests = page.families["gen_ai_server_requests_total"]
        assert requests.type == "counter"
        assert requests.help == get_spec("gen_ai_server_requests").help
        health = bridge.health()
        duration = health.pop("scrape_duration_seconds")
        assert duration is not None and 0 < duration < 3
        # 4 non-exposition lines, and the TTFT histogram's missing +Inf bucket
        assert health == {"up": 1.0, "page_problems_total": 5.0,
                          "last_success_timestamp_seconds": NOW, **no_errors()}


def test_auto_maps_the_dcgm_series_on_a_triton_page_too(target: Target) -> None:
    text = read_fixture("trtllm.prom") + read_fixture("dcgm-exporter.prom")
    url = target.serve("/metrics", Route(text.encode()))
    with running_bridge(url, extra_labels={"cluster": "eu"}) as bridge:
        assert bridge.bridge.scrape_once()
        assert bridge.value("gen_ai_server_kv_cache_blocks_capacity", model="tensorrt_llm",
                            version="1", cluster="eu") == 6239.0
        assert bridge.value("gpu_sm_clock_hertz", gpu="0", cluster="eu",
                            uuid="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52") == 139e6


# --- a target that fails -----------------------------------------------------------------------

def test_a_target_that_goes_down_is_up_0_and_its_values_are_not_served(target: Target) -> None:
    url = target.serve("/metrics", Route(read_fixture("sglang.prom").encode()))
    with running_bridge(url) as bridge:
        assert bridge.bridge.scrape_once()
        assert engine_series(bridge.page()) != []
        target.close()
        assert not bridge.bridge.scrape_once()
        assert engine_series(bridge.page()) == []
        health = bridge.health()
        assert (health["up"], health["connect"]) == (0.0, 1.0)
        assert health["last_success_timestamp_seconds"] == NOW


def test_a_target_that_comes_back_is_served_again(target: Target) -> None:
    url = target.serve("/metrics", Route(b"oops", status=500))
    with running_bridge(url) as bridge:
        assert not bridge.bridge.scrape_once()
        target.serve("/metrics", Route(read_fixture("sglang.prom").encode()))
        assert bridge.bridge.scrape_once()
        assert bridge.value("gen_ai_server_requests_waiting", model=LLAMA) == 2826.0
        assert (bridge.health()["up"], bridge.health()["http_status"]) == (1.0, 1.0)


HUGE = b"x 1\n" * 300_000  # 1.2 MB
FAILURES = {
    "HTTP 500": (Route(b"oops", status=500), {}, "http_status"),
    "slower than the timeout": (Route(b"vllm:num_requests_running 1\n", delay_seconds=1.0),
                                {"timeout_seconds": 0.3}, "timeout"),
    "too large, Content-Length given": (Route(HUGE), {"max_bytes": 1_000_000}, "too_large"),
    "too large, read to the end": (Route(HUGE, content_length=False), {"max_bytes": 1_000_000},
                                   "too_large"),
    "an HTML page": (Route(b"<html><body>Welcome</body></html>\n"), {}, "parse"),
    "an empty page": (Route(b""), {}, "parse"),
    "no known engine": (Route(b"node_load1 0.5\n"), {}, "unknown_engine"),
}


@pytest.mark.parametrize(("route", "config", "reason"), FAILURES.values(), ids=FAILURES.keys())
def test_a_failed_scrape_counts_its_reason(
    target: Target, route: Route, config: dict[str, Any], reason: str
) -> None:
    url = target.serve("/metrics", route)
    with running_bridge(url, **config) as bridge:
        assert not bridge.bridge.scrape_once()
        health = bridge.health()
        assert health["up"] == 0.0
        assert {r: health[r] for r in SCRAPE_ERROR_REASONS} == {**no_errors(), reason: 1.0}
        assert health["last_success_timestamp_seconds"] == 0.0
        assert engine_series(bridge.page()) == []


# --- a broken page -----------------------------------------------------------------------------

BROKEN_VLLM = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
vllm:num_requests_waiting{model_name="m"} NaN
vllm:num_requests_waiting{model_name="m" 1
this is not exposition
vllm:num_requests_running{model_name="m"} 4
vllm:generation_tokens_total{model_name="m"} 12
"""


def test_a_malformed_page_serves_what_could_be_read_and_logs_each_problem(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    url = target.serve("/metrics", Route(BROKEN_VLLM.encode()))
    with running_bridge(url) as bridge, caplog.at_level(logging.WARNING, "exporters.bridge"):
        assert bridge.bridge.scrape_once()
        assert bridge.value("gen_ai_server_requests_running", model="m") == 3.0  # the first
        assert bridge.value("gen_ai_server_generation_tokens_total", model="m") == 12.0
        assert bridge.value("gen_ai_server_requests_waiting", model="m") is None
        health = bridge.health()
        assert (health["up"], health["page_problems_total"]) == (1.0, 4.0)
        logged = [r.getMessage() for r in caplog.records]
        assert [line for line in (3, 4, 5, 6)
                if not any(f"target {url} line {line}:" in m for m in logged)] == []


def test_a_counter_that_goes_backwards_is_passed_through_and_counted(
    target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    url = target.serve("/metrics", Route(b'vllm:generation_tokens_total{model_name="m"} 100\n'))
    with running_bridge(url) as bridge, caplog.at_level(logging.WARNING, "exporters.bridge"):
        assert bridge.bridge.scrape_once()
        target.serve("/metrics", Route(b'vllm:generation_tokens_total{model_name="m"} 40\n'))
        assert bridge.bridge.scrape_once()
        assert bridge.value("gen_ai_server_generation_tokens_total", model="m") == 40.0
        assert bridge.health()["page_problems_total"] == 1.0
        [message] = [r.getMessage() for r in caplog.records]
        assert f"target {url} line 1:" in message
        assert "vllm:generation_tokens_total" in message and "from 100 to 40" in message


def test_problem_log_keeps_to_its_budget(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = ProblemLog("t", window_seconds=600, max_lines=3, clock=lambda: now[0])
    problems = [PageProblem(line, "bad") for line in range(1, 6)]
    with caplog.at_level(logging.WARNING, "exporters.bridge"):
        log.report(problems)
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        log.report(problems)  # the same page again: nothing new
        log.report([PageProblem(9, "new")])  # over budget: counted only
        assert caplog.records == []
        now[0] = 600.0
        log.report(problems)
    assert first == ["target t line 1: bad", "target t line 2: bad", "target t line 3: bad",
                     "target t: log limit of 3 problems reached; more are counted in "
                     "inferwatch_bridge_page_problems_total only"]
    after = [r.getMessage() for r in caplog.records]
    assert after[0] == "target t: 3 more page problems were not logged in the last 600 s"
    assert after[1:4] == first[:3]


# --- configuration and the command line --------------------------------------------------------

BAD_CONFIGS = {
    "not a URL scheme we scrape": {"target": "ftp://host/metrics"},
    "no host": {"target": "http:///metrics"},
    "unknown engine": {"target": "http://h/metrics", "engine": "ollama"},
    "zero interval": {"target": "http://h/metrics", "interval_seconds": 0},
    "negative timeout": {"target": "http://h/metrics", "timeout_seconds": -1},
    "zero max bytes": {"target": "http://h/metrics", "max_bytes": 0},
    "reserved extra label": {"target": "http://h/metrics", "extra_labels": {"le": "1"}},
}


@pytest.mark.parametrize("config", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_a_bad_config_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        BridgeConfig(**config)


@pytest.mark.timeout(10)  # a run() that accepted its arguments would serve until killed
@pytest.mark.parametrize("argv", [
    ["--target", "http://127.0.0.1:1/metrics", "--port", "0", "--label", "novalue"],
    ["--target", "http://127.0.0.1:1/metrics", "--port", "0", "--label", "le=1"],
    ["--target", "ftp://127.0.0.1/metrics", "--port", "0"],
], ids=["label without =", "reserved label", "ftp target"])
def test_the_command_refuses_bad_arguments(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    bridge_cli.add_arguments(parser)
    assert bridge_cli.run(parser.parse_args(argv)) == 2
    assert capsys.readouterr().err.startswith("inferwatch bridge: ")


def test_the_command_serves_on_port_0_until_terminated(target: Target) -> None:
    url = target.serve("/metrics", Route(read_fixture("vllm.prom").encode()))
    command = [sys.executable, "-m", "exporters.bridge_cli", "--target", url, "--port", "0",
               "--interval", "0.2", "--label", "cluster=test", "zone=a"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          cwd=REPO_ROOT, env=env) as process:
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline(), process.stdout.readline()]
            assert lines[1].startswith("listening on http://127.0.0.1:"), lines
            bridge_url = lines[1].removeprefix("listening on ").strip()
            running = _wait_for_series(bridge_url, "gen_ai_server_requests_running")
            assert running == {"model": LLAMA, "cluster": "test", "zone": "a"}
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            process.kill()


def _wait_for_series(bridge_url: str, name: str, timeout: float = 10.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = parse_page(httpx.get(bridge_url + "/metrics", trust_env=False).text, bridge_url)
        family = page.families.get(name)
        if family and family.samples:
            return family.samples[0].labels
        time.sleep(0.05)
    raise AssertionError(f"{name} not served by {bridge_url} within {timeout} s")
