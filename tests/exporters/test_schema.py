"""The schema as data, its buckets, and Prometheus's quantile interpolation over them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporters.buckets import (
    SLO_THRESHOLDS_SECONDS,
    interpolate_quantile,
    latency_buckets,
    power_of_two_buckets,
    token_count_buckets,
)
from exporters.schema import ENGINE_SPECS, GPU_SPECS, SCHEMA, MetricSpec, MetricType, get_spec

INF = math.inf
PROMETHEUS_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
UNIT_SUFFIXES = {
    "seconds": "_seconds", "bytes": "_bytes", "ratio": "_ratio",
    "watts": "_watts", "celsius": "_celsius", "hertz": "_hertz",
}

# Other modules (collector, dashboards, rules) are written against these exact names.
EXPECTED_EXPOSED_NAMES = {
    "gen_ai_server_prompt_tokens_total", "gen_ai_server_generation_tokens_total",
    "gen_ai_server_prompt_tokens_cached_total", "gen_ai_server_requests_total",
    "gen_ai_server_request_errors_total", "gen_ai_server_preemptions_total",
    "gen_ai_server_engine_steps_total",
    "gen_ai_server_requests_running", "gen_ai_server_requests_waiting",
    "gen_ai_server_requests_swapped", "gen_ai_server_batch_size_max",
    "gen_ai_server_batched_tokens_max", "gen_ai_server_kv_cache_usage_ratio",
    "gen_ai_server_kv_cache_blocks_used", "gen_ai_server_kv_cache_blocks_capacity",
    "gen_ai_server_kv_cache_block_size_tokens", "gen_ai_server_kv_cache_memory_bytes",
    "gen_ai_server_time_to_first_token_seconds", "gen_ai_server_inter_token_latency_seconds",
    "gen_ai_server_time_per_output_token_seconds", "gen_ai_server_request_duration_seconds",
    "gen_ai_server_request_queue_time_seconds", "gen_ai_server_request_prefill_time_seconds",
    "gen_ai_server_request_decode_time_seconds", "gen_ai_server_engine_step_duration_seconds",
    "gen_ai_server_batch_size", "gen_ai_server_iteration_tokens",
    "gen_ai_server_request_prompt_tokens", "gen_ai_server_request_generation_tokens",
    "gen_ai_server_prefix_cache_queries_total", "gen_ai_server_prefix_cache_hits_total",
    "gen_ai_server_prompt_tokens_cached_by_tier_total", "gen_ai_server_estimated_flops_total",
    "gen_ai_server_estimated_memory_read_bytes_total",
    "gen_ai_server_estimated_memory_write_bytes_total",
    "gen_ai_server_requests_waiting_by_reason", "gen_ai_server_engine_sleep_state",
    "gpu_up", "gpu_memory_used_bytes", "gpu_memory_total_bytes", "gpu_memory_kv_cache_bytes",
    "gpu_utilization_ratio", "gpu_memory_bandwidth_utilization_ratio", "gpu_power_watts",
    "gpu_temperature_celsius", "gpu_sm_clock_hertz",
}

spec_ids = [spec.name for spec in SCHEMA]
latency_specs = [s for s in SCHEMA if s.type is MetricType.HISTOGRAM and s.unit == "seconds"]
histogram_specs = [s for s in SCHEMA if s.type is MetricType.HISTOGRAM]


# --- schema ----------------------------------------------------------------------------------


def test_schema_exposes_exactly_the_agreed_names() -> None:
    assert {spec.exposed_name for spec in SCHEMA} == EXPECTED_EXPOSED_NAMES
    assert len(SCHEMA) == len(EXPECTED_EXPOSED_NAMES)


@pytest.mark.parametrize("spec", SCHEMA, ids=spec_ids)
def test_every_spec_has_a_valid_prometheus_name_and_help(spec: MetricSpec) -> None:
    assert PROMETHEUS_NAME.match(spec.exposed_name)
    assert not spec.name.endswith("_total") or spec.type is not MetricType.COUNTER
    assert len(spec.help) > 20


@pytest.mark.parametrize("spec", SCHEMA, ids=spec_ids)
def test_counters_gain_total_only_when_exposed(spec: MetricSpec) -> None:
    if spec.type is MetricType.COUNTER:
        assert spec.exposed_name == spec.name + "_total"
    else:
        assert spec.exposed_name == spec.name


@pytest.mark.parametrize("spec", SCHEMA, ids=spec_ids)
def test_unit_and_name_suffix_agree_both_ways(spec: MetricSpec) -> None:
    for unit, suffix in UNIT_SUFFIXES.items():
        assert (spec.unit == unit) == spec.name.endswith(suffix), (unit, spec.name)


@pytest.mark.parametrize("spec", histogram_specs, ids=[s.name for s in histogram_specs])
def test_histogram_buckets_are_sorted_unique_positive_and_print_cleanly(spec: MetricSpec) -> None:
    assert spec.buckets is not None and len(spec.buckets) >= 2
    assert list(spec.buckets) == sorted(set(spec.buckets))
    assert spec.buckets[0] > 0 and not math.isinf(spec.buckets[-1])
    # Integers or at most 3 significant digits: le="0.00112", never le="0.0011200000000000001".
    assert all(b.is_integer() or float(f"{b:.3g}") == b for b in spec.buckets)


def test_only_histograms_have_buckets() -> None:
    assert all((s.buckets is None) == (s.type is not MetricType.HISTOGRAM) for s in SCHEMA)


@pytest.mark.parametrize("spec", ENGINE_SPECS, ids=[s.name for s in ENGINE_SPECS])
def test_every_engine_metric_is_labelled_by_model_first(spec: MetricSpec) -> None:
    assert spec.labels[0] == "model"
    assert spec.name.startswith("gen_ai_server_")


def test_gpu_metrics_are_labelled_by_device_and_gpu_up_by_nothing() -> None:
    assert get_spec("gpu_up").labels == ()
    assert all(s.labels == ("gpu", "uuid") for s in GPU_SPECS if s.name != "gpu_up")


def test_extra_labels_are_the_documented_ones() -> None:
    assert get_spec("gen_ai_server_requests_total").labels == ("model", "finish_reason")
    assert get_spec("gen_ai_server_request_errors_total").labels == ("model", "error_type")
    assert get_spec("gen_ai_server_engine_step_duration_seconds").labels == ("model", "stage")
    assert get_spec("gen_ai_server_requests_waiting_by_reason").labels == ("model", "reason")
    assert get_spec("gen_ai_server_engine_sleep_state").labels == ("model", "sleep_state")
    assert get_spec("gen_ai_server_prompt_tokens_cached_by_tier").labels == ("model", "tier")


def test_engine_only_metrics_are_not_built_in_process() -> None:
    """The instrumentation builds each in-process metric with every child at 0, so their
    extra labels need closed value sets; the engine-only ones keep the engine's values."""
    engine_only = {s.name for s in ENGINE_SPECS if not s.in_process}
    assert "gen_ai_server_prefix_cache_hits" in engine_only
    assert "gen_ai_server_prompt_tokens" not in engine_only
    assert all(not s.name.startswith("gpu_") for s in ENGINE_SPECS)


