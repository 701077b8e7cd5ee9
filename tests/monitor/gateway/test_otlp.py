"""OTLP/HTTP on the gateway: vLLM's request spans (recorded from vLLM 0.32, and built here with
opentelemetry-proto) become judged, counted request events; unreadable payloads are refused
with a reason and counted, and lose nothing else."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from monitor.gateway import load_slo_classes
from monitor.gateway.otlp import request_events
from monitor.gateway.store_sink import event_row
from tests.monitor.gateway.conftest import Through

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "otlp"
TRACES = "/v1/traces"
PROTOBUF = {"content-type": "application/x-protobuf"}
# The five llm_request spans of the recorded payload: (request id, prompt, completion tokens,
# TTFT, E2E), read from the payload with the dump in the report of this change.
RECORDED = [
    ("chatcmpl-9b17ca4e73659a56", 16, 16, 0.048894405364990234, 0.11316752433776855),
    ("chatcmpl-a52a1ddf0915aa69", 16, 16, 0.008275985717773438, 0.07300877571105957),
    ("chatcmpl-b06466b6a7ee4568", 16, 16, 0.008607864379882812, 0.07273054122924805),
    ("chatcmpl-abb513689fa2e22c", 16, 16, 0.009105443954467773, 0.05632352828979492),
    ("cmpl-823eaed862ad1640-0", 1, 5, 0.007015228271484375, 0.01729583740234375),
]


def value(v: object) -> AnyValue:
    if isinstance(v, str):
        return AnyValue(string_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    return AnyValue(double_value=float(v))  # type: ignore[arg-type]


def attributes(**items: object) -> list[KeyValue]:
    return [KeyValue(key=k.replace("__", "."), value=value(v)) for k, v in items.items()]


def llm_span(ttft: object = 0.1, e2e: object = 0.5, completion: int = 5, **extra: object
             ) -> Span:
    """A span as vLLM's do_tracing makes it (vllm/v1/engine/output_processor.py)."""
    return Span(name="llm_request", kind=Span.SPAN_KIND_SERVER,
                start_time_unix_nano=1_700_000_000_000_000_000,
                end_time_unix_nano=1_700_000_000_600_000_000, attributes=attributes(**{
                    "gen_ai.latency.time_to_first_token": ttft, "gen_ai.latency.e2e": e2e,
                    "gen_ai.latency.time_in_queue": 0.01,
                    "gen_ai.latency.time_in_model_prefill": 0.05,
                    "gen_ai.latency.time_in_model_decode": 0.4,
                    "gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": completion,
                    "gen_ai.request.id": "chatcmpl-1", **extra}))


