"""The bridge's OTLP/HTTP metrics push against real HTTP: a recorded vLLM page served on a
port-0 socket, the bridge scraping it and serving its /metrics, pushing to the test collector
(tests/monitor/gateway/collector.py), which decodes each push with opentelemetry-proto."""

from __future__ import annotations

import argparse
import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    Metric,
)
from prometheus_client import CollectorRegistry

from exporters import bridge_cli
from exporters.bridge import Bridge, BridgeConfig, serve_metrics
from exporters.exposition import ParsedPage, parse_page
from exporters.otlp_config import OtlpMetricsConfig, otlp_headers
from exporters.otlp_push import OtlpMetricsPush, otel_name, resource_attributes, to_request
from exporters.schema import MetricType, get_spec
from tests.http_thread import serving_handler
from tests.monitor.gateway.collector import attributes, collecting

from .engine_fixtures import read_fixture

LIVE_PAGE = "vllm-0.32-cpu-live.prom"
ATTRIBUTE_OF = {"model": "gen_ai.request.model", "error_type": "error.type"}


class Page:
    """The engine's /metrics body, swappable while served."""

    def __init__(self, body: str) -> None:
        self.body = body.encode()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        page = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(page.body)))
                self.end_headers()
                self.wfile.write(page.body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@dataclass
class Running:
    bridge: Bridge
    push: OtlpMetricsPush
    metrics_url: str
    target: str
    stop: threading.Event
    scraping: threading.Thread

    def stop_scraping(self) -> None:
        self.stop.set()
        self.scraping.join(5)

    def page(self) -> ParsedPage:
        response = httpx.get(self.metrics_url + "/metrics", timeout=5, trust_env=False)
        response.raise_for_status()
        return parse_page(response.text, self.metrics_url)

    def own(self, name: str, **labels: str) -> float | None:
        for family in self.page().families.values():
            for sample in family.samples:
                if sample.name == name and sample.labels == {"target": self.target, **labels}:
                    return sample.value
        return None


@contextmanager
def running(body: str, endpoint: str, interval: float = 0.05, timeout: float = 2.0
            ) -> Iterator[Running]:
    """The bridge scraping ``body`` every ``interval`` in its thread, pushing every
    ``interval`` in the push's thread."""
    registry = CollectorRegistry()
    with serving_handler(Page(body).handler()) as base, httpx.Client(trust_env=False) as client:
        target = base + "/metrics"
        bridge = Bridge(BridgeConfig(target=target, interval_seconds=interval), registry, client)
        push = OtlpMetricsPush(OtlpMetricsConfig(endpoint, interval_seconds=interval,
                                                 timeout_seconds=timeout),
                               bridge, registry, resource_attributes(target, {}))
        server, url = serve_metrics(registry, "127.0.0.1", 0)
        stop = threading.Event()
        scraping = threading.Thread(target=bridge.run, args=(stop,), daemon=True)
        scraping.start()
        push.start()
        try:
            yield Running(bridge, push, url, target, stop, scraping)
        finally:
            stop.set()
            scraping.join(5)
            push.close()
            server.shutdown()
            server.server_close()


def _metrics(request: ExportMetricsServiceRequest) -> dict[str, Metric]:
    [resource_metrics] = request.resource_metrics
    [scope] = resource_metrics.scope_metrics
    return {metric.name: metric for metric in scope.metrics}


def _key(labels: dict[str, str]) -> dict[str, str | int]:
    return {ATTRIBUTE_OF.get(k, k): v for k, v in labels.items() if k != "le"}


def _wait(condition: object, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.02)


@pytest.mark.timeout(20)
def test_the_pushed_points_equal_the_bridges_metrics_page() -> None:
    with collecting() as collector, running(read_fixture(LIVE_PAGE), collector.url) as bridge:
        collector.wait_received(1)
        bridge.stop_scraping()  # /metrics and the snapshot stay those of the last scrape
        pushes = len(collector.received)
        collector.wait_received(pushes + 1)  # a push that began after the last scrape
        page = bridge.page()
        _wait(lambda: (bridge.own("inferwatch_bridge_otlp_metrics_exports_total",
                                  result="ok") or 0) >= pushes + 1, "the pushes counted")
        assert bridge.own("inferwatch_bridge_otlp_metrics_exports_total", result="failed") == 0
    request = collector.received[pushes]
    assert collector.content_types[-1] == "application/x-protobuf"
    assert attributes(request.resource_metrics[0].resource.attributes) == {
        "service.name": "inferwatch-bridge", "inferwatch.bridge.target": bridge.target,
        "server.address": "127.0.0.1", "server.port": int(bridge.target.split(":")[2][:-8])}
    pushed = _metrics(request)
    snapshot = bridge.bridge.snapshot
    assert snapshot is not None
    assert {"gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token",
            "gen_ai.server.request.duration", "gen_ai.server.kv_cache_usage",
            "gen_ai.server.generation_tokens"} <= pushed.keys()
    assert pushed["gen_ai.server.time_to_first_token"].unit == "s"
    checked = {MetricType.COUNTER: 0, MetricType.GAUGE: 0, MetricType.HISTOGRAM: 0}
    scraped_at = int(snapshot.time * 1e9)
    for family in page.families.values():
        if family.name.startswith("inferwatch_bridge_") or not family.samples:
            continue  # the bridge's own series: not pushed
        spec = get_spec(family.name)
        metric = pushed[otel_name(spec)]
        if spec.type is MetricType.HISTOGRAM:
            assert metric.histogram.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
            points = {tuple(sorted(attributes(p.attributes).items())): p
                      for p in metric.histogram.data_points}
            series = {tuple(sorted(_key(s.labels).items())) for s in family.samples}
            assert series == points.keys()
            for key, point in points.items():
                labels = dict(key)
                own = [s for s in family.samples if _key(s.labels) == labels]
                buckets = {float(s.labels["le"]): s.value for s in own
                           if s.name.endswith("_bucket")}
                [count] = [s.value for s in own if s.name.endswith("_count")]
                [total] = [s.value for s in own if s.name.endswith("_sum")]
                assert point.count == count and point.sum == total
                assert list(point.explicit_bounds) == sorted(b for b in buckets if b != math.inf)
                assert len(point.bucket_counts) == len(point.explicit_bounds) + 1
                cumulative = [sum(point.bucket_counts[:i + 1])
                              for i in range(len(point.bucket_counts))]
                assert cumulative == [buckets[b] for b in sorted(buckets)]
                assert point.time_unix_nano == scraped_at
                assert 0 < point.start_time_unix_nano <= scraped_at
                checked[spec.type] += 1
        else:
            data = metric.sum if spec.type is MetricType.COUNTER else metric.gauge
            if spec.type is MetricType.COUNTER:
                assert metric.sum.is_monotonic
                assert metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
            values = {tuple(sorted(attributes(p.attributes).items())): p.as_double
                      for p in data.data_points}
            expected = {tuple(sorted(_key(s.labels).items())): s.value for s in family.samples
                        if not s.name.endswith("_created")}
            assert values == expected, family.name
            checked[spec.type] += len(values)
    assert min(checked.values()) > 0, checked
    ttft = pushed["gen_ai.server.time_to_first_token"].histogram.data_points
    assert [p.count for p in ttft] == [4]  # the recorded page's 4 requests
    assert attributes(ttft[0].attributes)["gen_ai.request.model"] == "tiny"



def test_a_counter_reset_moves_the_start_time_to_the_scrape_that_found_it() -> None:
    page = Page('vllm:generation_tokens_total{model_name="m"} 100\n'
                'vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 3\n'
                'vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 5\n'
                'vllm:time_to_first_token_seconds_sum{model_name="m"} 2.5\n'
                'vllm:time_to_first_token_seconds_count{model_name="m"} 5\n')
    now = [1000.0]
    with serving_handler(page.handler()) as base, httpx.Client(trust_env=False) as client:
        bridge = Bridge(BridgeConfig(target=base + "/metrics", engine="vllm"),
                        CollectorRegistry(), client, clock=lambda: now[0])

        def starts() -> dict[str, tuple[int, int]]:
            assert bridge.scrape_once() and bridge.snapshot is not None
            pushed = _metrics(to_request(bridge.snapshot, {"service.name": "t"}))
            [tokens] = pushed["gen_ai.server.generation_tokens"].sum.data_points
            [ttft] = pushed["gen_ai.server.time_to_first_token"].histogram.data_points
            assert list(ttft.bucket_counts) == [3, 2] and list(ttft.explicit_bounds) == [0.1]
            return {"tokens": (tokens.start_time_unix_nano // 10**9,
                               tokens.time_unix_nano // 10**9),
                    "ttft": (ttft.start_time_unix_nano // 10**9, ttft.time_unix_nano // 10**9)}

        assert starts() == {"tokens": (1000, 1000), "ttft": (1000, 1000)}
        now[0] = 1005.0
        assert starts() == {"tokens": (1000, 1005), "ttft": (1000, 1005)}
        page.body = page.body.replace(b"} 100\n", b"} 40\n")  # the engine restarted
        now[0] = 1010.0
        assert starts() == {"tokens": (1010, 1010), "ttft": (1000, 1010)}
        now[0] = 1015.0
        assert starts() == {"tokens": (1010, 1015), "ttft": (1000, 1015)}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.timeout(20)
def test_a_collector_down_or_hanging_is_a_counted_failure_and_scrapes_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = f"http://127.0.0.1:{_closed_port()}/v1/metrics"
    with running(read_fixture(LIVE_PAGE), down) as bridge:
        _wait(lambda: (bridge.own("inferwatch_bridge_otlp_metrics_exports_total",
                                  result="failed") or 0) >= 3, "3 failed pushes")
        assert bridge.own("inferwatch_bridge_otlp_metrics_exports_total", result="ok") == 0
        scraped = bridge.own("inferwatch_bridge_last_success_timestamp_seconds")
        _wait(lambda: bridge.own("inferwatch_bridge_last_success_timestamp_seconds") != scraped,
              "a later scrape")
        assert bridge.own("inferwatch_bridge_up") == 1
    failures = [r.getMessage() for r in caplog.records if "OTLP metrics push" in r.getMessage()]
    assert len(failures) == 1 and down in failures[0]  # logged once, not every 50 ms
    # A collector that accepts and never answers: each push ends at its timeout (0.3 s),
    # counted failed, while the bridge scrapes every 50 ms.
    with collecting(hang=True) as collector, \
            running(read_fixture(LIVE_PAGE), collector.url, timeout=0.3) as bridge:
        _wait(lambda: (bridge.own("inferwatch_bridge_otlp_metrics_exports_total",
                                  result="failed") or 0) >= 1, "a push timed out")
        scraped = bridge.own("inferwatch_bridge_last_success_timestamp_seconds")
        _wait(lambda: bridge.own("inferwatch_bridge_last_success_timestamp_seconds") != scraped,
              "a scrape while a push hangs", timeout=0.5)


@pytest.mark.parametrize(("argv", "env"), [
    (["--otlp-metrics-endpoint", "http://127.0.0.1:1/v1/metrics"],
     {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"}),
    (["--otlp-metrics-endpoint", "ftp://127.0.0.1/v1/metrics"], {}),
    (["--otlp-metrics-endpoint", "http://127.0.0.1:1/v1/metrics", "--otlp-metrics-interval",
      "0"], {}),
], ids=["delta", "ftp endpoint", "interval 0"])
def test_the_command_refuses_a_bad_push(argv: list[str], env: dict[str, str],
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parser = argparse.ArgumentParser()
    bridge_cli.add_arguments(parser)
    args = parser.parse_args(["--target", "http://127.0.0.1:1/metrics", "--port", "0", *argv])
    assert bridge_cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("inferwatch bridge: ") and "OTLP" in err, err


def test_resource_and_headers_follow_opentelemetrys_variables() -> None:
    env = {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, team=a%2Cb",
           "OTEL_SERVICE_NAME": "vllm-bridge", "OTEL_EXPORTER_OTLP_HEADERS": "x-generic=1",
           "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "authorization=Bearer%20t"}
    assert resource_attributes("http://vllm:8000/metrics", env) == {
        "service.name": "vllm-bridge", "deployment.environment": "prod", "team": "a,b",
        "inferwatch.bridge.target": "http://vllm:8000/metrics", "server.address": "vllm",
        "server.port": 8000}
    assert otlp_headers(env) == {"authorization": "Bearer t"}
    assert otlp_headers({"OTEL_EXPORTER_OTLP_HEADERS": "x-generic=1"}) == {"x-generic": "1"}
    with pytest.raises(ValueError, match=r"\$OTEL_RESOURCE_ATTRIBUTES: 'novalue'"):
        resource_attributes("http://vllm:8000/metrics", {"OTEL_RESOURCE_ATTRIBUTES": "novalue"})
