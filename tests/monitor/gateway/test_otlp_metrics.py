"""The gateway's OTLP/HTTP metrics push: what a real collector (decoding with
opentelemetry-proto) receives equals the gateway's own /metrics, series by series, in both
temporalities; a collector that is down or hangs is counted and never slows the proxy."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
from prometheus_client.utils import floatToGoString

from exporters.schema import GATEWAY_SPECS
from monitor.gateway.config import OtlpMetricsConfig
from monitor.gateway.otlp_metrics import (
    ERROR_TYPE,
    GOOD_REQUESTS,
    MODEL,
    OPERATION,
    REQUESTS,
    SERVER_ADDRESS,
    SERVER_PORT,
    SLO_CLASS,
    TENANT,
    TOKEN_TYPE,
    TOKEN_USAGE,
    OtlpMetricsExport,
)
from tests.monitor.gateway.collector import attributes, collecting
from tests.monitor.gateway.conftest import Through
from tests.monitor.gateway.test_otlp import llm_span, payload, post
from tests.monitor.gateway.test_proxy import CHAT, chat_body

EXPORTS = "inferwatch_gateway_otlp_metrics_exports_total"
OTEL_HISTOGRAMS = [spec for spec in GATEWAY_SPECS if spec.otel_name is not None]
Point = tuple[dict[str, str | int], Any]


@contextmanager
def pushing(through: Through, url: str, **config: Any) -> Iterator[OtlpMetricsExport]:
    """An OTLP push of ``through``'s gateway metrics to ``url``, closed after."""
    settings: dict[str, Any] = {"interval_seconds": 0.2, "timeout_seconds": 2.0, **config}
    export = OtlpMetricsExport(OtlpMetricsConfig(url, **settings), through.registry,
                               through.upstream_url)
    through.gateway.metrics.mirrors.append(export)
    try:
        yield export
    finally:
        export.close()


def points(pushes: Iterable[ExportMetricsServiceRequest], name: str) -> list[Point]:
    found: list[Point] = []
    for push in pushes:
        for resource in push.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        data = getattr(metric, metric.WhichOneof("data"))
                        found += [(attributes(p.attributes), p) for p in data.data_points]
    return found


def total(found: list[Point], field: str = "as_int", **match: str | int) -> float:
    return sum(getattr(p, field) for attrs, p in found
               if all(attrs.get(key) == value for key, value in match.items()))


