"""What a Snapshot means: rates, utilisation, percentiles, error ratios and SLI counts.

``derive`` works the same on one interval of one target and on a merged snapshot (a longer
window from ``merge_snapshots``, or several replicas from ``merge_replicas``), and that is the
point: rates are summed increases over the window, ratios are ratios of sums, percentiles come
from merged bucket counts (PromQL's histogram_quantile), never from averaging per-interval or
per-replica values.

Every value is NaN when the window holds no data for it (a DOWN or FIRST snapshot has no
increases; an engine may not export a metric), so "no data" is never read as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from exporters import schema
from exporters.buckets import (
    SLO_THRESHOLDS_SECONDS,
    EstimateKind,
    QuantileEstimate,
    estimate_quantile,
)
from exporters.schema import SCHEMA, MetricType
from monitor.collect.limits import BatchSource, choose, is_configured
from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    SeriesKey,
    Snapshot,
    TargetState,
    merge_deltas,
    split_key,
)

QUANTILES: Final[tuple[float, ...]] = (0.5, 0.9, 0.95, 0.99)
NAN: Final = math.nan

# Gauges that are not amounts: merging replicas pools their readings (a mean across replicas)
# instead of adding them. Everything else (requests running, blocks, bytes, watts, limits
# such as max batch size) adds up across replicas. The token budget is a limit of one step,
# held against the mean tokens of one step (the replicas' steps pooled): pooled too.
_POOLED_UNITS: Final = frozenset({"ratio", "celsius", "hertz"})
POOLED_GAUGES: Final[frozenset[str]] = frozenset(
    {schema.KV_CACHE_BLOCK_SIZE_TOKENS, schema.GPU_UP, schema.BATCHED_TOKENS_MAX}
    | {spec.name for spec in SCHEMA if spec.type is MetricType.GAUGE and spec.unit in _POOLED_UNITS}
)

_T = TypeVar("_T")


_NO_ESTIMATE: Final = QuantileEstimate(NAN, NAN, NAN, EstimateKind.NO_DATA)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """histogram_quantile's numbers (p50..p99, as before), and per quantile of QUANTILES
    what the buckets vouch for (``estimates``: the edges it lies between and whether it is
    a number, an interval or only a bound; ``exporters.buckets.estimate_quantile``)."""

    p50: float
    p90: float
    p95: float
    p99: float
    estimates: tuple[QuantileEstimate, ...] = ()

    @classmethod
    def of(cls, histogram: HistogramDelta | None) -> Percentiles:
        """histogram_quantile over the window's buckets; NaN when nothing was observed."""
        if histogram is None:
            return cls(NAN, NAN, NAN, NAN)
        cumulative = histogram.cumulative()
        found = tuple(estimate_quantile(q, histogram.bounds, cumulative) for q in QUANTILES)
        p50, p90, p95, p99 = (e.value for e in found)
        return cls(p50, p90, p95, p99, found)

    def estimate(self, name: str) -> QuantileEstimate:
        """The estimate of ``p50``/``p90``/``p95``/``p99``; NO_DATA when none was made."""
        index = [f"p{round(q * 100)}" for q in QUANTILES].index(name)
        return self.estimates[index] if self.estimates else _NO_ESTIMATE


@dataclass(frozen=True, slots=True)
class SliCount:
    """Observations at or under a threshold (good) out of all (total)."""

    threshold_seconds: float
    good: float
    total: float

    @property
    def ratio(self) -> float:
        return self.good / self.total if self.total else NAN


@dataclass(frozen=True, slots=True)
class Latency:
    """One latency histogram over the window. ``count`` is NaN when the target does not
    export the histogram, 0 when it does but nothing was observed."""

    count: float
    mean_seconds: float
    percentiles: Percentiles
    # At every SLO threshold that is a bucket bound: exact counts, no interpolation.
    sli: tuple[SliCount, ...]
    # SLO thresholds the engine's buckets lack: no SLI there, rather than an interpolated one.
    thresholds_not_bounds: tuple[float, ...]

    @classmethod
    def of(cls, histogram: HistogramDelta | None) -> Latency:
        if histogram is None:
            return cls(NAN, NAN, Percentiles.of(None), (), ())
        bounds = set(histogram.bounds)
        sli = tuple(SliCount(t, histogram.count_at_most(t), histogram.count)
                    for t in SLO_THRESHOLDS_SECONDS if t in bounds)
        lacking = tuple(t for t in SLO_THRESHOLDS_SECONDS if t not in bounds)
        mean = histogram.sum / histogram.count if histogram.count else NAN
        return cls(histogram.count, mean, Percentiles.of(histogram), sli, lacking)

    def sli_at(self, threshold_seconds: float) -> SliCount | None:
        return next((s for s in self.sli if s.threshold_seconds == threshold_seconds), None)


