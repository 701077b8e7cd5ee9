"""The gateway's own /metrics: good/total counters and latency histograms, built from
``exporters.schema.GATEWAY_SPECS`` on the registry passed in.

What a finished request adds is decided once (``observe``) and handed to every export: the
Prometheus page here and any mirror (the OTLP metrics push, ``otlp_metrics.py``), so both
count the same observations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from exporters import schema
from exporters.schema import GATEWAY_SPECS, MetricSpec, MetricType
from monitor.gateway.events import RequestEvent
from monitor.gateway.tenants import TenantBudget, budget_rule


@dataclass(frozen=True, slots=True)
class Observed:
    """What one finished request adds to the gateway's metrics; None: nothing for that one."""

    tenant: str  # the label value, after the cardinality budget
    prompt_tokens: int | None
    generation_tokens: int | None
    e2e: float | None  # any outcome
    ttft: float | None  # this and below: successful requests only
    ttfc: float | None
    tpot: float | None
    gaps: Sequence[float]


def observe(event: RequestEvent, tenant: str) -> Observed:
    timing = event.timing
    generated = event.outcome == "ok" or timing.num_token_chunks > 0
    ok = event.outcome == "ok"  # latencies of failures would flatter or smear the figures
    return Observed(
        tenant=tenant, prompt_tokens=timing.prompt_tokens,
        generation_tokens=timing.num_output_tokens if generated else None, e2e=timing.e2e,
        ttft=timing.ttft if ok else None, ttfc=timing.ttfc if ok else None,
        tpot=timing.tpot if ok else None, gaps=timing.gaps if ok else ())


class MetricsMirror(Protocol):
    """Another export of the same observations; called on the request path, so it must not
    block (record in memory, push from its own thread)."""

    def record(self, event: RequestEvent, observed: Observed) -> None: ...


class GatewayMetrics:
    """Records each finished request; the tenant label goes through the budget."""

    def __init__(self, registry: CollectorRegistry, budget: TenantBudget,
                 mirrors: Sequence[MetricsMirror] = ()) -> None:
        self.budget = budget
        self.mirrors = list(mirrors)
        rule = budget_rule(budget.max_tenants)
        counters = {spec.name: _counter(spec, registry, rule) for spec in GATEWAY_SPECS
                    if spec.type is MetricType.COUNTER}
        histograms = {spec.name: _histogram(spec, registry) for spec in GATEWAY_SPECS
                      if spec.type is MetricType.HISTOGRAM}
        self.requests = counters[schema.GATEWAY_REQUESTS]
        self.good = counters[schema.GATEWAY_GOOD_REQUESTS]
        self.prompt_tokens = counters[schema.GATEWAY_PROMPT_TOKENS]
        self.generation_tokens = counters[schema.GATEWAY_GENERATION_TOKENS]
        self.ttft = histograms[schema.GATEWAY_TIME_TO_FIRST_TOKEN]
        self.ttfc = histograms[schema.GATEWAY_TIME_TO_FIRST_CONTENT_TOKEN]
        self.itl = histograms[schema.GATEWAY_INTER_TOKEN_LATENCY]
        self.tpot = histograms[schema.GATEWAY_TIME_PER_OUTPUT_TOKEN]
        self.e2e = histograms[schema.GATEWAY_REQUEST_DURATION]

    def record(self, event: RequestEvent) -> None:
        observed = observe(event, self.budget.label(event.tenant))
        self._record(event, observed)
        for mirror in self.mirrors:
            mirror.record(event, observed)

    def _record(self, event: RequestEvent, observed: Observed) -> None:
        slo_class = event.slo_class.name
        identity = (event.model, observed.tenant, slo_class)
        self.requests.labels(*identity, event.outcome).inc()
        good = self.good.labels(*identity)  # created for every identity: the ratio has a 0
        if event.good:
            good.inc()
        if observed.prompt_tokens is not None:
            self.prompt_tokens.labels(*identity).inc(observed.prompt_tokens)
        if observed.generation_tokens is not None:
            self.generation_tokens.labels(*identity).inc(observed.generation_tokens)
        per_class = (event.model, slo_class)
        for histogram, value in ((self.e2e, observed.e2e), (self.ttft, observed.ttft),
                                 (self.ttfc, observed.ttfc), (self.tpot, observed.tpot)):
            if value is not None:
                histogram.labels(*per_class).observe(value)
        if observed.gaps:
            itl = self.itl.labels(*per_class)
            for gap in observed.gaps:
                itl.observe(gap)


def _counter(spec: MetricSpec, registry: CollectorRegistry, rule: str) -> Counter:
    help_text = f"{spec.help}. {rule}" if schema.TENANT in spec.labels else spec.help
    return Counter(spec.name, help_text, spec.labels, registry=registry)


def _histogram(spec: MetricSpec, registry: CollectorRegistry) -> Histogram:
    assert spec.buckets is not None  # a histogram spec always has them (MetricSpec checks)
    return Histogram(spec.name, spec.help, spec.labels, buckets=spec.buckets, registry=registry)
