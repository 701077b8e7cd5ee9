"""The metrics the anomaly detectors watch on each target, one value per step, read from the
store with the series queries (one query per metric for any number of steps, so a restart
reloads weeks of history as cheaply as it reads the last minute).

Offered load is estimated from what the engine saw: requests finished and rejected per second
plus the growth of requests in flight (waiting + running) over the step, so a server that
falls behind (queue growing) is still seen as offered the same load.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from exporters import schema
from exporters.buckets import QuantileEstimate
from monitor.anomaly.detectors import Direction
from monitor.collect.derive import Percentiles
from monitor.collect.limits import CONFIGURED, LIMIT_SOURCE, BatchSource, choose
from monitor.collect.snapshot import GaugeStats, HistogramDelta
from monitor.store import Selector, Store
from monitor.store.queries import counter_series, gauge_series, histogram_series

THROUGHPUT: Final = "tokens_per_second"
OUTPUT_THROUGHPUT: Final = "output_tokens_per_second"  # shown by the API, not scored
OFFERED_LOAD: Final = "offered_requests_per_second"
PREFIX_CACHE_HIT_RATIO: Final = "prefix_cache_hit_ratio"  # shown by the API, not scored
TOKEN_BUDGET_UTILIZATION: Final = "token_budget_utilization"  # shown by the API, not scored


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    direction: Direction
    absolute_floor: float    # the smallest spread that counts (a quiet series has MAD 0)
    unit: str = ""
    load_aware: bool = False  # rises with the offered load: judged at the load (load_curve)
    # Extreme points in a row that alert at once: 2 for a step's p99, which is about its
    # slowest request (one slow request is not an incident), 1 for the rest.
    extreme_points: int = 1


# Scored one by one (robust scores); throughput has its own ratio detector.
SCORED: Final[tuple[Feature, ...]] = (
    Feature(OFFERED_LOAD, Direction.DOWN, 0.05, "req/s"),
    Feature("ttft_p99_seconds", Direction.UP, 0.005, "s", load_aware=True,
            extreme_points=2),
    Feature("itl_p99_seconds", Direction.UP, 0.001, "s", load_aware=True,
            extreme_points=2),
    Feature("e2e_p99_seconds", Direction.UP, 0.05, "s", load_aware=True,
            extreme_points=2),
    Feature("kv_cache_usage_ratio", Direction.UP, 0.02, load_aware=True),
    Feature("queue_depth", Direction.UP, 1.0, "requests", load_aware=True),
    Feature("error_ratio", Direction.UP, 0.01),
    Feature("gpu_memory_used_bytes", Direction.UP, 64 * 2**20, "bytes"),
    Feature("preemptions_per_second", Direction.UP, 0.1, "1/s", load_aware=True),
)
# The multivariate detector's vector (batch utilization only there and in diagnosis).
VECTOR: Final[tuple[str, ...]] = (
    THROUGHPUT, OFFERED_LOAD, "ttft_p99_seconds", "itl_p99_seconds", "kv_cache_usage_ratio",
    "queue_depth", "error_ratio", "preemptions_per_second", "batch_utilization",
)


Row = dict[str, float]


def read_features(store: Store, target: str, start: float, end: float, step: float
                  ) -> list[tuple[float, Row]]:
    """(step end, features) for the steps of (start, end]; a feature is NaN where the target
    did not answer or does not export it. One step before ``start`` is read too (the growth
    of requests in flight over the first step needs its end), so reading a range in pieces
    gives the same rows as reading it at once."""
    selector = Selector(target=target)
    start -= step

    def counter_points(metric: str, where: dict[str, str] | None = None
                       ) -> list[tuple[float, float | None]]:
        name = schema.get_spec(metric).exposed_name
        return counter_series(store, selector, name, start, end, step, where)

    def counter(metric: str, where: dict[str, str] | None = None) -> list[float]:
        return [_num(v) for _, v in counter_points(metric, where)]

    def gauge(metric: str) -> list[GaugeStats | None]:
        return [v for _, v in gauge_series(store, selector, metric, start, end, step)]

    def histogram(metric: str) -> list[HistogramDelta | None]:
        return [v for _, v in histogram_series(store, selector, metric, start, end, step)]

    def p99(metric: str) -> list[float]:
        return [_p99(v) for _, v in histogram_series(store, selector, metric, start, end,
                                                     step)]

    finished_points = counter_points(schema.REQUESTS)
    ends = [t for t, _ in finished_points]
    finished = [_num(v) for _, v in finished_points]
    prompt = counter(schema.PROMPT_TOKENS)
    generated = counter(schema.GENERATION_TOKENS)
    errors = counter(schema.REQUEST_ERRORS)
    rejected = counter(schema.REQUEST_ERRORS, {schema.ERROR_TYPE: "rejected"})
    preemptions = counter(schema.PREEMPTIONS)
    cache_hits = counter(schema.PREFIX_CACHE_HITS)
    cache_queries = counter(schema.PREFIX_CACHE_QUERIES)
    running, waiting = gauge(schema.REQUESTS_RUNNING), gauge(schema.REQUESTS_WAITING)
    batch_max, kv = gauge(schema.BATCH_SIZE_MAX), gauge(schema.KV_CACHE_USAGE_RATIO)
    memory = gauge(schema.GPU_MEMORY_USED_BYTES)
    step_tokens, budget = histogram(schema.ITERATION_TOKENS), gauge(schema.BATCHED_TOKENS_MAX)
    ttft, itl = p99(schema.TIME_TO_FIRST_TOKEN), p99(schema.INTER_TOKEN_LATENCY)
    e2e = p99(schema.REQUEST_DURATION)
    rows: list[tuple[float, Row]] = []
    previous_in_flight = math.nan
    for k, t in enumerate(ends):
        seconds = t - ends[k - 1] if k else step
        in_flight = _last(running[k]) + _last(waiting[k])
        growth = in_flight - previous_in_flight if not math.isnan(previous_in_flight) else 0.0
        previous_in_flight = in_flight
        requests = finished[k] + _zero_if_nan(rejected[k], finished[k])  # finished + rejected
        token_utilization = _token_utilization(step_tokens[k], budget[k])
        rows.append((t, {
            THROUGHPUT: (prompt[k] + generated[k]) / seconds,
            OUTPUT_THROUGHPUT: generated[k] / seconds,
            OFFERED_LOAD: max(requests + _zero_if_nan(growth, requests), 0.0) / seconds,
            "ttft_p99_seconds": ttft[k],
            "itl_p99_seconds": itl[k],
            "e2e_p99_seconds": e2e[k],
            "kv_cache_usage_ratio": _stat(kv[k], lambda g: g.maximum),
            "queue_depth": _stat(waiting[k], lambda g: g.mean),
            "error_ratio": (_zero_if_nan(errors[k], finished[k]) / requests
                            if requests > 0 else math.nan),
            "gpu_memory_used_bytes": _stat(memory[k], lambda g: g.mean),
            "preemptions_per_second": _zero_if_nan(preemptions[k], finished[k]) / seconds,
            "batch_utilization": choose(_utilization(running[k], batch_max[k]), False,
                                        token_utilization)[0],
            TOKEN_BUDGET_UTILIZATION: token_utilization,
            PREFIX_CACHE_HIT_RATIO: (cache_hits[k] / cache_queries[k]
                                     if cache_queries[k] > 0 else math.nan),
        }))
    return rows[1:]


# Percentile features -> (histogram, quantile): what ``read_percentile_estimates`` reads.
PERCENTILE_FEATURES: Final[dict[str, tuple[str, str]]] = {
    "ttft_p99_seconds": (schema.TIME_TO_FIRST_TOKEN, "p99"),
    "itl_p99_seconds": (schema.INTER_TOKEN_LATENCY, "p99"),
    "e2e_p99_seconds": (schema.REQUEST_DURATION, "p99"),
}


def read_percentile_estimates(store: Store, target: str, feature: str, start: float,
                              end: float, step: float) -> dict[float, QuantileEstimate]:
    """Step end (rounded to ms) -> the estimate behind a percentile feature's value, for the
    steps of (start, end] that observed something: the bucket edges around it and whether
    it is a number or only a bound (``exporters.buckets.estimate_quantile``)."""
    histogram, quantile = PERCENTILE_FEATURES[feature]
    found: dict[float, QuantileEstimate] = {}
    for t, delta in histogram_series(store, Selector(target=target), histogram, start, end,
                                     step):
        if delta is not None and delta.count > 0:
            found[round(t, 3)] = Percentiles.of(delta).estimate(quantile)
    return found


def vector(row: Row, names: Sequence[str] = VECTOR) -> list[float]:
    return [row.get(name, math.nan) for name in names]


def _num(value: float | None) -> float:
    return math.nan if value is None else value


def _zero_if_nan(value: float, reference: float) -> float:
    """A counter the target does not export reads NaN; while the target answers (the
    reference is a number), it counts as none happened."""
    return 0.0 if math.isnan(value) and not math.isnan(reference) else value


def _last(stats: GaugeStats | None) -> float:
    return stats.last if stats is not None else math.nan


def _stat(stats: GaugeStats | None, pick: Callable[[GaugeStats], float]) -> float:
    return pick(stats) if stats is not None and stats.num_readings else math.nan


def _p99(delta: HistogramDelta | None) -> float:
    if delta is None or delta.count <= 0:
        return math.nan
    return Percentiles.of(delta).p99


def _utilization(running: GaugeStats | None, limit: GaugeStats | None) -> float:
    if running is None or limit is None or not limit.mean > 0:
        return math.nan
    return running.mean / limit.mean


def _token_utilization(steps: HistogramDelta | None, budget: GaugeStats | None) -> float:
    """Mean tokens per engine step over the token budget; NaN without a step or a budget."""
    if steps is None or not steps.count > 0 or budget is None or not budget.mean > 0:
        return math.nan
    return steps.sum / steps.count / budget.mean


def batch_utilization_sources(store: Store, target: str, start: float, end: float,
                              step: float) -> list[tuple[float, BatchSource | None]]:
    """(step end, what ``batch_utilization`` of that step of ``read_features`` is computed
    against): the engine's sequence limit, the configured one (monitor/collect/limits.py),
    the token budget, or None where it has no value."""
    selector = Selector(target=target)

    def gauge(metric: str, where: dict[str, str] | None = None) -> list[GaugeStats | None]:
        return [v for _, v in gauge_series(store, selector, metric, start, end, step, where)]

    running, limit = gauge(schema.REQUESTS_RUNNING), gauge(schema.BATCH_SIZE_MAX)
    configured = gauge(schema.BATCH_SIZE_MAX, {LIMIT_SOURCE: CONFIGURED})
    budget = gauge(schema.BATCHED_TOKENS_MAX)
    step_tokens = histogram_series(store, selector, schema.ITERATION_TOKENS, start, end, step)
    return [(t, choose(_utilization(running[k], limit[k]), configured[k] is not None,
                       _token_utilization(tokens, budget[k]))[1])
            for k, (t, tokens) in enumerate(step_tokens)]