@dataclass(frozen=True, slots=True)
class Derived:
    """The derived values of one snapshot (see the module docstring)."""

    target: str
    start: float
    end: float
    state: TargetState
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    requests_per_second: float  # requests that finished, any finish reason
    # Mean running requests / max batch size (max_num_seqs, the engine's or the config's);
    # without one, token_budget_utilization. batch_utilization_source says which (None: NaN).
    batch_utilization: float
    kv_cache_usage_ratio_mean: float
    kv_cache_usage_ratio_max: float
    # Prompt tokens found in the prefix cache / looked up, over the window (engines that
    # count lookups: vLLM); a ratio of sums, so replicas weigh by their lookups.
    prefix_cache_hit_ratio: float
    gpu_memory_used_bytes: float  # mean reading, summed over the target's GPUs
    queue_depth_mean: float
    queue_depth_max: float
    queue_wait: Latency
    ttft: Latency
    itl: Latency
    tpot: Latency
    e2e: Latency
    num_requests: float  # finished plus rejected at admission: the error ratios' denominator
    num_errors: Mapping[str, float] = field(default_factory=dict)  # by error_type
    error_ratio: Mapping[str, float] = field(default_factory=dict)  # by error_type
    batch_utilization_source: BatchSource | None = None
    # Mean tokens per engine step / the step's token budget (max_num_batched_tokens); NaN
    # when no step ran in the window (a mean of no steps) or the budget is unknown.
    token_budget_utilization: float = NAN

    @property
    def duration_seconds(self) -> float:
        return self.end - self.start

    def as_dict(self) -> dict[str, float]:
        """Flat name -> value, e.g. ``ttft_p99_seconds``, ``ttft_sli_le_0.2_good``."""
        out = {name: float(getattr(self, name)) for name in _SCALARS}
        for prefix in ("queue_wait", "ttft", "itl", "tpot", "e2e"):
            latency: Latency = getattr(self, prefix)
            out[f"{prefix}_count"] = latency.count
            out[f"{prefix}_mean_seconds"] = latency.mean_seconds
            for q in ("p50", "p90", "p95", "p99"):
                out[f"{prefix}_{q}_seconds"] = getattr(latency.percentiles, q)
            for sli in latency.sli:
                out[f"{prefix}_sli_le_{sli.threshold_seconds:g}_good"] = sli.good
                out[f"{prefix}_sli_le_{sli.threshold_seconds:g}_total"] = sli.total
        for error_type, ratio in self.error_ratio.items():
            out[f"error_ratio_{error_type}"] = ratio
        return out


_SCALARS: Final = (
    "prompt_tokens_per_second", "generation_tokens_per_second", "requests_per_second",
    "batch_utilization", "token_budget_utilization", "kv_cache_usage_ratio_mean",
    "kv_cache_usage_ratio_max", "prefix_cache_hit_ratio", "gpu_memory_used_bytes",
    "queue_depth_mean", "queue_depth_max", "num_requests", "duration_seconds",
)


class _View:
    """A snapshot's series by metric name, optionally only those carrying given labels."""

    def __init__(self, snapshot: Snapshot, where: Mapping[str, str] | None) -> None:
        self.counters = _by_name(snapshot.counters, where)
        self.gauges = _by_name(snapshot.gauges, where)
        self.histograms = _by_name(snapshot.histograms, where)

    def counter_total(self, name: str) -> float:
        """Summed increase of a schema counter; NaN when the snapshot has no such series."""
        series = self.counters.get(schema.get_spec(name).exposed_name)
        return sum(value for _, value in series) if series else NAN

    def gauge_means(self, name: str) -> list[float]:
        return [stats.mean for _, stats in self.gauges.get(name, ())]

    def gauge_stats(self, name: str) -> list[GaugeStats]:
        return [stats for _, stats in self.gauges.get(name, ())]

    def histogram(self, name: str) -> HistogramDelta | None:
        return merge_histograms(delta for _, delta in self.histograms.get(name, ()))


def _by_name(series: Mapping[SeriesKey, _T],
             where: Mapping[str, str] | None) -> dict[str, list[tuple[dict[str, str], _T]]]:
    out: dict[str, list[tuple[dict[str, str], _T]]] = {}
    for key, value in series.items():
        name, labels = split_key(key)
        if where and any(labels.get(k) != v for k, v in where.items()):
            continue
        out.setdefault(name, []).append((labels, value))
    return out