@pytest.mark.parametrize(
    ("name", "otel_name"),
    [
        ("gen_ai_server_time_to_first_token_seconds", "gen_ai.server.time_to_first_token"),
        ("gen_ai_server_time_per_output_token_seconds", "gen_ai.server.time_per_output_token"),
        ("gen_ai_server_request_duration_seconds", "gen_ai.server.request.duration"),
    ],
    ids=["ttft", "tpot", "request duration"],
)
def test_the_three_otel_genai_server_metrics_carry_their_semconv_name(
    name: str, otel_name: str
) -> None:
    assert get_spec(name).otel_name == otel_name
    assert get_spec(name).type is MetricType.HISTOGRAM


def test_get_spec_finds_a_counter_by_name_or_exposed_name() -> None:
    spec = get_spec("gen_ai_server_prompt_tokens_total")
    assert spec is get_spec("gen_ai_server_prompt_tokens")
    assert spec.type is MetricType.COUNTER and spec.unit == "tokens"


def test_get_spec_of_an_unknown_name_says_which() -> None:
    with pytest.raises(KeyError, match="vllm:num_requests_running"):
        get_spec("vllm:num_requests_running")


@pytest.mark.parametrize(
    "make",
    [
        lambda: MetricSpec("bad-name", MetricType.GAUGE, "", "a help string", ()),
        lambda: MetricSpec("x_total", MetricType.COUNTER, "", "a help string", ()),
        lambda: MetricSpec("x_seconds", MetricType.HISTOGRAM, "seconds", "a help string", ()),
        lambda: MetricSpec("x", MetricType.GAUGE, "", "a help string", (), (1.0, 2.0)),
        lambda: MetricSpec("x", MetricType.HISTOGRAM, "", "a help string", (), (2.0, 1.0)),
    ],
    ids=["invalid name", "counter with _total", "histogram without buckets",
         "gauge with buckets", "unsorted buckets"],
)
def test_an_invalid_spec_is_refused(make: Callable[[], MetricSpec]) -> None:
    with pytest.raises(ValueError):
        make()


