"""Derived values from snapshots, with every expected number worked out by hand."""

from __future__ import annotations

import math

import pytest

from exporters import schema
from exporters.buckets import interpolate_quantile
from monitor.collect.derive import Percentiles, derive, merge_histograms, merge_replicas
from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    SeriesKey,
    Snapshot,
    TargetState,
    merge_snapshots,
    series_key,
)

UP, FIRST, DOWN = TargetState.UP, TargetState.FIRST, TargetState.DOWN
T0 = 1_700_000_000.0


def counter(name: str, **labels: str) -> SeriesKey:
    return series_key(schema.get_spec(name).exposed_name, {"model": "m", **labels})


def key(name: str, **labels: str) -> SeriesKey:
    return series_key(name, {"model": "m", **labels})


def snap(target: str = "t", start: float = T0, seconds: float = 30.0, state: TargetState = UP,
         counters: dict[SeriesKey, float] | None = None,
         gauges: dict[SeriesKey, GaugeStats] | None = None,
         histograms: dict[SeriesKey, HistogramDelta] | None = None) -> Snapshot:
    return Snapshot(target, start, start + seconds, state, None, counters or {}, gauges or {},
                    histograms or {})


# Bounds 0.1 0.2 0.5 1.0 (+Inf); 100 observations, cumulative 10 70 94 100 100.
TTFT = HistogramDelta((0.1, 0.2, 0.5, 1.0), (10, 60, 24, 6, 0), sum=30.0, count=100)


def test_rates_are_increases_over_the_snapshot_duration() -> None:
    d = derive(snap(seconds=30, counters={
        counter(schema.GENERATION_TOKENS): 900,
        counter(schema.PROMPT_TOKENS): 400, counter(schema.PROMPT_TOKENS, model="other"): 200,
        counter(schema.REQUESTS, finish_reason="stop"): 20,
        counter(schema.REQUESTS, finish_reason="length"): 10,
    }))
    assert d.generation_tokens_per_second == 30.0  # 900 tokens / 30 s
    assert d.prompt_tokens_per_second == 20.0  # (400 + 200) / 30 s, both models
    assert d.requests_per_second == 1.0  # (20 + 10) / 30 s over finish reasons


def test_a_label_filter_keeps_only_the_matching_series() -> None:
    s = snap(seconds=10, counters={counter(schema.PROMPT_TOKENS): 400,
                                   counter(schema.PROMPT_TOKENS, model="other"): 200})
    assert derive(s, where={"model": "other"}).prompt_tokens_per_second == 20.0


def test_percentiles_interpolate_inside_buckets_like_histogram_quantile() -> None:
    p = derive(snap(histograms={key(schema.TIME_TO_FIRST_TOKEN): TTFT})).ttft.percentiles
    # p50: rank 50 lies in (0.1, 0.2] holding 60, 40 past its start: 0.1 + 0.1 * 40/60
    assert p.p50 == pytest.approx(0.1 + 0.1 * 40 / 60)
    # p90: rank 90 in (0.2, 0.5] holding 24, 20 past its start: 0.2 + 0.3 * 20/24 = 0.45
    assert p.p90 == pytest.approx(0.45)
    # p95 and p99: ranks 95, 99 in (0.5, 1.0] holding 6, 1 and 5 past its start
    assert p.p95 == pytest.approx(0.5 + 0.5 * 1 / 6)
    assert p.p99 == pytest.approx(0.5 + 0.5 * 5 / 6)
    assert p.p99 == interpolate_quantile(0.99, [0.1, 0.2, 0.5, 1.0, math.inf],
                                         [10, 70, 94, 100, 100])


def test_sli_counts_are_exact_at_bucket_bounds_and_absent_where_the_bounds_lack_one() -> None:
    ttft = derive(snap(histograms={key(schema.TIME_TO_FIRST_TOKEN): TTFT})).ttft
    sli = ttft.sli_at(0.2)
    assert sli is not None and (sli.good, sli.total) == (70, 100)  # 10 + 60 at or under 0.2 s
    assert [s.threshold_seconds for s in ttft.sli] == [0.1, 0.2, 0.5, 1.0]
    assert ttft.thresholds_not_bounds == (0.25, 2.0, 5.0)  # never interpolated
    assert ttft.sli_at(0.25) is None
    assert (ttft.count, ttft.mean_seconds) == (100, 0.3)


