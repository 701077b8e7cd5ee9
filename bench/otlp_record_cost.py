"""What the OTLP metrics push adds to the gateway's request path: the CPU time of
``GatewayMetrics.record`` for one finished streamed request, with /metrics alone and with the
OTLP mirror as well, in alternating rounds in one process (the push itself runs on the SDK's
thread; here its interval is an hour, so it never runs and only recording is timed).

    python -m bench.otlp_record_cost
    python -m bench.otlp_record_cost --requests 20000 --rounds 6 --gaps 16
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import CollectorRegistry

from monitor.gateway.config import OtlpMetricsConfig
from monitor.gateway.events import RequestEvent
from monitor.gateway.judge import SloClass
from monitor.gateway.measure import RequestTiming
from monitor.gateway.metrics import GatewayMetrics
from monitor.gateway.otlp_metrics import OtlpMetricsExport
from monitor.gateway.tenants import TenantBudget

UPSTREAM = "http://127.0.0.1:8000"


def event(index: int, num_gaps: int) -> RequestEvent:
    """A finished streamed chat request: 20 ms TTFT, 10 ms gaps, usage read, one of 8 tenants."""
    timing = RequestTiming(arrived_at=0.0, first_token_at=0.02, first_content_at=0.02,
                           last_token_at=0.02 + 0.01 * num_gaps,
                           finished_at=0.021 + 0.01 * num_gaps, gaps=[0.01] * num_gaps,
                           num_token_chunks=num_gaps + 1, prompt_tokens=7,
                           completion_tokens=num_gaps + 1, done=True)
    return RequestEvent(path="/v1/chat/completions", model="tiny", tenant=f"key-{index % 8}",
                        slo_class=SloClass("interactive", 0.8, 0.06), stream=True,
                        timing=timing, good=True)


def seconds_per_record(metrics: GatewayMetrics, events: list[RequestEvent]) -> float:
    started = time.process_time()
    for item in events:
        metrics.record(item)
    return (time.process_time() - started) / len(events)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000, help="per arm and round")
    p.add_argument("--rounds", type=int, default=4, help="each a plain and an OTLP arm")
    p.add_argument("--gaps", type=int, default=15, help="token gaps per request (ITL)")
    args = p.parse_args()
    events = [event(i, args.gaps) for i in range(args.requests)]
    plain = GatewayMetrics(CollectorRegistry(), TenantBudget(20))
    registry = CollectorRegistry()
    export = OtlpMetricsExport(OtlpMetricsConfig("http://127.0.0.1:9/v1/metrics",
                                                 interval_seconds=3600.0), registry, UPSTREAM)
    mirrored = GatewayMetrics(registry, TenantBudget(20), [export])
    arms: dict[str, list[float]] = {"/metrics only": [], "/metrics + OTLP": []}
    try:
        for round_index in range(args.rounds):
            order = [("/metrics only", plain), ("/metrics + OTLP", mirrored)]
            for name, metrics in order if round_index % 2 == 0 else order[::-1]:
                arms[name].append(seconds_per_record(metrics, events))
    finally:
        export.provider.shutdown(timeout_millis=1000)
    base = statistics.median(arms["/metrics only"])
    print(f"{args.requests} requests x {args.rounds} rounds, {args.gaps} gaps each; "
          "CPU per recorded request (median of rounds):")
    for name, values in arms.items():
        median = statistics.median(values)
        print(f"  {name:16} {median * 1e6:8.1f} us  ({median / base:.2f}x)")


if __name__ == "__main__":
    main()