def payload(*spans: Span, **resource: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(attributes(**resource))
    resource_spans.scope_spans.add().spans.extend(spans)
    return request


def post(through: Through, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(through.url + TRACES, content=body,
                      headers={**PROTOBUF, **headers}, timeout=10)


def test_the_recorded_vllm_payload_gives_one_event_per_request_span(through: Through):
    response = post(through, (FIXTURES / "vllm-0.32-llm-requests.binpb").read_bytes())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 0
    events = through.wait_events(5)
    assert [(e.request_id, e.timing.prompt_tokens, e.timing.completion_tokens)
            for e in events] == [row[:3] for row in RECORDED]
    # Seconds back out of perf_counter arithmetic: equal to well under a microsecond.
    assert [s for e in events for s in (e.timing.ttft, e.timing.e2e)] == pytest.approx(
        [s for row in RECORDED for s in row[3:]], abs=1e-6)
    first = events[0]
    assert (first.model, first.tenant, first.slo_class.name, first.outcome, first.path) == (
        "unknown", "anonymous", "interactive", "ok", "otlp")  # vLLM names no model
    assert first.timing.engine_metrics == pytest.approx({
        "queue_time_ms": 0.0417320043197833, "time_to_first_token_ms": 16.71355599683011,
        "generation_time_ms": 66.46411400288343})
    # TPOT (0.11317 - 0.04889) / 15 = 4.3 ms, TTFT 49 ms: within interactive's 100 ms/1 s.
    assert first.timing.tpot == pytest.approx((0.11316752433776855 - 0.048894405364990234) / 15)
    assert all(e.good for e in events)
    assert through.sample("inferwatch_gateway_requests_total", model="unknown",
                          tenant="anonymous", slo_class="interactive", outcome="ok") == 5
    assert through.sample("inferwatch_gateway_good_requests_total", model="unknown",
                          tenant="anonymous", slo_class="interactive") == 5
    assert through.sample("inferwatch_gateway_generation_tokens_total", model="unknown",
                          tenant="anonymous", slo_class="interactive") == 4 * 16 + 5
    assert through.sample("inferwatch_gateway_otlp_spans_total", result="event") == 5


def test_vllm_startup_spans_are_not_requests(through: Through):
    recorded = ExportTraceServiceRequest.FromString(
        (FIXTURES / "vllm-0.32-startup.binpb").read_bytes())
    num_spans = sum(len(s.spans) for r in recorded.resource_spans for s in r.scope_spans)
    assert post(through, recorded.SerializeToString()).status_code == 200
    assert num_spans == 2 and through.events == []
    assert through.sample("inferwatch_gateway_otlp_spans_total", result="other") == num_spans


def test_model_tenant_and_class_come_from_the_resource_and_gzip_is_read(through: Through):
    body = payload(llm_span(), service__name="tiny", inferwatch__tenant="team-a",
                   inferwatch__slo_class="batch").SerializeToString()
    response = post(through, gzip.compress(body), **{"content-encoding": "gzip"})
    assert response.status_code == 200
    event = through.wait_events(1)[0]
    assert (event.model, event.tenant, event.slo_class.name) == ("tiny", "team-a", "batch")
    assert event.timing.ttft == pytest.approx(0.1) and event.timing.e2e == pytest.approx(0.5)
    assert event.timing.tpot == pytest.approx((0.5 - 0.1) / 4)


def test_otlp_json_is_read_and_answered_in_json(through: Through):
    body = json_format.MessageToJson(payload(llm_span(completion=3))).encode()
    response = post(through, body, **{"content-type": "application/json"})
    assert response.status_code == 200 and response.json() == {}
    assert through.wait_events(1)[0].timing.completion_tokens == 3


def test_an_error_span_is_a_failed_request_and_a_slow_one_is_judged_bad(through: Through):
    failed = llm_span()
    failed.status.code = Status.STATUS_CODE_ERROR
    slow = llm_span(ttft=1.5, e2e=2.0)  # interactive: TTFT target 1 s
    assert post(through, payload(failed, slow).SerializeToString()).status_code == 200
    events = through.wait_events(2)
    assert [(e.outcome, e.good) for e in events] == [("error", False), ("ok", False)]


def test_request_spans_without_usable_latencies_are_named_and_the_rest_taken(
        through: Through):
    spans = [llm_span(e2e="soon"), llm_span(ttft=0.9, e2e=0.5), llm_span()]
    response = post(through, payload(*spans).SerializeToString())
    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 2
    assert "gen_ai.latency.e2e must be a number of seconds" in \
        answer.partial_success.error_message
    assert len(through.wait_events(1)) == 1
    assert through.sample("inferwatch_gateway_otlp_spans_total", result="incomplete") == 2


GOOD = payload(llm_span()).SerializeToString()


@pytest.mark.parametrize(("body", "headers", "status", "reason"), [
    (b"\xff\xff\xff garbage", {}, 400, "protobuf"),
    (b"not gzip at all", {"content-encoding": "gzip"}, 400, "gzip"),
    (gzip.compress(GOOD)[:-12], {"content-encoding": "gzip"}, 400, "gzip"),
    (b"{not json", {"content-type": "application/json"}, 400, "json"),
    (b'{"resourceSpans": 7}', {"content-type": "application/json"}, 400, "json"),
    (GOOD, {"content-type": "text/plain"}, 415, "content_type"),
    (GOOD, {"content-encoding": "br"}, 415, "content_encoding"),
    (b"\0" * 5000, {}, 413, "too_large"),
    (gzip.compress(b"\0" * 5000), {"content-encoding": "gzip"}, 413, "too_large"),
], ids=["garbage protobuf", "not gzip", "truncated gzip", "broken json", "json of wrong shape",
        "another content type", "another encoding", "too large", "too large once unzipped"])
def test_a_malformed_payload_is_refused_counted_and_loses_nothing_else(
        through: Through, body: bytes, headers: dict[str, str], status: int, reason: str):
    through.gateway.otlp.max_bytes = 4096
    assert post(through, GOOD).status_code == 200
    refused = post(through, body, **headers)
    assert post(through, GOOD).status_code == 200
    assert refused.status_code == status
    assert refused.json()["error"]["reason"] == reason
    assert refused.json()["error"]["message"]
    assert through.sample("inferwatch_gateway_otlp_rejected_total", reason=reason) == 1
    assert len(through.wait_events(2)) == 2  # the payloads around it, whole
    assert through.sample("inferwatch_gateway_otlp_spans_total", result="event") == 2


def test_only_post_is_taken(through: Through):
    assert httpx.get(through.url + TRACES, timeout=10).status_code == 405


def test_arrival_is_the_span_start_on_the_wall_clock():
    decoded = request_events(payload(llm_span()), load_slo_classes(), wall_now=1_700_000_100.0,
                             perf_now=500.0)
    timing = decoded.events[0].timing
    assert timing.arrived_at == pytest.approx(500.0 - 100.0)
    assert timing.finished_at == pytest.approx(400.5)
    assert decoded.incomplete == []


def test_a_span_event_is_stored_with_the_engines_queue_and_prefill():
    event = request_events(payload(llm_span()), load_slo_classes(), wall_now=1_700_000_100.0,
                           perf_now=500.0).events[0]
    event.good = True
    row = event_row(event, wall_now=1_700_000_100.0, perf_now=500.0)
    assert row.at == pytest.approx(1_700_000_000.0)  # the span's start
    assert (row.prompt_tokens, row.output_tokens, row.outcome, row.status) == (7, 5, "ok", 200)
    assert (row.ttft_seconds, row.first_content_seconds, row.e2e_seconds) == pytest.approx(
        (0.1, 0.1, 0.5))
    assert row.tpot_seconds == pytest.approx(0.1) and row.max_itl_seconds is None
    assert (row.engine_queue_seconds, row.engine_ttft_seconds) == pytest.approx((0.01, 0.05))