def test_a_window_without_observations_has_nan_percentiles_and_zero_counts() -> None:
    empty = HistogramDelta((0.1, 0.2), (0, 0, 0), 0.0, 0.0)
    d = derive(snap(histograms={key(schema.TIME_TO_FIRST_TOKEN): empty}))
    assert math.isnan(d.ttft.percentiles.p99) and d.ttft.count == 0
    assert d.ttft.sli_at(0.2) is not None and math.isnan(d.ttft.sli[0].ratio)
    assert math.isnan(d.itl.count)  # not exported at all: NaN, not 0


def test_error_ratios_over_a_merged_window_are_ratios_of_sums_not_means_of_ratios() -> None:
    busy = snap(start=T0, counters={
        counter(schema.REQUESTS, finish_reason="stop"): 90,
        counter(schema.REQUESTS, finish_reason="error"): 10,
        counter(schema.REQUEST_ERRORS, error_type="timeout"): 10})
    quiet = snap(start=T0 + 30, counters={
        counter(schema.REQUESTS, finish_reason="stop"): 5,
        counter(schema.REQUESTS, finish_reason="error"): 5,
        counter(schema.REQUEST_ERRORS, error_type="oom"): 5,
        counter(schema.REQUEST_ERRORS, error_type="rejected"): 10})
    a, b = derive(busy), derive(quiet)
    assert a.error_ratio == {"timeout": 0.1}  # 10 / 100
    assert b.error_ratio == {"oom": 0.25, "rejected": 0.5}  # 5 / (10 + 10), 10 / 20
    merged = derive(merge_snapshots("t", [busy, quiet]))
    # 110 finished + 10 rejected = 120 requests over the minute
    assert merged.num_requests == 120
    assert merged.error_ratio["timeout"] == pytest.approx(10 / 120)  # mean of ratios: 0.05
    assert merged.error_ratio["oom"] == pytest.approx(5 / 120)  # mean of ratios: 0.125
    assert sum(merged.error_ratio.values()) == pytest.approx(25 / 120)  # not (0.1 + 0.75) / 2
    assert merged.requests_per_second == pytest.approx(110 / 60)


def test_gauges_give_batch_utilization_kv_usage_queue_depth_and_gpu_memory() -> None:
    gauges = {
        key(schema.REQUESTS_RUNNING): GaugeStats.of(6),
        key(schema.BATCH_SIZE_MAX): GaugeStats.of(8),
        key(schema.REQUESTS_WAITING): GaugeStats.of(2).merge(GaugeStats.of(6)),
        key(schema.KV_CACHE_USAGE_RATIO): GaugeStats.of(0.2).merge(GaugeStats.of(0.6)),
        series_key(schema.GPU_MEMORY_USED_BYTES, {"gpu": "0", "uuid": "a"}): GaugeStats.of(3e9),
        series_key(schema.GPU_MEMORY_USED_BYTES, {"gpu": "1", "uuid": "b"}): GaugeStats.of(5e9),
    }
    d = derive(snap(gauges=gauges))
    assert d.batch_utilization == 0.75  # 6 running of 8
    assert (d.queue_depth_mean, d.queue_depth_max) == (4, 6)
    assert (d.kv_cache_usage_ratio_mean, d.kv_cache_usage_ratio_max) == pytest.approx((0.4, 0.6))
    assert d.gpu_memory_used_bytes == 8e9  # both GPUs of the target


def test_kv_usage_prefers_used_over_capacity_blocks() -> None:
    gauges = {key(schema.KV_CACHE_BLOCKS_USED): GaugeStats.of(100).merge(GaugeStats.of(300)),
              key(schema.KV_CACHE_BLOCKS_CAPACITY): GaugeStats.of(1000),
              key(schema.KV_CACHE_USAGE_RATIO): GaugeStats.of(0.99)}
    d = derive(snap(gauges=gauges))
    assert (d.kv_cache_usage_ratio_mean, d.kv_cache_usage_ratio_max) == (0.2, 0.3)


