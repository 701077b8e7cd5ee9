"""The bridge's normalized page pushed over OTLP/HTTP (protobuf), beside its Prometheus /metrics.

The OpenTelemetry SDK only exports what it counted itself; the bridge forwards counts an
engine already made. So each push builds an ``ExportMetricsServiceRequest`` (opentelemetry-proto)
from the bridge's last ``Snapshot`` and POSTs it, ``application/x-protobuf``, to the collector:

- names: the schema's OpenTelemetry name where it has one (``gen_ai.server.time_to_first_token``,
  ``gen_ai.server.time_per_output_token``, ``gen_ai.server.request.duration``), else derived
  from the Prometheus name (``gen_ai_server_kv_cache_usage_ratio`` ->
  ``gen_ai.server.kv_cache_usage``); units in UCUM (``s``, ``By``, ``1``, ``{token}``);
- counters: monotonic cumulative Sums; gauges: Gauges; histograms: cumulative histogram points
  with the page's finite bucket bounds and per-bucket (not cumulative) counts;
- points carry the scrape's time; counters and histograms start when the bridge first saw the
  series, or at the scrape that found it reset (a restarted engine);
- attributes: the labels, ``model`` as ``gen_ai.request.model`` and ``error_type`` as
  ``error.type``; the resource: ``service.name`` inferwatch-bridge (or $OTEL_SERVICE_NAME),
  $OTEL_RESOURCE_ATTRIBUTES, the target (``inferwatch.bridge.target``, ``server.address``,
  ``server.port``).

Headers come from $OTEL_EXPORTER_OTLP_METRICS_HEADERS (else $OTEL_EXPORTER_OTLP_HEADERS). Pushes
run in their own thread every interval, each bounded by the timeout, so a collector
that is down or hangs never delays a scrape. Each push is counted on
``inferwatch_bridge_otlp_metrics_exports_total{target,result}`` (ok, failed); failures are
logged when they start or change, and when pushes work again. Cumulative only: the engine's
counts are cumulative, and the collector can turn them into deltas (cumulativetodelta)."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Mapping
from typing import Final

import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    HistogramDataPoint,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from prometheus_client import CollectorRegistry, Counter

from exporters.adapters import NormalizedFamily
from exporters.bridge import Bridge, Snapshot, series_key
from exporters.otlp_config import OtlpMetricsConfig, key_values
from exporters.schema import MetricSpec, MetricType

logger = logging.getLogger(__name__)

SCOPE: Final = "inferwatch.bridge"
SERVICE_NAME: Final = "inferwatch-bridge"
SERVICE_NAME_ENV: Final = "OTEL_SERVICE_NAME"
RESOURCE_ATTRIBUTES_ENV: Final = "OTEL_RESOURCE_ATTRIBUTES"
EXPORT_RESULTS: Final = ("ok", "failed")
# Labels renamed to their semantic-convention attributes; the others keep their names.
ATTRIBUTES: Final[Mapping[str, str]] = {"model": "gen_ai.request.model",
                                        "error_type": "error.type"}
# The schema's units in UCUM, and the Prometheus name suffixes they stand for; counted things
# ("tokens") become annotations ("{token}").
_UCUM: Final[Mapping[str, str]] = {"seconds": "s", "bytes": "By", "ratio": "1", "watts": "W",
                                   "celsius": "Cel", "hertz": "Hz", "": ""}
_PROMETHEUS_PREFIX: Final = "gen_ai_server_"
_OTEL_PREFIX: Final = "gen_ai.server."
_NANOS: Final = 1_000_000_000


def otel_name(spec: MetricSpec) -> str:
    """The schema's OpenTelemetry name, else one derived from the Prometheus name: the
    ``gen_ai.server.`` namespace dotted, the unit suffix (now the OTLP unit) dropped."""
    if spec.otel_name is not None:
        return spec.otel_name
    name = spec.name
    if spec.unit in _UCUM and spec.unit and name.endswith("_" + spec.unit):
        name = name[: -len(spec.unit) - 1]
    if name.startswith(_PROMETHEUS_PREFIX):
        name = _OTEL_PREFIX + name[len(_PROMETHEUS_PREFIX):]
    return name


def otel_unit(spec: MetricSpec) -> str:
    if spec.unit in _UCUM:
        return _UCUM[spec.unit]
    return "{" + spec.unit.removesuffix("s") + "}"


def resource_attributes(target: str, env: Mapping[str, str]) -> dict[str, str | int]:
    """service.name, $OTEL_RESOURCE_ATTRIBUTES (``k=v,k=v``, percent-encoded values) and the
    target, which names the engine the points come from."""
    attributes: dict[str, str | int] = {"service.name": SERVICE_NAME}
    attributes.update(key_values(env.get(RESOURCE_ATTRIBUTES_ENV, ""),
                                 f"${RESOURCE_ATTRIBUTES_ENV}"))
    if env.get(SERVICE_NAME_ENV):
        attributes["service.name"] = env[SERVICE_NAME_ENV]
    url = httpx.URL(target)
    attributes.update({"inferwatch.bridge.target": target, "server.address": url.host,
                       "server.port": url.port or (443 if url.scheme == "https" else 80)})
    return attributes


def to_request(snapshot: Snapshot, resource: Mapping[str, str | int]
               ) -> ExportMetricsServiceRequest:
    """The snapshot as one OTLP metrics export request (one resource, one scope)."""
    scope = ScopeMetrics(scope=InstrumentationScope(name=SCOPE))
    time = int(snapshot.time * _NANOS)
    for family in snapshot.families:
        metric = scope.metrics.add(name=otel_name(family.spec), unit=otel_unit(family.spec),
                                   description=family.help)
        if family.type is MetricType.GAUGE:
            metric.gauge.data_points.extend(_gauge_points(family, time))
        elif family.type is MetricType.COUNTER:
            metric.sum.is_monotonic = True
            metric.sum.aggregation_temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
            metric.sum.data_points.extend(_counter_points(family, snapshot, time))
        else:
            metric.histogram.aggregation_temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
            metric.histogram.data_points.extend(_histogram_points(family, snapshot, time))
    return ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(
        resource=Resource(attributes=_key_values(resource)), scope_metrics=[scope])])


def _gauge_points(family: NormalizedFamily, time: int) -> Iterable[NumberDataPoint]:
    for sample in family.samples:
        yield NumberDataPoint(attributes=_key_values(_attributes(sample.labels)),
                              time_unix_nano=time, as_double=sample.value)


def _counter_points(family: NormalizedFamily, snapshot: Snapshot, time: int
                    ) -> Iterable[NumberDataPoint]:
    for sample in family.samples:
        if not sample.name.endswith("_total"):
            continue  # a _created sample, if an engine gave one: the start time says it
        start = snapshot.starts.get(series_key(family.name, sample.labels), snapshot.time)
        yield NumberDataPoint(attributes=_key_values(_attributes(sample.labels)),
                              start_time_unix_nano=int(start * _NANOS), time_unix_nano=time,
                              as_double=sample.value)


def _histogram_points(family: NormalizedFamily, snapshot: Snapshot, time: int
                      ) -> Iterable[HistogramDataPoint]:
    buckets: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    sums: dict[tuple[tuple[str, str], ...], float] = {}
    counts: dict[tuple[tuple[str, str], ...], float] = {}
    for sample in family.samples:
        key = series_key(family.name, sample.labels)[1]
        if sample.name.endswith("_bucket"):
            buckets.setdefault(key, {})[float(sample.labels["le"])] = sample.value
        elif sample.name.endswith("_sum"):
            sums[key] = sample.value
        elif sample.name.endswith("_count"):
            counts[key] = sample.value
    for key, cumulative in buckets.items():
        bounds = sorted(le for le in cumulative if not math.isinf(le))
        count = counts.get(key, cumulative.get(math.inf, cumulative[bounds[-1]] if bounds else 0))
        per_bucket: list[int] = []
        below = 0
        for le in bounds:
            at_or_below = round(cumulative[le])
            per_bucket.append(max(0, at_or_below - below))
            below = max(below, at_or_below)
        per_bucket.append(max(0, round(count) - below))  # the +Inf bucket
        point = HistogramDataPoint(
            attributes=_key_values(_attributes(dict(key))),
            start_time_unix_nano=int(snapshot.starts.get((family.name, key), snapshot.time)
                                     * _NANOS),
            time_unix_nano=time, count=max(0, round(count)), explicit_bounds=bounds,
            bucket_counts=per_bucket)
        if key in sums:
            point.sum = sums[key]
        yield point


def _attributes(labels: Mapping[str, str]) -> dict[str, str]:
    return {ATTRIBUTES.get(name, name): value for name, value in labels.items() if name != "le"}


def _key_values(attributes: Mapping[str, str | int]) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(int_value=value) if isinstance(value, int)
                     else AnyValue(string_value=value))
            for key, value in attributes.items()]


class OtlpMetricsPush:
    """Pushes ``bridge.snapshot`` every interval from its own thread (``start``); ``close``
    stops it after a last push bounded by the timeout. Nothing is pushed while the bridge has
    no page (before its first good scrape, after a failed one)."""

    def __init__(self, config: OtlpMetricsConfig, bridge: Bridge, registry: CollectorRegistry,
                 resource: Mapping[str, str | int],
                 headers: Mapping[str, str] | None = None) -> None:
        if config.temporality != "cumulative":
            raise ValueError("the bridge pushes cumulative temporality only (it forwards the "
                             f"engine's cumulative counts), not {config.temporality!r}")
        self.config = config
        self._bridge = bridge
        self._resource = dict(resource)
        target = bridge.config.target
        exports = Counter("inferwatch_bridge_otlp_metrics_exports",
                          "OTLP metrics pushes of the normalized page to the collector by "
                          "result (ok; failed: unreachable, timed out, or a non-2xx answer)",
                          ["target", "result"], registry=registry)
        self.exports = {result: exports.labels(target, result) for result in EXPORT_RESULTS}
        # trust_env off, as for scrapes: straight to the collector, never through an env proxy.
        self._client = httpx.Client(trust_env=False, follow_redirects=False,
                                    timeout=config.timeout_seconds, headers=headers)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="inferwatch-bridge-otlp",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_seconds):
            try:
                self.push_once()
            except Exception:  # a bug must not end the pushes; the next one may work
                logger.exception("OTLP metrics push to %s raised", self.config.endpoint)

    def push_once(self) -> bool | None:
        """One push of the current snapshot: True if the collector took it, False if not,
        None if there was nothing to push."""
        snapshot = self._bridge.snapshot
        if snapshot is None:
            return None
        body = to_request(snapshot, self._resource).SerializeToString()
        try:
            response = self._client.post(self.config.endpoint, content=body,
                                         headers={"content-type": "application/x-protobuf"})
        except httpx.HTTPError as exc:
            return self._failed(f"{type(exc).__name__}: {exc}")
        if not response.is_success:
            return self._failed(f"HTTP {response.status_code}: {response.text[:200]!r}")
        self._warn_partial(response)
        self.exports["ok"].inc()
        if self._last_error is not None:
            logger.info("OTLP metrics pushes to %s work again", self.config.endpoint)
            self._last_error = None
        return True

    def _failed(self, message: str) -> bool:
        self.exports["failed"].inc()
        if message != self._last_error:  # log changes, not every push to a dead collector
            logger.warning("OTLP metrics push to %s failed (%s); counted on "
                           "inferwatch_bridge_otlp_metrics_exports_total",
                           self.config.endpoint, message)
            self._last_error = message
        return False

    def _warn_partial(self, response: httpx.Response) -> None:
        answer = ExportMetricsServiceResponse()
        try:
            answer.ParseFromString(response.content)
        except Exception:  # an empty or JSON body from a lenient collector: accepted
            return
        rejected = answer.partial_success.rejected_data_points
        if rejected:
            logger.warning("OTLP metrics push to %s: the collector rejected %d data points (%s)",
                           self.config.endpoint, rejected, answer.partial_success.error_message)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.config.timeout_seconds + 1)
        try:
            self.push_once()
        finally:
            self._client.close()
