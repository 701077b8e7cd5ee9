"""OTLP trace payloads into request events: vLLM's ``llm_request`` spans become the same
``RequestEvent`` the proxy makes, so an engine whose traffic does not pass through the gateway
is judged and counted the same way.

What vLLM 0.32 sends (``--otlp-traces-endpoint URL`` with
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``; no ``--collect-detailed-traces`` needed):
one SERVER span ``llm_request`` per finished request, started at its arrival, with
``gen_ai.latency.{time_to_first_token, e2e, time_in_queue, time_in_model_prefill,
time_in_model_decode, time_in_model_inference}`` (seconds), ``gen_ai.usage.{prompt_tokens,
completion_tokens}``, ``gen_ai.request.{id, max_tokens, temperature, top_p, n}``. No model
name, finish reason, tenant or per-token times: the model comes from the resource's
``service.name`` (``OTEL_SERVICE_NAME``), tenant and SLO class from the attributes below (set
them with ``OTEL_RESOURCE_ATTRIBUTES``), and the ITL check uses the request's TPOT, (e2e - ttft) /
(tokens - 1), since a span has no gaps between tokens. Requests aborted before they finish (a
client gone) get no span. Its other spans (model loading and the like) are not requests.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from monitor.gateway.events import RequestEvent
from monitor.gateway.judge import HEADER_CLASS, SloClasses
from monitor.gateway.measure import RequestTiming
from monitor.gateway.tenants import ANONYMOUS

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
PATH: Final = "otlp"  # the event's path: the API path of the request is not in the span

# vLLM's attribute names (vllm/tracing/utils.py, SpanAttributes), seconds and counts.
E2E: Final = "gen_ai.latency.e2e"  # a span with it is a request span
TTFT: Final = "gen_ai.latency.time_to_first_token"
QUEUE: Final = "gen_ai.latency.time_in_queue"
PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
DECODE: Final = "gen_ai.latency.time_in_model_decode"
PROMPT_TOKENS: Final = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")
OUTPUT_TOKENS: Final = ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")
REQUEST_ID: Final = "gen_ai.request.id"
# Where the model, tenant and class come from: the span's attributes first, then its resource's.
MODEL_KEYS: Final = ("gen_ai.response.model", "gen_ai.request.model", "service.name")
TENANT_KEY: Final = "inferwatch.tenant"
CLASS_KEY: Final = "inferwatch.slo_class"
_UNNAMED_SERVICE: Final = "unknown_service"  # the SDK's service.name when none is set
_UNKNOWN_MODEL: Final = "unknown"


class OtlpRejected(ValueError):
    """A payload refused whole: ``status`` for the sender, ``reason`` the counter's label."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


REJECT_REASONS: Final = ("content_type", "content_encoding", "too_large", "gzip", "protobuf",
                         "json")


def decode(body: bytes, content_type: str, content_encoding: str, max_bytes: int
           ) -> ExportTraceServiceRequest:
    """The export request in ``body`` (protobuf or OTLP JSON, gzip or not); ``max_bytes``
    bounds it after decompression. Raises OtlpRejected saying what is wrong."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise OtlpRejected(415, "content_type", f"content-type {content_type!r}: OTLP/HTTP "
                           f"takes {PROTOBUF} or {JSON}")
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        body = _gunzip(body, max_bytes)
    elif encoding not in ("", "identity"):
        raise OtlpRejected(415, "content_encoding", f"content-encoding {content_encoding!r}: "
                           "only gzip or none")
    request = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise OtlpRejected(400, "protobuf", f"not an OTLP ExportTraceServiceRequest "
                               f"({len(body)} bytes): {exc}") from None
        return request
    try:
        json_format.Parse(body, request, ignore_unknown_fields=True)
    except (json_format.ParseError, UnicodeDecodeError, ValueError) as exc:
        raise OtlpRejected(400, "json", f"not OTLP JSON: {exc}") from None
    return request


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing only
    try:
        data = inflate.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise OtlpRejected(400, "gzip", f"content-encoding gzip, but the body is not: {exc}"
                           ) from None
    if len(data) > max_bytes:
        raise OtlpRejected(413, "too_large", f"more than {max_bytes} bytes once unzipped")
    if not inflate.eof:
        raise OtlpRejected(400, "gzip", "the gzip body is truncated")
    return data


@dataclass(slots=True)
class Decoded:
    """What one payload's spans turned into."""

    events: list[RequestEvent] = field(default_factory=list)
    num_other: int = 0  # spans that are not requests (vLLM's loading spans, other services)
    incomplete: list[str] = field(default_factory=list)  # request spans unusable, and why


