"""PrometheusEngineMetrics records what an engine reports at its seams, on its own registry."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporters.instrumentation import (
    EngineMetrics,
    NullEngineMetrics,
    PrometheusEngineMetrics,
    RequestStats,
    StepStats,
)
from exporters.schema import ENGINE_SPECS, ERROR_TYPES, FINISH_REASONS, GPU_SPECS

MODEL = "tiny-llama"


def make_metrics(registry: CollectorRegistry) -> PrometheusEngineMetrics:
    return PrometheusEngineMetrics(
        registry, MODEL, max_num_seqs=256, max_num_batched_tokens=8192,
        kv_block_size=16, kv_cache_bytes=2 * 1024**3,
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"model": MODEL, **labels})


# Step 1: one sequence in prefill (100 prompt tokens, 32 more from the prefix cache) emits its
# first token; two decoding sequences emit one token each.
STEP_1 = StepStats(
    num_running=3, num_waiting=2, num_swapped=0, batch_size=3,
    num_prefill_tokens=100, num_decode_tokens=2, num_cached_prompt_tokens=32,
    num_preemptions=0, kv_blocks_used=10, kv_blocks_total=40,
    schedule_seconds=0.001, run_seconds=0.02, postprocess_seconds=0.0005,
    inter_token_latencies=[0.02, 0.03], num_generation_tokens=3,
)
# Step 2: four sequences decode; one was preempted and swapped out.
STEP_2 = StepStats(
    num_running=4, num_waiting=0, num_swapped=1, batch_size=4,
    num_prefill_tokens=0, num_decode_tokens=4, num_cached_prompt_tokens=0,
    num_preemptions=1, kv_blocks_used=30, kv_blocks_total=40,
    schedule_seconds=0.002, run_seconds=0.025, postprocess_seconds=0.001,
    inter_token_latencies=[0.025, 0.025, 0.025, 0.025], num_generation_tokens=4,
)
# Values exact in binary, so TPOT = (1.25 - 0.25) / (5 - 1) = 0.25 exactly.
FINISHED = RequestStats(
    finish_reason="stop", error_type=None, num_prompt_tokens=132, num_generation_tokens=5,
    queue_seconds=0.0625, ttft_seconds=0.25, prefill_seconds=0.1875, decode_seconds=1.0,
    e2e_seconds=1.25,
)
ONE_TOKEN = RequestStats(
    finish_reason="length", error_type=None, num_prompt_tokens=10, num_generation_tokens=1,
    queue_seconds=0.0, ttft_seconds=0.5, prefill_seconds=0.5, decode_seconds=0.0,
    e2e_seconds=0.5,
)
OUT_OF_MEMORY = RequestStats(
    finish_reason="error", error_type="oom", num_prompt_tokens=4000, num_generation_tokens=0,
    queue_seconds=None, ttft_seconds=None, prefill_seconds=None, decode_seconds=None,
    e2e_seconds=3.0,
)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def after_two_steps(registry: CollectorRegistry) -> CollectorRegistry:
    metrics = make_metrics(registry)
    metrics.record_step(STEP_1)
    metrics.record_step(STEP_2)
    return registry


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gen_ai_server_prompt_tokens_total", 100.0),
        ("gen_ai_server_generation_tokens_total", 7.0),
        ("gen_ai_server_prompt_tokens_cached_total", 32.0),
        ("gen_ai_server_preemptions_total", 1.0),
        ("gen_ai_server_engine_steps_total", 2.0),
    ],
    ids=["prompt tokens computed", "tokens emitted", "prefix-cache hits", "preemptions", "steps"],
)
def test_steps_add_up_in_counters(
    after_two_steps: CollectorRegistry, name: str, expected: float
) -> None:
    assert sample(after_two_steps, name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gen_ai_server_requests_running", 4.0),
        ("gen_ai_server_requests_waiting", 0.0),
        ("gen_ai_server_requests_swapped", 1.0),
        ("gen_ai_server_kv_cache_blocks_used", 30.0),
        ("gen_ai_server_kv_cache_blocks_capacity", 40.0),
        ("gen_ai_server_kv_cache_usage_ratio", 0.75),
    ],
    ids=["running", "waiting", "swapped", "blocks used", "blocks total", "usage 30/40"],
)
def test_gauges_hold_the_last_step(
    after_two_steps: CollectorRegistry, name: str, expected: float
) -> None:
    assert sample(after_two_steps, name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gen_ai_server_batch_size_max", 256.0),
        ("gen_ai_server_batched_tokens_max", 8192.0),
        ("gen_ai_server_kv_cache_block_size_tokens", 16.0),
        ("gen_ai_server_kv_cache_memory_bytes", 2.0 * 1024**3),
    ],
    ids=["max_num_seqs", "max_num_batched_tokens", "block size", "kv cache bytes"],
)
def test_configuration_is_exposed_from_construction(
    registry: CollectorRegistry, name: str, expected: float
) -> None:
    make_metrics(registry)
    assert sample(registry, name) == expected


def test_batch_size_histogram_counts_sequences_per_step(after_two_steps: CollectorRegistry) -> None:
    name = "gen_ai_server_batch_size"
    assert sample(after_two_steps, f"{name}_count") == 2.0
    assert sample(after_two_steps, f"{name}_sum") == 7.0
    assert sample(after_two_steps, f"{name}_bucket", le="2.0") == 0.0
    assert sample(after_two_steps, f"{name}_bucket", le="4.0") == 2.0


def test_iteration_tokens_histogram_counts_prefill_plus_decode(
    after_two_steps: CollectorRegistry,
) -> None:
    name = "gen_ai_server_iteration_tokens"
    assert sample(after_two_steps, f"{name}_sum") == 106.0  # 100 + 2, then 4
    assert sample(after_two_steps, f"{name}_bucket", le="4.0") == 1.0
    assert sample(after_two_steps, f"{name}_bucket", le="64.0") == 1.0
    assert sample(after_two_steps, f"{name}_bucket", le="128.0") == 2.0


def test_every_inter_token_latency_is_observed(after_two_steps: CollectorRegistry) -> None:
    name = "gen_ai_server_inter_token_latency_seconds"
    assert sample(after_two_steps, f"{name}_count") == 6.0
    assert sample(after_two_steps, f"{name}_sum") == pytest.approx(0.15)
    assert sample(after_two_steps, f"{name}_bucket", le="0.02") == 1.0  # le is inclusive
    assert sample(after_two_steps, f"{name}_bucket", le="0.0224") == 1.0
    assert sample(after_two_steps, f"{name}_bucket", le="0.025") == 5.0
    assert sample(after_two_steps, f"{name}_bucket", le="0.0315") == 6.0


@pytest.mark.parametrize(
    ("stage", "expected_sum"),
    [("schedule", 0.003), ("run", 0.045), ("postprocess", 0.0015)],
    ids=["schedule", "run", "postprocess"],
)
def test_step_stages_are_timed_apart(
    after_two_steps: CollectorRegistry, stage: str, expected_sum: float
) -> None:
    name = "gen_ai_server_engine_step_duration_seconds"
    assert sample(after_two_steps, f"{name}_count", stage=stage) == 2.0
    assert sample(after_two_steps, f"{name}_sum", stage=stage) == pytest.approx(expected_sum)


def test_an_empty_step_counts_as_a_step_but_not_as_a_batch(registry: CollectorRegistry) -> None:
    idle = StepStats(
        num_running=0, num_waiting=0, num_swapped=0, batch_size=0, num_prefill_tokens=0,
        num_decode_tokens=0, num_cached_prompt_tokens=0, num_preemptions=0, kv_blocks_used=0,
        kv_blocks_total=0, schedule_seconds=0.0001, run_seconds=0.0, postprocess_seconds=0.0,
        inter_token_latencies=[], num_generation_tokens=0,
    )
    make_metrics(registry).record_step(idle)
    assert sample(registry, "gen_ai_server_engine_steps_total") == 1.0
    assert sample(registry, "gen_ai_server_batch_size_count") == 0.0
    assert sample(registry, "gen_ai_server_kv_cache_usage_ratio") == 0.0  # 0 of 0 blocks


def test_a_finished_request_is_counted_and_timed(registry: CollectorRegistry) -> None:
    make_metrics(registry).record_request(FINISHED)
    assert sample(registry, "gen_ai_server_requests_total", finish_reason="stop") == 1.0
    for name, value in [
        ("gen_ai_server_time_to_first_token_seconds", 0.25),
        ("gen_ai_server_time_per_output_token_seconds", 0.25),
        ("gen_ai_server_request_duration_seconds", 1.25),
        ("gen_ai_server_request_queue_time_seconds", 0.0625),
        ("gen_ai_server_request_prefill_time_seconds", 0.1875),
        ("gen_ai_server_request_decode_time_seconds", 1.0),
        ("gen_ai_server_request_prompt_tokens", 132.0),
        ("gen_ai_server_request_generation_tokens", 5.0),
    ]:
        assert sample(registry, f"{name}_count") == 1.0, name
        assert sample(registry, f"{name}_sum") == value, name


def test_tpot_is_e2e_minus_ttft_over_tokens_after_the_first(registry: CollectorRegistry) -> None:
    make_metrics(registry).record_request(FINISHED)
    name = "gen_ai_server_time_per_output_token_seconds_bucket"
    assert sample(registry, name, le="0.224") == 0.0
    assert sample(registry, name, le="0.25") == 1.0  # (1.25 - 0.25) / 4, on the boundary


def test_tpot_is_not_observed_for_a_single_output_token(registry: CollectorRegistry) -> None:
    make_metrics(registry).record_request(ONE_TOKEN)
    assert sample(registry, "gen_ai_server_time_per_output_token_seconds_count") == 0.0
    assert sample(registry, "gen_ai_server_time_to_first_token_seconds_count") == 1.0


def test_a_failed_request_counts_its_error_and_skips_missing_timings(
    registry: CollectorRegistry,
) -> None:
    make_metrics(registry).record_request(OUT_OF_MEMORY)
    assert sample(registry, "gen_ai_server_requests_total", finish_reason="error") == 1.0
    assert sample(registry, "gen_ai_server_request_errors_total", error_type="oom") == 1.0
    assert sample(registry, "gen_ai_server_request_duration_seconds_sum") == 3.0
    assert sample(registry, "gen_ai_server_time_to_first_token_seconds_count") == 0.0
    assert sample(registry, "gen_ai_server_request_queue_time_seconds_count") == 0.0


def test_a_rejected_request_is_an_error_but_not_a_finished_request(
    registry: CollectorRegistry,
) -> None:
    metrics = make_metrics(registry)
    metrics.record_rejected("rejected")
    metrics.record_rejected("rejected")
    metrics.record_rejected("bad_request")
    errors = "gen_ai_server_request_errors_total"
    assert sample(registry, errors, error_type="rejected") == 2.0
    assert sample(registry, errors, error_type="bad_request") == 1.0
    assert all(
        sample(registry, "gen_ai_server_requests_total", finish_reason=r) == 0.0
        for r in FINISH_REASONS
    )


def test_every_closed_label_value_exists_at_zero_from_the_start(
    registry: CollectorRegistry,
) -> None:
    make_metrics(registry)
    for reason in FINISH_REASONS:
        assert sample(registry, "gen_ai_server_requests_total", finish_reason=reason) == 0.0
    for error_type in ERROR_TYPES:
        assert sample(registry, "gen_ai_server_request_errors_total", error_type=error_type) == 0
    assert sample(registry, "gen_ai_server_engine_step_duration_seconds_count", stage="run") == 0


@pytest.mark.parametrize(
    "record",
    [
        lambda m: m.record_request(RequestStats("cancelled", None, 1, 1, None, None, None, None,
                                                1.0)),
        lambda m: m.record_request(RequestStats("error", "segfault", 1, 0, None, None, None,
                                                None, 1.0)),
        lambda m: m.record_rejected("teapot"),
    ],
    ids=["unknown finish reason", "unknown error type", "unknown rejection"],
)
def test_unknown_label_values_are_refused(
    registry: CollectorRegistry, record: Callable[[PrometheusEngineMetrics], None]
) -> None:
    metrics = make_metrics(registry)
    with pytest.raises(ValueError, match="expected one of"):
        record(metrics)


def test_negative_configuration_is_refused(registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="kv_cache_memory_bytes"):
        PrometheusEngineMetrics(registry, MODEL, 256, 8192, 16, -1)


def test_two_instances_on_two_registries_do_not_interfere() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    make_metrics(first).record_step(STEP_1)
    make_metrics(second).record_step(STEP_2)
    assert sample(first, "gen_ai_server_prompt_tokens_total") == 100.0
    assert sample(second, "gen_ai_server_prompt_tokens_total") == 0.0
    assert sample(first, "gen_ai_server_requests_running") == 3.0
    assert sample(second, "gen_ai_server_requests_running") == 4.0


def test_exposition_holds_every_in_process_engine_metric_and_no_gpu_metric(
    after_two_steps: CollectorRegistry,
) -> None:
    families = {family.name for family in after_two_steps.collect()}
    # counters named without _total
    assert families == {spec.name for spec in ENGINE_SPECS if spec.in_process}
    text = generate_latest(after_two_steps).decode()
    for spec in ENGINE_SPECS:
        assert (f"# TYPE {spec.exposed_name} " in text) == spec.in_process, spec.exposed_name
    assert not any(spec.name in text for spec in GPU_SPECS)
    assert any(not spec.in_process for spec in ENGINE_SPECS)  # engine-only metrics exist


@pytest.mark.parametrize("metrics_type", [PrometheusEngineMetrics, NullEngineMetrics])
def test_both_implementations_satisfy_the_protocol(metrics_type: type) -> None:
    metrics = (
        make_metrics(CollectorRegistry()) if metrics_type is PrometheusEngineMetrics
        else NullEngineMetrics()
    )
    assert isinstance(metrics, EngineMetrics)
    metrics.record_step(STEP_1)
    metrics.record_request(FINISHED)
    metrics.record_rejected("rejected")
