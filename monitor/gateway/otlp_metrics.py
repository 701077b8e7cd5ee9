"""The gateway's metrics pushed over OTLP/HTTP (protobuf), beside its Prometheus /metrics.

A ``MetricsMirror`` of ``GatewayMetrics``: each finished request's observations (the same ones
/metrics counts, decided once in ``metrics.observe``) are recorded into OpenTelemetry SDK
instruments, and the SDK's periodic reader pushes them from its own thread every
``interval_seconds`` to the collector with the SDK's OTLP/HTTP exporter (retries and backoff
within ``timeout_seconds``). Names and attributes follow the GenAI semantic conventions:

- histograms ``gen_ai.server.time_to_first_token``, ``gen_ai.server.time_per_output_token``
  and ``gen_ai.server.request.duration`` (seconds), with the bucket boundaries of the
  Prometheus histograms, so both exports have the same buckets, counts and sums; as on
  /metrics they carry no tenant (their series count);
- counters ``inferwatch.gateway.token.usage`` (``gen_ai.token.type`` input/output),
  ``inferwatch.gateway.requests`` and ``inferwatch.gateway.requests.good``, with the tenant.

Attributes: ``gen_ai.request.model``, ``gen_ai.operation.name`` (chat, text_completion),
``server.address`` and ``server.port`` (the upstream), ``error.type`` (the outcome of a request
that did not succeed: refused, error, timeout, cancelled), ``inferwatch.slo_class`` and
``inferwatch.tenant``. Events from OTLP trace ingest (vLLM's spans) carry no operation nor
server: the gateway did not see the request.

Temporality is cumulative unless delta is asked for. A failed export (collector down, refused,
a bad answer) is logged and counted on ``inferwatch_gateway_otlp_metrics_exports_total{result}``;
the proxy never waits for it. Needs the ``otlp`` extra (``opentelemetry-sdk`` and
``opentelemetry-exporter-otlp-proto-http``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import httpx
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import Counter as OtelCounter
from opentelemetry.metrics import Histogram as OtelHistogram
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter

from exporters import schema
from monitor.gateway.config import OtlpMetricsConfig
from monitor.gateway.events import RequestEvent
from monitor.gateway.metrics import Observed

log = logging.getLogger(__name__)

SCOPE: Final = "inferwatch.gateway"
TOKEN_USAGE: Final = "inferwatch.gateway.token.usage"
REQUESTS: Final = "inferwatch.gateway.requests"
GOOD_REQUESTS: Final = "inferwatch.gateway.requests.good"
# OTel attribute names (semantic conventions, then ours).
MODEL: Final = "gen_ai.request.model"
OPERATION: Final = "gen_ai.operation.name"
TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
SLO_CLASS: Final = "inferwatch.slo_class"
TENANT: Final = "inferwatch.tenant"
OPERATIONS: Final = {"/v1/chat/completions": "chat", "/v1/completions": "text_completion"}
EXPORT_RESULTS: Final = ("ok", "failed")
_UNITS: Final = {"seconds": "s"}  # the schema's units in UCUM, as OTel writes them
_INSTRUMENT_TYPES: Final = (Counter, UpDownCounter, Histogram, ObservableCounter,
                            ObservableUpDownCounter, ObservableGauge)


class CountingExporter(MetricExporter):
    """The SDK's OTLP/HTTP exporter, with each export's result counted on /metrics."""

    def __init__(self, inner: MetricExporter, registry: CollectorRegistry,
                 temporality: dict[type, AggregationTemporality], endpoint: str) -> None:
        super().__init__(preferred_temporality=temporality)
        self.inner = inner
        self.endpoint = endpoint
        self.exports = PromCounter(
            "inferwatch_gateway_otlp_metrics_exports",
            "OTLP metrics pushes to the collector by result (ok, failed: unreachable, refused "
            "or a bad answer, after the exporter's retries)", ["result"], registry=registry)
        for result in EXPORT_RESULTS:
            self.exports.labels(result)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:  # the reader's thread must live on: the next push may land
            log.exception("OTLP metrics export to %s raised", self.endpoint)
            result = MetricExportResult.FAILURE
        if result is MetricExportResult.SUCCESS:
            self.exports.labels("ok").inc()
        else:
            log.warning("OTLP metrics export to %s failed (counted on "
                        "inferwatch_gateway_otlp_metrics_exports_total)", self.endpoint)
            self.exports.labels("failed").inc()
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class OtlpMetricsExport:
    """A ``MetricsMirror`` that pushes over OTLP/HTTP. Pushing starts when it is built;
    ``close()`` pushes a last time (bounded by the timeout) and stops."""

    def __init__(self, config: OtlpMetricsConfig, registry: CollectorRegistry, upstream: str
                 ) -> None:
        self.config = config
        temporality = _temporality(config.temporality)
        self.exporter = CountingExporter(
            OTLPMetricExporter(endpoint=config.endpoint, timeout=config.timeout_seconds,
                               preferred_temporality=temporality),
            registry, temporality, config.endpoint)
        reader = PeriodicExportingMetricReader(
            self.exporter, export_interval_millis=config.interval_seconds * 1000,
            export_timeout_millis=config.timeout_seconds * 1000)
        # Resource.create adds OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES from the env.
        self.provider = MeterProvider(
            metric_readers=[reader], resource=Resource.create({SERVICE_NAME: "inferwatch-gateway"}),
            shutdown_on_exit=False)
        self._server = _server_attributes(upstream)
        meter = self.provider.get_meter(SCOPE)
        histograms = {spec.name: _histogram(meter, spec) for spec in schema.GATEWAY_SPECS
                      if spec.otel_name is not None}
        self.ttft = histograms[schema.GATEWAY_TIME_TO_FIRST_TOKEN]
        self.tpot = histograms[schema.GATEWAY_TIME_PER_OUTPUT_TOKEN]
        self.e2e = histograms[schema.GATEWAY_REQUEST_DURATION]
        self.tokens: OtelCounter = meter.create_counter(
            TOKEN_USAGE, "{token}", "Prompt (input) and output tokens of finished requests, "
            "from the upstream's usage (token chunks counted when it reports none)")
        self.requests: OtelCounter = meter.create_counter(
            REQUESTS, "{request}", "Requests that went through the gateway and finished; "
            "error.type is the outcome of those that did not succeed")
        self.good: OtelCounter = meter.create_counter(
            GOOD_REQUESTS, "{request}", "Requests judged good at the gateway against their "
            "SLO class's targets (succeeded, TTFT and TPOT within them)")

    def record(self, event: RequestEvent, observed: Observed) -> None:
        attributes: dict[str, str | int] = {MODEL: event.model,
                                            SLO_CLASS: event.slo_class.name}
        if (operation := OPERATIONS.get(event.path)) is not None:
            attributes[OPERATION] = operation
            attributes.update(self._server)
        if event.outcome != "ok":
            attributes[ERROR_TYPE] = event.outcome
        for histogram, value in ((self.e2e, observed.e2e), (self.ttft, observed.ttft),
                                 (self.tpot, observed.tpot)):
            if value is not None:
                histogram.record(value, attributes)
        attributes[TENANT] = observed.tenant
        self.requests.add(1, attributes)
        attributes.pop(ERROR_TYPE, None)  # good requests and tokens: no failure split
        self.good.add(1 if event.good else 0, attributes)  # a 0 point keeps the ratio defined
        for token_type, count in (("input", observed.prompt_tokens),
                                  ("output", observed.generation_tokens)):
            if count is not None:
                self.tokens.add(count, {**attributes, TOKEN_TYPE: token_type})

    def force_flush(self, timeout_seconds: float | None = None) -> bool:
        """Push now (tests, and a last push at shutdown)."""
        timeout = self.config.timeout_seconds if timeout_seconds is None else timeout_seconds
        return self.provider.force_flush(timeout_millis=timeout * 1000)

    def close(self) -> None:
        self.provider.shutdown(timeout_millis=self.config.timeout_seconds * 1000)


def _temporality(name: str) -> dict[type, AggregationTemporality]:
    chosen = (AggregationTemporality.DELTA if name == "delta"
              else AggregationTemporality.CUMULATIVE)
    return {kind: chosen if kind in (Counter, Histogram) else AggregationTemporality.CUMULATIVE
            for kind in _INSTRUMENT_TYPES}


def _server_attributes(upstream: str) -> dict[str, str | int]:
    url = httpx.URL(upstream)
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    return {SERVER_ADDRESS: url.host, SERVER_PORT: port}


def _histogram(meter: Meter, spec: schema.MetricSpec) -> OtelHistogram:
    assert spec.otel_name is not None and spec.buckets is not None  # selected so by the caller
    bounds: Sequence[float] = spec.buckets
    return meter.create_histogram(spec.otel_name, _UNITS[spec.unit], spec.help,
                                  explicit_bucket_boundaries_advisory=bounds)