def request_events(request: ExportTraceServiceRequest, classes: SloClasses, wall_now: float,
                   perf_now: float) -> Decoded:
    """An event per request span; ``wall_now``/``perf_now`` read together put a span's
    arrival (unix time) on the perf_counter clock of ``RequestTiming``."""
    decoded = Decoded()
    for resource_spans in request.resource_spans:
        resource = attribute_map(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = attribute_map(span.attributes)
                if E2E not in attributes:
                    decoded.num_other += 1
                    continue
                try:
                    decoded.events.append(span_event(span, attributes, resource, classes,
                                                     wall_now, perf_now))
                except ValueError as exc:
                    decoded.incomplete.append(f"span {span.span_id.hex() or '?'}: {exc}")
    return decoded


AttributeValue = str | bool | int | float | None


def attribute_map(attributes: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    """Scalar attributes by key (arrays, maps and bytes as None: none of ours are those)."""
    found: dict[str, AttributeValue] = {}
    for item in attributes:
        found[item.key] = _scalar(item.value)
    return found


def _scalar(value: AnyValue) -> AttributeValue:
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        scalar: AttributeValue = getattr(value, kind)
        return scalar
    return None


def span_event(span: Span, attributes: Mapping[str, AttributeValue],
               resource: Mapping[str, AttributeValue], classes: SloClasses, wall_now: float,
               perf_now: float) -> RequestEvent:
    """The event of one request span; ValueError if its latencies are missing or invalid."""
    e2e = _seconds(attributes, E2E, required=True)
    assert e2e is not None  # required
    ttft = _seconds(attributes, TTFT)
    if ttft is not None and ttft > e2e:
        raise ValueError(f"{TTFT} {ttft} exceeds {E2E} {e2e}")
    started = span.start_time_unix_nano / 1e9 if span.start_time_unix_nano else \
        span.end_time_unix_nano / 1e9 - e2e if span.end_time_unix_nano else wall_now - e2e
    completion = _count(attributes, OUTPUT_TOKENS)
    timing = RequestTiming(
        arrived_at=perf_now - (wall_now - started), prompt_tokens=_count(attributes,
                                                                         PROMPT_TOKENS),
        completion_tokens=completion,
        # The engine made its tokens one at a time: the TPOT of e2e, TTFT and tokens holds.
        num_token_chunks=completion or 0, engine_metrics=_engine_metrics(attributes))
    timing.finished_at = timing.last_token_at = timing.arrived_at + e2e
    if ttft is not None:  # the engine's first token: it cannot tell reasoning from content
        timing.first_token_at = timing.first_content_at = timing.arrived_at + ttft
    failed = span.status.code == Status.STATUS_CODE_ERROR
    tenant = _text(attributes, resource, (TENANT_KEY,))
    slo_class = _text(attributes, resource, (CLASS_KEY,))
    request_id = attributes.get(REQUEST_ID)
    return RequestEvent(
        path=PATH, model=_model(attributes, resource),
        tenant=tenant[:64] if tenant else ANONYMOUS,
        slo_class=classes.for_request({HEADER_CLASS: slo_class} if slo_class else {}),
        stream=True, timing=timing, outcome="error" if failed else "ok",
        status=500 if failed else 200,
        request_id=request_id[:128] if isinstance(request_id, str) else None)


def _seconds(attributes: Mapping[str, AttributeValue], key: str, required: bool = False
             ) -> float | None:
    value = attributes.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{key} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _count(attributes: Mapping[str, AttributeValue], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attributes.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{key} must be a token count >= 0, got {value!r}")
        return value
    return None


def _engine_metrics(attributes: Mapping[str, AttributeValue]) -> dict[str, float]:
    """The span's queue, prefill and decode times under the keys of vLLM's per-request
    ``metrics`` object, which measures the same intervals (milliseconds)."""
    metrics: dict[str, float] = {}
    for name, key in (("queue_time_ms", QUEUE), ("time_to_first_token_ms", PREFILL),
                      ("generation_time_ms", DECODE)):
        seconds = _seconds(attributes, key)
        if seconds is not None:
            metrics[name] = seconds * 1000
    return metrics


def _text(attributes: Mapping[str, AttributeValue], resource: Mapping[str, AttributeValue],
          keys: tuple[str, ...]) -> str | None:
    for source in (attributes, resource):
        for key in keys:
            value = source.get(key)
            if isinstance(value, str) and value and not value.startswith(_UNNAMED_SERVICE):
                return value
    return None


def _model(attributes: Mapping[str, AttributeValue], resource: Mapping[str, AttributeValue]
           ) -> str:
    model = _text(attributes, resource, MODEL_KEYS)
    return model[:128] if model else _UNKNOWN_MODEL