def merged_histogram(snapshot: Snapshot, name: str) -> HistogramDelta | None:
    """All of the snapshot's ``name`` histograms merged (replicas, models), as derive merges
    them; None when the target does not export it."""
    return _View(snapshot, None).histogram(name)


def derive(snapshot: Snapshot, where: Mapping[str, str] | None = None) -> Derived:
    """Derived values of ``snapshot``, over the series carrying the ``where`` labels (all series
    if None; GPU series carry no model label, so a model filter leaves them out)."""
    view = _View(snapshot, where)
    duration = snapshot.covered_seconds  # a gap in a merged window does not dilute rates
    num_finished = view.counter_total(schema.REQUESTS)
    errors, num_requests, ratios = _errors(view, num_finished)
    waiting = view.gauge_stats(schema.REQUESTS_WAITING)
    kv_mean, kv_max = _kv_usage(view)
    token_utilization = _token_budget_utilization(view)
    batch_utilization, batch_source = choose(*_seq_utilization(view), token_utilization)
    return Derived(
        target=snapshot.target, start=snapshot.start, end=snapshot.end, state=snapshot.state,
        prompt_tokens_per_second=_per_second(view.counter_total(schema.PROMPT_TOKENS), duration),
        generation_tokens_per_second=_per_second(
            view.counter_total(schema.GENERATION_TOKENS), duration),
        requests_per_second=_per_second(num_finished, duration),
        batch_utilization=batch_utilization,
        batch_utilization_source=batch_source,
        token_budget_utilization=token_utilization,
        kv_cache_usage_ratio_mean=kv_mean,
        kv_cache_usage_ratio_max=kv_max,
        prefix_cache_hit_ratio=_ratio(view.counter_total(schema.PREFIX_CACHE_HITS),
                                      view.counter_total(schema.PREFIX_CACHE_QUERIES)),
        gpu_memory_used_bytes=_sum(view.gauge_means(schema.GPU_MEMORY_USED_BYTES)),
        # Several series (engine indexes): the sum of maxima, an upper bound of the max of sums.
        queue_depth_mean=_sum([stats.mean for stats in waiting]),
        queue_depth_max=_sum([stats.maximum for stats in waiting]),
        queue_wait=Latency.of(view.histogram(schema.REQUEST_QUEUE_TIME)),
        ttft=Latency.of(view.histogram(schema.TIME_TO_FIRST_TOKEN)),
        itl=Latency.of(view.histogram(schema.INTER_TOKEN_LATENCY)),
        tpot=Latency.of(view.histogram(schema.TIME_PER_OUTPUT_TOKEN)),
        e2e=Latency.of(view.histogram(schema.REQUEST_DURATION)),
        num_requests=num_requests, num_errors=errors, error_ratio=ratios,
    )


def _seq_utilization(view: _View) -> tuple[float, bool]:
    """Running requests over the sequence limits (a ratio of sums: engine cores and replicas
    weigh by their limit), and whether a limit came from the config."""
    limits = view.gauges.get(schema.BATCH_SIZE_MAX, [])
    utilization = _ratio(_sum(view.gauge_means(schema.REQUESTS_RUNNING)),
                         _sum([stats.mean for _, stats in limits]))
    return utilization, any(is_configured(labels) for labels, _ in limits)


def _token_budget_utilization(view: _View) -> float:
    """Mean tokens per engine step (the histogram's sum over its count) over the mean
    token budget of the series (one step's budget: pooled, not added up)."""
    steps = view.histogram(schema.ITERATION_TOKENS)
    budgets = view.gauge_means(schema.BATCHED_TOKENS_MAX)
    if steps is None or not steps.count > 0 or not budgets:
        return NAN
    return _ratio(steps.sum / steps.count, math.fsum(budgets) / len(budgets))


def _per_second(increase: float, duration: float) -> float:
    return increase / duration if duration > 0 else NAN


def _errors(view: _View, num_finished: float) -> tuple[dict[str, float], float,
                                                      dict[str, float]]:
    """Errors by type, the denominator (finished + rejected) and the ratios; a ratio is NaN
    when no request was seen, empty when the engine exports no error counter."""
    name = schema.get_spec(schema.REQUEST_ERRORS).exposed_name
    errors: dict[str, float] = {}
    for labels, value in view.counters.get(name, ()):
        error_type = labels.get(schema.ERROR_TYPE, "")
        errors[error_type] = errors.get(error_type, 0.0) + value
    num_requests = num_finished + errors.get("rejected", 0.0)
    ratios = {error_type: _ratio(count, num_requests) for error_type, count in errors.items()}
    return errors, num_requests, ratios


