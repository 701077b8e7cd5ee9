"""One target over a window (``/api/v1/targets/{name}/summary``): what its engine counted,
its gauges and its latency percentiles with their bucket edges, from the scrapes stored in the
window merged into one snapshot (``monitor.store.queries.window``, ``derive``)."""

from __future__ import annotations

import math
from typing import Final

from exporters import schema
from monitor.api.convert import finite
from monitor.api.percentiles import estimate_out
from monitor.api.schemas import GaugeSummaryOut, LatencySummaryOut, TargetSummaryOut
from monitor.collect.derive import QUANTILES, Latency, derive
from monitor.collect.snapshot import Snapshot, TargetState, split_key
from monitor.store import Selector, Store
from monitor.store.queries import window

# The Derived fields of the latencies, and the body's names where they differ.
LATENCIES: Final = ("ttft", "itl", "tpot", "e2e", "queue_wait")
_BODY_NAMES: Final = {"queue_wait": "queue"}


def target_summary(store: Store, name: str, start: float, end: float) -> TargetSummaryOut:
    snapshot = window(store, Selector(target=name), start, end)
    derived = derive(snapshot)
    up = snapshot.state is TargetState.UP

    def count(metric: str) -> float | None:
        return _counter_total(snapshot, metric) if up else None

    return TargetSummaryOut(
        target=name, start=start, end=end, state="up" if up else "down",
        error=snapshot.error, seconds_with_data=snapshot.covered_seconds,
        prompt_tokens=count(schema.PROMPT_TOKENS),
        prompt_tokens_cached=count(schema.PROMPT_TOKENS_CACHED),
        generation_tokens=count(schema.GENERATION_TOKENS),
        requests_finished=count(schema.REQUESTS),
        errors=dict(derived.num_errors), preemptions=count(schema.PREEMPTIONS),
        prompt_tokens_per_second=finite(derived.prompt_tokens_per_second),
        generation_tokens_per_second=finite(derived.generation_tokens_per_second),
        requests_per_second=finite(derived.requests_per_second),
        prefix_cache_hit_ratio=finite(derived.prefix_cache_hit_ratio),
        requests_running=_gauge(snapshot, schema.REQUESTS_RUNNING),
        requests_waiting=_gauge(snapshot, schema.REQUESTS_WAITING),
        kv_cache_usage_ratio=(None if math.isnan(derived.kv_cache_usage_ratio_mean) else
                              GaugeSummaryOut(mean=derived.kv_cache_usage_ratio_mean,
                                              max=derived.kv_cache_usage_ratio_max)),
        latency={_BODY_NAMES.get(field, field): _latency(getattr(derived, field))
                 for field in LATENCIES if not math.isnan(getattr(derived, field).count)})


def _counter_total(snapshot: Snapshot, metric: str) -> float | None:
    """The summed increase of a schema counter; None when the engine has no such series."""
    exposed = schema.get_spec(metric).exposed_name
    values = [v for key, v in snapshot.counters.items() if split_key(key)[0] == exposed]
    return math.fsum(values) if values else None


def _gauge(snapshot: Snapshot, metric: str) -> GaugeSummaryOut | None:
    """A count's gauge summed over its series (engine indexes, models)."""
    stats = [s for key, s in snapshot.gauges.items() if split_key(key)[0] == metric]
    if not stats:
        return None
    return GaugeSummaryOut(mean=math.fsum(s.mean for s in stats),
                           max=math.fsum(s.maximum for s in stats))


def _latency(latency: Latency) -> LatencySummaryOut:
    names = [f"p{round(q * 100)}" for q in QUANTILES]
    return LatencySummaryOut(
        count=latency.count, mean_seconds=finite(latency.mean_seconds),
        percentiles={name: estimate_out(latency.percentiles.estimate(name)) for name in names})
