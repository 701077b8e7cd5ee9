"""The gateway's own /metrics: good/total counters and latency histograms, built from
``exporters.schema.GATEWAY_SPECS`` on the registry passed in."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from exporters import schema
from exporters.schema import GATEWAY_SPECS, MetricSpec, MetricType
from monitor.gateway.events import RequestEvent
from monitor.gateway.tenants import TenantBudget, budget_rule



class GatewayMetrics:
    """Records each finished request; the tenant label goes through the budget."""

    def __init__(self, registry: CollectorRegistry, budget: TenantBudget) -> None:
        self.budget = budget
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
        tenant = self.budget.label(event.tenant)
        slo_class = event.slo_class.name
        identity = (event.model, tenant, slo_class)
        self.requests.labels(*identity, event.outcome).inc()
        good = self.good.labels(*identity)  # created for every identity: the ratio has a 0
        if event.good:
            good.inc()
        timing = event.timing
        if timing.prompt_tokens is not None:
            self.prompt_tokens.labels(*identity).inc(timing.prompt_tokens)
        if event.outcome == "ok" or timing.num_token_chunks:
            self.generation_tokens.labels(*identity).inc(timing.num_output_tokens)
        per_class = (event.model, slo_class)
        if (e2e := timing.e2e) is not None:
            self.e2e.labels(*per_class).observe(e2e)
        if event.outcome != "ok":  # latencies of failures would flatter or smear the figures
            return
        if (ttft := timing.ttft) is not None:
            self.ttft.labels(*per_class).observe(ttft)
        if (ttfc := timing.ttfc) is not None:
            self.ttfc.labels(*per_class).observe(ttfc)
        if (tpot := timing.tpot) is not None:
            self.tpot.labels(*per_class).observe(tpot)
        if timing.gaps:
            itl = self.itl.labels(*per_class)
            for gap in timing.gaps:
                itl.observe(gap)


def _counter(spec: MetricSpec, registry: CollectorRegistry, rule: str) -> Counter:
    help_text = f"{spec.help}. {rule}" if schema.TENANT in spec.labels else spec.help
    return Counter(spec.name, help_text, spec.labels, registry=registry)


def _histogram(spec: MetricSpec, registry: CollectorRegistry) -> Histogram:
    assert spec.buckets is not None  # a histogram spec always has them (MetricSpec checks)
    return Histogram(spec.name, spec.help, spec.labels, buckets=spec.buckets, registry=registry)