def _kv_usage(view: _View) -> tuple[float, float]:
    """Mean and max KV-cache usage. From used and capacity blocks where the engine gives both
    (a ratio of sums: several engines or replicas weighted by their capacity; the max is the
    highest used reading over the mean capacity, exact while capacity is fixed); else from
    the usage ratio gauge: the mean of its series' means and the highest reading."""
    used = view.gauge_stats(schema.KV_CACHE_BLOCKS_USED)
    capacity = _sum(view.gauge_means(schema.KV_CACHE_BLOCKS_CAPACITY))
    if used and capacity > 0:
        return (_ratio(_sum([s.mean for s in used]), capacity),
                _ratio(_sum([s.maximum for s in used]), capacity))
    ratios = view.gauge_stats(schema.KV_CACHE_USAGE_RATIO)
    if not ratios:
        return NAN, NAN
    return _sum([s.mean for s in ratios]) / len(ratios), max(s.maximum for s in ratios)


def _sum(values: Sequence[float]) -> float:
    return math.fsum(values) if values else NAN


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else NAN


def merge_histograms(deltas: Iterable[HistogramDelta]) -> HistogramDelta | None:
    """The sum of several histogram deltas (series or replicas); None if there are none."""
    parts = list(deltas)
    return merge_deltas(parts) if parts else None


def merge_replicas(target: str, snapshots: Iterable[Snapshot]) -> Snapshot:
    """One interval of several targets (replicas of one label selection) as one snapshot.

    Counters and histogram deltas add up. Gauges of one series add up (the mean of the sum
    is the sum of the means; min and max become the sums of minima and maxima, exact for one
    reading per replica), except POOLED_GAUGES (ratios such as KV usage, temperatures,
    clocks), whose readings are pooled: their mean is the mean over replicas. ``derive``
    computes KV usage from the summed used and capacity blocks where both exist, which
    weights replicas by their capacity. The window is the replicas' mean start and end, so
    that summed increases over it are the sum of the replicas' rates. Replicas that are down
    or FIRST add nothing to the increases and are named in ``error``.
    """
    parts = sorted(snapshots, key=lambda s: s.target)
    if not parts:
        raise ValueError(f"merge_replicas({target!r}): no snapshots to merge")
    up = [s for s in parts if s.state is TargetState.UP]
    timed = up or parts
    start = math.fsum(s.start for s in timed) / len(timed)
    end = math.fsum(s.end for s in timed) / len(timed)
    counters: dict[SeriesKey, float] = {}
    gauges: dict[SeriesKey, list[GaugeStats]] = {}
    histograms: dict[SeriesKey, list[HistogramDelta]] = {}
    for part in parts:
        for key, value in part.counters.items():
            counters[key] = counters.get(key, 0.0) + value
        for key, stats in part.gauges.items():
            gauges.setdefault(key, []).append(stats)
        for key, delta in part.histograms.items():
            histograms.setdefault(key, []).append(delta)
    merged_histograms = {key: h for key, deltas in histograms.items()
                         if (h := merge_histograms(deltas)) is not None}
    merged_gauges = {key: _combine_gauges(key, stats) for key, stats in gauges.items()}
    state, error = _replica_state(parts)
    return Snapshot(target, start, end, state, error, counters, merged_gauges, merged_histograms)


def _combine_gauges(key: SeriesKey, parts: list[GaugeStats]) -> GaugeStats:
    if len(parts) == 1:
        return parts[0]
    if key.partition("{")[0] in POOLED_GAUGES:
        return GaugeStats(math.fsum(p.last for p in parts) / len(parts),
                          math.fsum(p.total for p in parts), sum(p.num_readings for p in parts),
                          min(p.minimum for p in parts), max(p.maximum for p in parts))
    num_readings = max(p.num_readings for p in parts)
    return GaugeStats(math.fsum(p.last for p in parts),
                      math.fsum(p.mean for p in parts) * num_readings, num_readings,
                      math.fsum(p.minimum for p in parts), math.fsum(p.maximum for p in parts))


def _replica_state(parts: Sequence[Snapshot]) -> tuple[TargetState, str | None]:
    states = {part.state for part in parts}
    state = next(s for s in (TargetState.UP, TargetState.FIRST, TargetState.DOWN) if s in states)
    lagging = [f"{p.target} ({p.state.value})" for p in parts if p.state is not TargetState.UP]
    if not lagging:
        return state, None
    return state, (f"{len(lagging)} of {len(parts)} replicas without increases: "
                   + ", ".join(lagging))