# --- buckets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", latency_specs, ids=[s.name for s in latency_specs])
def test_slo_thresholds_inside_a_latency_histogram_are_exact_boundaries(spec: MetricSpec) -> None:
    assert spec.buckets is not None
    low, high = spec.buckets[0], spec.buckets[-1]
    assert {t for t in SLO_THRESHOLDS_SECONDS if low <= t <= high} <= set(spec.buckets)


def test_default_latency_buckets_hold_every_slo_threshold() -> None:
    assert set(SLO_THRESHOLDS_SECONDS) <= set(latency_buckets())


def test_default_latency_buckets_cover_1ms_to_60s_with_ratio_at_most_1_143() -> None:
    buckets = latency_buckets()
    ratios = [hi / lo for lo, hi in zip(buckets, buckets[1:])]
    assert buckets[0] == 0.001 and buckets[-1] == 60.0
    assert max(ratios) <= 1.143
    assert 90 <= len(buckets) <= 100
    assert {10.0, 20.0, 30.0} <= set(buckets)


def test_renard_series_nest_so_coarse_histograms_merge_into_fine_ones() -> None:
    coarse, fine, finest = (latency_buckets(per_decade=n) for n in (10, 20, 40))
    assert set(coarse) <= set(fine) <= set(finest)


@pytest.mark.parametrize(
    "kwargs",
    [{"per_decade": 12}, {"min_seconds": 0.0}, {"min_seconds": 2.0, "max_seconds": 1.0}],
    ids=["not a Renard series", "zero lower end", "ends swapped"],
)
def test_latency_buckets_refuse_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        latency_buckets(**kwargs)  # type: ignore[arg-type]


def test_batch_and_token_buckets() -> None:
    assert power_of_two_buckets(1024) == tuple(float(2**i) for i in range(11))
    assert power_of_two_buckets(16384)[-1] == 16384.0
    assert token_count_buckets(100_000) == (
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000,
    )
    with pytest.raises(ValueError):
        power_of_two_buckets(1000)


@pytest.mark.parametrize(
    ("median", "sigma"),
    [(0.004, 0.5), (0.03, 1.0), (0.3, 0.75), (2.0, 0.5), (0.02, 1.5)],
    ids=["ITL-like 4ms", "30ms wide", "TTFT-like 300ms", "E2E-like 2s", "very long tail"],
)
def test_p99_from_default_buckets_is_within_2_percent_of_exact(median: float, sigma: float) -> None:
    rng = np.random.default_rng(7)
    samples = np.sort(rng.lognormal(math.log(median), sigma, 400_000))
    samples = samples[samples < 60.0]
    buckets = latency_buckets()
    cumulative = [*np.searchsorted(samples, buckets, side="right").tolist(), len(samples)]
    exact = float(np.quantile(samples, 0.99))
    assert interpolate_quantile(0.99, buckets, cumulative) == pytest.approx(exact, rel=0.02)


# --- interpolate_quantile: hand-worked, as Prometheus's histogram_quantile --------------------