@pytest.mark.parametrize("state", [DOWN, FIRST], ids=["down", "first"])
def test_a_snapshot_without_increases_has_no_rates(state: TargetState) -> None:
    s = snap(state=state, gauges={key(schema.REQUESTS_WAITING): GaugeStats.of(3)})
    d = derive(s)
    assert math.isnan(d.generation_tokens_per_second) and math.isnan(d.requests_per_second)
    assert d.error_ratio == {} and math.isnan(d.ttft.percentiles.p50)
    assert d.queue_depth_mean == 3  # a FIRST snapshot's gauges are real readings


def test_merged_replicas_give_percentiles_of_merged_buckets_not_means_of_percentiles() -> None:
    bounds = (0.1, 0.2, 0.5, 1.0)
    fast = HistogramDelta(bounds, (0, 100, 0, 0, 0), 15.0, 100)  # all in (0.1, 0.2]
    slow = HistogramDelta(bounds, (0, 0, 0, 100, 0), 75.0, 100)  # all in (0.5, 1.0]
    a = snap("a", histograms={key(schema.TIME_TO_FIRST_TOKEN): fast})
    b = snap("b", histograms={key(schema.TIME_TO_FIRST_TOKEN): slow})
    merged = derive(merge_replicas("pool", [a, b])).ttft
    # rank 198 of 200 falls 98 into the slow bucket: 0.5 + 0.5 * 98/100
    assert merged.percentiles.p99 == pytest.approx(0.99)
    mean_of_p99s = (derive(a).ttft.percentiles.p99 + derive(b).ttft.percentiles.p99) / 2
    assert mean_of_p99s == pytest.approx((0.199 + 0.995) / 2)  # 0.597: far off
    assert merged.sli_at(0.2) is not None and merged.sli_at(0.2).good == 100  # type: ignore
    assert merged.count == 200 and merged.mean_seconds == pytest.approx(0.45)


def test_merged_replicas_add_rates_and_amounts_and_pool_ratios() -> None:
    a = snap("a", start=T0, seconds=15, counters={counter(schema.GENERATION_TOKENS): 150},
             gauges={key(schema.REQUESTS_RUNNING): GaugeStats.of(3),
                     key(schema.BATCH_SIZE_MAX): GaugeStats.of(8),
                     key(schema.KV_CACHE_BLOCKS_USED): GaugeStats.of(100),
                     key(schema.KV_CACHE_BLOCKS_CAPACITY): GaugeStats.of(200),
                     key(schema.KV_CACHE_USAGE_RATIO): GaugeStats.of(0.5)})
    b = snap("b", start=T0 + 5, seconds=15, counters={counter(schema.GENERATION_TOKENS): 300},
             gauges={key(schema.REQUESTS_RUNNING): GaugeStats.of(5),
                     key(schema.BATCH_SIZE_MAX): GaugeStats.of(8),
                     key(schema.KV_CACHE_BLOCKS_USED): GaugeStats.of(300),
                     key(schema.KV_CACHE_BLOCKS_CAPACITY): GaugeStats.of(1000),
                     key(schema.KV_CACHE_USAGE_RATIO): GaugeStats.of(0.3)})
    merged = merge_replicas("pool", [a, b])
    assert (merged.start, merged.end, merged.state, merged.error) == (T0 + 2.5, T0 + 17.5, UP,
                                                                      None)
    d = derive(merged)
    assert d.generation_tokens_per_second == 30.0  # 10/s + 20/s
    assert d.batch_utilization == 0.5  # (3 + 5) running of 8 + 8
    assert d.kv_cache_usage_ratio_mean == pytest.approx(400 / 1200)  # capacity-weighted
    assert merged.gauges[key(schema.KV_CACHE_USAGE_RATIO)].mean == pytest.approx(0.4)  # pooled
    assert merged.gauges[key(schema.REQUESTS_RUNNING)].mean == 8  # summed