def send_known_traffic(through: Through) -> None:
    """5 successful requests (chat and completions, streamed or not, two tenants) and one
    refused: 6 durations, 5 TTFTs, 35 prompt and 20 output tokens."""
    script = through.upstream.script
    script.num_chunks, script.interval = 4, 0.01
    for key in ("key-a", "key-a", "key-b"):
        httpx.post(through.url + CHAT, json=chat_body(), timeout=10,
                   headers={"authorization": f"Bearer {key}"}).raise_for_status()
    httpx.post(through.url + CHAT, json=chat_body(stream=False), timeout=10).raise_for_status()
    httpx.post(through.url + "/v1/completions", timeout=10,
               json={"model": "tiny", "prompt": "hi", "stream": True}).raise_for_status()
    script.status = 429
    assert httpx.post(through.url + CHAT, json=chat_body(), timeout=10).status_code == 429
    through.wait_events(6)


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_the_pushed_metrics_equal_the_gateway_s_own_page(through: Through, temporality: str):
    with collecting() as collector, pushing(through, collector.url,
                                            temporality=temporality) as export:
        send_known_traffic(through)
        collector.wait_received(2)  # pushed on its own, every 0.2 s
        assert export.force_flush()
    pushes = collector.received[-1:] if temporality == "cumulative" else collector.received
    assert set(collector.content_types) == {"application/x-protobuf"}
    resource = attributes(collector.received[-1].resource_metrics[0].resource.attributes)
    assert resource["service.name"] == "inferwatch-gateway"
    events = through.events
    classes = {event.slo_class.name for event in events}
    for spec in OTEL_HISTOGRAMS:
        assert spec.otel_name is not None
        found = points(pushes, spec.otel_name)
        assert all(list(p.explicit_bounds) == list(spec.buckets or ()) for _, p in found)
        for slo_class in classes:
            series = {"model": "tiny", "slo_class": slo_class}
            match = {MODEL: "tiny", SLO_CLASS: slo_class}
            assert total(found, "count", **match) == through.sample(f"{spec.name}_count",
                                                                    **series)
            assert total(found, "sum", **match) == pytest.approx(
                through.sample(f"{spec.name}_sum", **series), rel=1e-9)
            for i, bound in enumerate(spec.buckets or ()):
                below = sum(sum(p.bucket_counts[:i + 1]) for attrs, p in found
                            if all(attrs.get(k) == v for k, v in match.items()))
                assert below == through.sample(f"{spec.name}_bucket", le=floatToGoString(bound),
                                               **series), (spec.name, bound)
    durations = points(pushes, "gen_ai.server.request.duration")
    assert total(durations, "count") == 6 and total(durations, "count", **{
        ERROR_TYPE: "refused"}) == 1
    assert total(points(pushes, "gen_ai.server.time_to_first_token"), "count") == 5
    assert {attrs.get(OPERATION) for attrs, _ in durations} == {"chat", "text_completion"}
    upstream_port = int(through.upstream_url.rsplit(":", 1)[1])
    assert all(attrs[SERVER_ADDRESS] == "127.0.0.1" and attrs[SERVER_PORT] == upstream_port
               for attrs, _ in durations)
    expected_temporality = getattr(AggregationTemporality,
                                   f"AGGREGATION_TEMPORALITY_{temporality.upper()}")
    for push in pushes:
        for metric in push.resource_metrics[0].scope_metrics[0].metrics:
            data = getattr(metric, metric.WhichOneof("data"))
            assert data.aggregation_temporality == expected_temporality, metric.name

    tokens, requests = points(pushes, TOKEN_USAGE), points(pushes, REQUESTS)
    good = points(pushes, GOOD_REQUESTS)
    assert total(tokens, **{TOKEN_TYPE: "input"}) == 35
    assert total(tokens, **{TOKEN_TYPE: "output"}) == 20
    for event in events:
        tenant = event.tenant  # 3 tenants, under the budget of 20: their own label
        series = {"model": event.model, "tenant": tenant, "slo_class": event.slo_class.name}
        match = {MODEL: event.model, TENANT: tenant, SLO_CLASS: event.slo_class.name}
        assert total(tokens, **match, **{TOKEN_TYPE: "input"}) == through.sample(
            "inferwatch_gateway_prompt_tokens_total", **series)
        assert total(tokens, **match, **{TOKEN_TYPE: "output"}) == through.sample(
            "inferwatch_gateway_generation_tokens_total", **series)
        assert total(good, **match) == through.sample(
            "inferwatch_gateway_good_requests_total", **series)
        ok = [p for attrs, p in requests if ERROR_TYPE not in attrs
              and all(attrs.get(k) == v for k, v in match.items())]
        assert sum(p.as_int for p in ok) == through.sample(
            "inferwatch_gateway_requests_total", outcome="ok", **series)
    assert through.sample(EXPORTS, result="ok") >= 2
    assert through.sample(EXPORTS, result="failed") == 0


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1/metrics"


@pytest.mark.parametrize("hang", [False, True], ids=["nothing-listens", "collector-hangs"])
def test_a_collector_down_or_hanging_is_counted_and_never_slows_the_proxy(
        through: Through, hang: bool):
    with collecting(hang=hang) as collector:
        url = collector.url if hang else _closed_port_url()
        with pushing(through, url, interval_seconds=0.1, timeout_seconds=1.0):
            time.sleep(0.3)  # a push is under way (hanging) or has failed
            for _ in range(3):
                sent = time.perf_counter()
                response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
                assert response.status_code == 200
                assert time.perf_counter() - sent < 0.5  # not behind the 1 s push
            through.wait_events(3)
            deadline = time.monotonic() + 5
            while through.sample(EXPORTS, result="failed") < 1:
                assert time.monotonic() < deadline, "no failed push counted"
                time.sleep(0.05)
        page = httpx.get(through.url + "/metrics", timeout=10).text
    assert f'{EXPORTS}{{result="failed"}}' in page
    assert through.sample(EXPORTS, result="ok") == 0
    assert collector.received == []
    assert through.sample("inferwatch_gateway_requests_total", model="tiny",
                          tenant="anonymous", slo_class="interactive", outcome="ok") == 3


def test_a_span_taken_on_v1_traces_is_pushed_without_the_proxy_s_server_attributes(
        through: Through):
    body = payload(llm_span(ttft=0.1, e2e=0.5), service__name="engine-b").SerializeToString()
    with collecting() as collector, pushing(through, collector.url) as export:
        assert post(through, body).status_code == 200
        through.wait_events(1)
        assert export.force_flush()
    found = points(collector.received[-1:], "gen_ai.server.time_to_first_token")
    assert [(attrs, p.count, p.sum) for attrs, p in found] == [
        ({MODEL: "engine-b", SLO_CLASS: "interactive"}, 1, pytest.approx(0.1))]