# 10 observations in (0, 1], 20 in (1, 2], 10 in (2, 4], none above.
BOUNDS = [1.0, 2.0, 4.0, INF]
COUNTS = [10.0, 30.0, 40.0, 40.0]


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.0, 0.0),  # rank 0 in the lowest bucket: its lower end, 0
        (0.1, 0.4),  # rank 4 of 10 in (0, 1]
        (0.25, 1.0),  # rank 10: the top of (0, 1]
        (0.5, 1.5),  # rank 20: 10 of 20 into (1, 2]
        (0.9, 3.2),  # rank 36: 6 of 10 into (2, 4]
        (1.0, 4.0),
    ],
    ids=["q=0", "inside the lowest bucket", "lowest bucket's top", "median", "p90", "q=1"],
)
def test_quantile_interpolates_linearly_inside_its_bucket(q: float, expected: float) -> None:
    assert interpolate_quantile(q, BOUNDS, COUNTS) == pytest.approx(expected)


def test_quantile_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    assert interpolate_quantile(0.9, BOUNDS, [10.0, 30.0, 40.0, 50.0]) == 4.0


def test_an_implied_inf_bucket_is_the_extra_count() -> None:
    assert interpolate_quantile(0.5, [1.0, 2.0, 4.0], COUNTS) == pytest.approx(1.5)


def test_bounds_are_sorted_with_their_counts() -> None:
    assert interpolate_quantile(0.5, [4.0, 1.0, INF, 2.0], [40, 10, 40, 30]) == pytest.approx(1.5)


def test_duplicate_bounds_are_summed() -> None:
    # (0, 1] holds 5 + 5; rank 15 of 20 is 5 of 10 into (1, 2].
    assert interpolate_quantile(0.75, [1.0, 1.0, 2.0, INF], [5, 5, 20, 20]) == pytest.approx(1.5)


def test_a_decreasing_count_is_replaced_by_the_running_maximum() -> None:
    # Envelope [10, 30, 30, 40]: rank 30 ends (1, 2]; rank 32 is past (2, 4] into +Inf.
    counts = [10.0, 30.0, 25.0, 40.0]
    assert interpolate_quantile(0.75, BOUNDS, counts) == pytest.approx(2.0)
    assert interpolate_quantile(0.8, BOUNDS, counts) == 4.0


def test_float_noise_between_buckets_is_ignored() -> None:
    noisy = [10.0, 30.0, 30.000000000000004, 40.0]
    assert interpolate_quantile(0.8, BOUNDS, noisy) == 4.0


def test_a_non_positive_lowest_bound_is_returned_as_is() -> None:
    assert interpolate_quantile(0.2, [-1.0, 1.0, INF], [5, 10, 10]) == -1.0


@pytest.mark.parametrize(
    ("q", "bounds", "counts"),
    [
        (0.5, BOUNDS, [0, 0, 0, 0]),
        (0.5, [1.0, 2.0, 4.0], [1, 2, 3]),
        (0.5, [INF], [5]),
        (math.nan, BOUNDS, COUNTS),
        (0.0, [1.0, 2.0, INF], [0, 10, 10]),
        (0.5, [], []),
    ],
    ids=["no observations", "no +Inf bucket", "only +Inf", "q NaN", "q=0, empty lowest (0/0)",
         "no buckets"],
)
def test_quantile_is_nan_where_prometheus_gives_nan(
    q: float, bounds: list[float], counts: list[float]
) -> None:
    assert math.isnan(interpolate_quantile(q, bounds, counts))


def test_q_outside_0_1_is_minus_or_plus_infinity() -> None:
    assert interpolate_quantile(-0.1, BOUNDS, COUNTS) == -INF
    assert interpolate_quantile(1.1, BOUNDS, COUNTS) == INF


def test_mismatched_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="counts"):
        interpolate_quantile(0.5, [1.0, 2.0], [1, 2, 3, 4])


@given(
    increments=st.lists(st.integers(0, 1000), min_size=4, max_size=4),
    q1=st.floats(0, 1),
    q2=st.floats(0, 1),
)
def test_quantile_is_monotonic_in_q_and_stays_within_the_finite_bounds(
    increments: list[int], q1: float, q2: float
) -> None:
    counts = np.cumsum(increments).tolist()
    low, high = sorted((q1, q2))
    a, b = (interpolate_quantile(q, BOUNDS, counts) for q in (low, high))
    if counts[-1] == 0 or (increments[0] == 0 and low == 0):
        return  # NaN cases, covered above
    assert 0.0 <= a <= 4.0 and 0.0 <= b <= 4.0
    if not math.isnan(b):
        assert a <= b + 1e-12