def test_merged_replicas_name_the_ones_without_increases() -> None:
    merged = merge_replicas("pool", [snap("a"), snap("b", state=DOWN), snap("c", state=FIRST)])
    assert merged.state is UP
    assert merged.error == "2 of 3 replicas without increases: b (down), c (first)"
    assert merge_replicas("pool", [snap("a", state=DOWN)]).state is DOWN
    with pytest.raises(ValueError, match="no snapshots"):
        merge_replicas("pool", [])


def test_histograms_with_different_bounds_merge_onto_the_bounds_they_share() -> None:
    a = HistogramDelta((0.1, 0.2, 0.5), (1, 2, 3, 4), 1.0, 10)  # cumulative 1 3 6 10
    b = HistogramDelta((0.2, 0.5, 1.0), (5, 6, 7, 8), 2.0, 26)  # cumulative 5 11 18 26
    merged = merge_histograms([a, b])
    # at 0.2: 3 + 5; at 0.5: 6 + 11; +Inf: 10 + 26
    assert merged == HistogramDelta((0.2, 0.5), (8, 9, 19), 3.0, 36)


def test_the_flat_view_names_every_value() -> None:
    flat = derive(snap(histograms={key(schema.TIME_TO_FIRST_TOKEN): TTFT},
                       counters={counter(schema.GENERATION_TOKENS): 900})).as_dict()
    assert flat["generation_tokens_per_second"] == 30.0
    assert flat["ttft_p99_seconds"] == pytest.approx(0.5 + 0.5 * 5 / 6)
    assert (flat["ttft_sli_le_0.2_good"], flat["ttft_sli_le_0.2_total"]) == (70, 100)
    assert flat["duration_seconds"] == 30.0
    assert "ttft_sli_le_0.25_good" not in flat


def test_percentiles_of_no_histogram_are_nan() -> None:
    assert all(math.isnan(v) for v in (Percentiles.of(None).p50, Percentiles.of(None).p99))


def test_a_down_interval_inside_a_merged_window_does_not_dilute_rates() -> None:
    up = snap(seconds=30, counters={counter(schema.GENERATION_TOKENS): 900})
    down = snap(start=T0 + 30, seconds=30, state=DOWN)
    merged = merge_snapshots("t", [up, down])
    assert merged.duration == 60 and merged.covered_seconds == 30
    # 900 tokens were produced in the 30 s we saw, not spread over the 30 s we did not.
    assert derive(merged).generation_tokens_per_second == 30.0
    assert math.isnan(derive(merge_snapshots("t", [down])).generation_tokens_per_second)


def test_a_window_across_a_bucket_layout_change_merges_on_the_shared_bounds() -> None:
    # An engine upgrade changed its TTFT buckets mid-window: 0.2 and 1.0 are in both layouts.
    before = snap(histograms={key("ttft"): HistogramDelta((0.1, 0.2, 1.0), (1, 2, 3, 4), 9.0, 10)})
    after = snap(start=T0 + 30, histograms={
        key("ttft"): HistogramDelta((0.2, 0.5, 1.0), (5, 1, 1, 3), 8.0, 10)})
    merged = merge_snapshots("t", [before, after])
    assert merged.histograms[key("ttft")] == HistogramDelta((0.2, 1.0), (8, 5, 7), 17.0, 20)


def test_prefix_cache_hit_ratio_is_a_ratio_of_sums_over_the_series() -> None:
    d = derive(snap(counters={
        counter(schema.PREFIX_CACHE_HITS, engine="0"): 30,
        counter(schema.PREFIX_CACHE_QUERIES, engine="0"): 100,
        counter(schema.PREFIX_CACHE_HITS, engine="1"): 10,
        counter(schema.PREFIX_CACHE_QUERIES, engine="1"): 60,
    }))
    assert d.prefix_cache_hit_ratio == 40 / 160  # not the mean of 0.3 and 1/6
    assert d.as_dict()["prefix_cache_hit_ratio"] == 0.25
    no_lookups = derive(snap(counters={counter(schema.PREFIX_CACHE_HITS): 0,
                                       counter(schema.PREFIX_CACHE_QUERIES): 0}))
    not_exported = derive(snap(counters={counter(schema.GENERATION_TOKENS): 900}))
    assert math.isnan(no_lookups.prefix_cache_hit_ratio)
    assert math.isnan(not_exported.prefix_cache_hit_ratio)
