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
from exporters.otlp_config import OtlpMetricsConfig
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

