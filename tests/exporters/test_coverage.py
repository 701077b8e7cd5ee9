"""The coverage rule on recorded pages: every family of vLLM 0.32 decided, nothing it provides
missing, and the other engines' recorded pages in their current decided state."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporters.adapters import detect_engines, normalize
from exporters.adapters.coverage import CREATED_RULE, IGNORE_WHY, Coverage, coverage
from exporters.exposition import parse_page
from exporters.instrumentation import PrometheusEngineMetrics
from exporters.schema import GPU_SPECS, IN_PROCESS_ENGINE_SPECS

from .engine_fixtures import parse_fixture, read_fixture

LIVE = "vllm-0.32-cpu-live.prom"
KV_USAGE = "gen_ai_server_kv_cache_usage_ratio"
_COUNTER_TYPE = re.compile(r"^# TYPE (\S+)_total counter$", re.MULTILINE)
_CREATED_META = re.compile(r"^# (HELP|TYPE) \S+_created ")


def live_coverage(text: str | None = None) -> Coverage:
    return coverage(parse_page(read_fixture(LIVE) if text is None else text, LIVE), ["vllm"])


def openmetrics(text: str) -> str:
    """The page as OpenMetrics writes it: counters declared without _total, each _created
    sample inside its family (no gauge of its own), and # EOF."""
    counters = set(_COUNTER_TYPE.findall(text))
    lines = []
    for line in text.splitlines():
        if _CREATED_META.match(line):
            continue
        parts = line.split(" ", 3)
        if line.startswith("# ") and parts[2].removesuffix("_total") in counters:
            parts[2] = parts[2].removesuffix("_total")
            line = " ".join(parts)
        lines.append(line)
    return "\n".join(lines) + "\n# EOF\n"


# --- vLLM 0.32, recorded live ---------------------------------------------------------------------

def test_every_family_of_the_live_vllm_page_is_decided_and_nothing_it_provides_is_missing() -> None:
    result = live_coverage()
    assert result.undecided == ()  # a family a new vLLM adds fails here until decided
    assert result.missing == ()
    assert result.complete
    # 29 vllm: families and the API server's http_requests_total (its 4xx and 5xx: issue 30)
    assert len(result.mapped) == 30 and len(result.not_mapped) == 10
    assert "http_requests_total" in result.mapped
    # 72 vllm: families (39, and 33 _created gauges), the API server's 4 other http_ and the
    # 5 _created.
    assert result.ignored_by_rule() == {
        "process_*": 6, "python_*": 4, "http_*": 4, CREATED_RULE: 38}
    assert set(result.ignored.values()) <= set(IGNORE_WHY)
    assert all(reason for reason in result.not_mapped.values())


def test_the_new_vllm_families_are_mapped_and_the_rest_stated() -> None:
    result = live_coverage()
    assert {
        "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
        "vllm:admission_rejections_total", "vllm:num_requests_waiting_by_reason",
        "vllm:engine_sleep_state", "vllm:estimated_flops_per_gpu_total",
        "vllm:estimated_read_bytes_per_gpu_total", "vllm:estimated_write_bytes_per_gpu_total",
        "vllm:prompt_tokens_cached_by_source_total",
    } <= set(result.mapped)
    assert "vllm:request_num_preemptions" in result.not_mapped
    assert result.ignored["vllm:prefix_cache_hits_created"] == CREATED_RULE
    assert result.ignored["vllm:request_num_preemptions_created"] == CREATED_RULE
    assert result.ignored["http_request_size_bytes"] == "http_*"  # requests: mapped (issue 30)


def test_the_live_page_normalizes_to_its_own_values() -> None:
    page = normalize(parse_page(read_fixture(LIVE), LIVE), "vllm")
    tiny = {"engine": "0", "model": "tiny"}
    expected = {
        ("gen_ai_server_generation_tokens_total", ()): 40.0,
        ("gen_ai_server_prompt_tokens_total", ()): 54.0,  # local_compute
        ("gen_ai_server_prompt_tokens_cached_total", ()): 0.0,
        ("gen_ai_server_prefix_cache_queries_total", ()): 54.0,
        ("gen_ai_server_prefix_cache_hits_total", ()): 0.0,
        ("gen_ai_server_estimated_flops_total", ()): 0.0,
        ("gen_ai_server_estimated_memory_read_bytes_total", ()): 0.0,
        ("gen_ai_server_estimated_memory_write_bytes_total", ()): 0.0,
        ("gen_ai_server_requests_waiting_by_reason", (("reason", "capacity"),)): 0.0,
        ("gen_ai_server_requests_waiting_by_reason", (("reason", "deferred"),)): 0.0,
        ("gen_ai_server_engine_sleep_state", (("sleep_state", "awake"),)): 1.0,
        ("gen_ai_server_engine_sleep_state", (("sleep_state", "weights_offloaded"),)): 0.0,
        ("gen_ai_server_engine_sleep_state", (("sleep_state", "discard_all"),)): 0.0,
        ("gen_ai_server_requests_total", (("finish_reason", "length"),)): 4.0,
        ("gen_ai_server_kv_cache_usage_ratio", ()): 0.0,
        **{("gen_ai_server_prompt_tokens_cached_by_tier_total", (("tier", tier),)): 0.0
           for tier in ("device", "host", "p2p", "disk", "external_unspecified")},
    }
    for (name, labels), value in expected.items():
        assert page.value(name, {**tiny, **dict(labels)}) == value, (name, labels)
    # Admission rejections carry no engine label; both queue limits are one "rejected".
    assert page.value("gen_ai_server_request_errors_total",
                      {"model": "tiny", "error_type": "rejected"}) == 0.0
    assert page.value("gen_ai_server_request_generation_tokens_sum", tiny) == 40.0
    assert page.problems == []


def test_the_openmetrics_form_of_the_live_page_gives_the_same_coverage() -> None:
    text = openmetrics(read_fixture(LIVE))
    parsed = parse_page(text, "om")
    assert parsed.problems == []
    assert parsed.families["vllm:prefix_cache_hits"].type == "counter"  # no _total in # TYPE
    assert "vllm:prefix_cache_hits_created" not in parsed.families
    assert live_coverage(text) == live_coverage()


# --- renamed, removed and new metrics -------------------------------------------------------------

def test_the_old_kv_usage_name_alone_still_maps_and_nothing_is_missing() -> None:
    text = read_fixture(LIVE).replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    page = normalize(parse_page(text, "old"), "vllm")
    assert page.value(KV_USAGE, {"engine": "0", "model": "tiny"}) == 0.0
    result = live_coverage(text)
    assert (result.undecided, result.missing) == ((), ())
    assert "vllm:gpu_cache_usage_perc" in result.mapped


def test_a_page_without_kv_usage_under_either_name_reports_it_missing() -> None:
    text = "\n".join(line for line in read_fixture(LIVE).splitlines()
                     if "vllm:kv_cache_usage_perc" not in line)
    result = live_coverage(text)
    assert result.missing == (KV_USAGE,)
    assert result.undecided == () and not result.complete


def test_a_legacy_row_missing_alone_is_not_missing_but_its_current_name_is() -> None:
    # queue time: request_queue_time_seconds, or V0's time_in_queue_requests (legacy).
    text = "\n".join(line for line in read_fixture(LIVE).splitlines()
                     if "vllm:request_queue_time_seconds" not in line)
    assert live_coverage(text).missing == ("gen_ai_server_request_queue_time_seconds",)


def test_a_family_nobody_decided_about_is_undecided_with_its_created_companion() -> None:
    text = read_fixture(LIVE) + (
        "# HELP vllm:new_thing_total A counter a future release adds.\n"
        "# TYPE vllm:new_thing_total counter\n"
        'vllm:new_thing_total{engine="0",model_name="tiny"} 1.0\n'
        "# HELP vllm:new_thing_created A counter a future release adds.\n"
        "# TYPE vllm:new_thing_created gauge\n"
        'vllm:new_thing_created{engine="0",model_name="tiny"} 1.7e9\n')
    result = live_coverage(text)
    assert result.undecided == ("vllm:new_thing_created", "vllm:new_thing_total")
    assert live_coverage(openmetrics(text)).undecided == ("vllm:new_thing_total",)


# --- the other recorded pages: their decided state today ------------------------------------------

@pytest.mark.parametrize(("name", "engines", "num_mapped", "not_mapped", "undecided"), [
    ("vllm.prom", ["vllm"], 4, [], []),
    ("vllm-usage-doc.prom", ["vllm"], 1, [], []),
    ("sglang.prom", ["sglang"], 8, [
        "sglang:cache_hit_rate", "sglang:func_latency_seconds", "sglang:gen_throughput",
        "sglang:num_used_tokens"], []),
    ("triton.prom", ["triton"], 3, [
        "nv_inference_compute_infer_duration_us", "nv_inference_compute_input_duration_us",
        "nv_inference_compute_output_duration_us", "nv_inference_count",
        "nv_inference_exec_count", "nv_inference_queue_duration_us",
        "nv_inference_request_duration_us"], []),
    ("trtllm.prom", ["triton"], 3, [
        "nv_trt_llm_disaggregated_serving_metrics", "nv_trt_llm_inflight_batcher_metrics",
        "nv_trt_llm_runtime_memory_metrics"], []),
    ("trtllm-v1-model.prom", ["triton"], 0, ["nv_trt_llm_v1_metrics"], []),
    ("triton-summary-doc.prom", ["triton"], 0, ["nv_inference_queue_summary_us"], []),
    ("triton-counters-doc.prom", ["triton"], 1, ["nv_inference_queue_duration_us"], []),
    # Not valid exposition as published (see the fixtures' README): its pieces are undecided.
    ("triton-first-response-histogram-doc.prom", ["triton"], 1, [], [
        "nv_first_response_histogram_ms", "nv_inference_first_response_histogram_ms_count",
        "nv_inference_first_response_histogram_ms_sum"]),
    ("dcgm-exporter.prom", ["dcgm"], 1, ["DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEM_CLOCK"], []),
])
def test_recorded_pages_of_other_engines(name: str, engines: list[str], num_mapped: int,
                                         not_mapped: list[str], undecided: list[str]) -> None:
    """Doc excerpts are partial, so their missing metrics say little; what they show must
    stay decided."""
    page = parse_fixture(name)
    assert detect_engines(page) == engines
    result = coverage(page, engines)
    assert len(result.mapped) == num_mapped
    assert list(result.not_mapped) == not_mapped
    assert list(result.undecided) == undecided
    assert result.ignored == {}


TRITON_LIVE = "triton-2.51-cpu-live.prom"
TRT = "the TensorRT-LLM backend"
GPU = "a GPU and GPU metrics on (--allow-gpu-metrics)"


def test_the_live_cpu_triton_page_is_complete_with_its_conditional_metrics_absent() -> None:
    """Triton 2.51 without a GPU or TensorRT-LLM: every family decided, nothing missing; what
    only the TensorRT-LLM backend, a GPU or an opt-in setting would export is absent, saying so."""
    page = parse_fixture(TRITON_LIVE)
    assert detect_engines(page) == ["triton"]
    result = coverage(page, ["triton"])
    assert result.mapped == ("nv_inference_pending_request_count", "nv_inference_request_failure",
                             "nv_inference_request_success")
    assert len(result.not_mapped) == 12
    assert (result.undecided, result.missing, result.ignored) == ((), (), {})
    assert result.complete
    assert result.absent == {
        "gen_ai_server_engine_steps": TRT, "gen_ai_server_requests_running": TRT,
        "gen_ai_server_batch_size_max": TRT, "gen_ai_server_kv_cache_usage_ratio": TRT,
        "gen_ai_server_kv_cache_blocks_used": TRT, "gen_ai_server_kv_cache_blocks_capacity": TRT,
        "gen_ai_server_kv_cache_block_size_tokens": TRT,
        "gen_ai_server_time_to_first_token_seconds":
            "--metrics-config histogram_latencies=true (a Triton release newer than 2.51)",
        "gen_ai_server_request_prompt_tokens": TRT,
        "gen_ai_server_request_generation_tokens": TRT,
        "gpu_memory_used_bytes": GPU, "gpu_memory_total_bytes": GPU,
        "gpu_utilization_ratio": GPU, "gpu_power_watts": GPU,
    }


def test_a_metric_whose_unconditional_row_misses_is_missing_not_absent() -> None:
    # requests_waiting: TensorRT-LLM's gauge (requires the backend) or Triton's own pending
    # count (always there): without the latter, something was renamed or removed.
    text = "\n".join(line for line in read_fixture(TRITON_LIVE).splitlines()
                     if "nv_inference_pending_request_count" not in line)
    result = coverage(parse_page(text, TRITON_LIVE), ["triton"])
    assert result.missing == ("gen_ai_server_requests_waiting",)
    assert "gen_ai_server_requests_waiting" not in result.absent and not result.complete


def test_a_conditional_row_found_on_the_page_makes_its_metric_present() -> None:
    text = read_fixture(TRITON_LIVE) + (
        "# TYPE nv_gpu_utilization gauge\n"
        'nv_gpu_utilization{gpu_uuid="GPU-0"} 0.5\n')
    result = coverage(parse_page(text, TRITON_LIVE), ["triton"])
    assert "gpu_utilization_ratio" not in result.absent and result.missing == ()
    assert "nv_gpu_utilization" in result.mapped


def test_sglang_recorded_page_lacks_what_the_older_release_did_not_export() -> None:
    result = coverage(parse_fixture("sglang.prom"), ["sglang"])
    assert result.missing == (
        "gen_ai_server_prompt_tokens_cached", "gen_ai_server_request_queue_time_seconds",
        "gen_ai_server_request_prompt_tokens", "gen_ai_server_request_generation_tokens")


def test_the_reference_server_page_is_complete() -> None:
    registry = CollectorRegistry()
    PrometheusEngineMetrics(registry, "tiny", max_num_seqs=8, max_num_batched_tokens=256,
                            kv_block_size=16, kv_cache_bytes=2**20)
    result = coverage(parse_page(generate_latest(registry).decode(), "ref"), ["inferwatch"])
    assert result.undecided == ()
    assert len(result.mapped) == len(IN_PROCESS_ENGINE_SPECS)
    # No GPU collector on this registry; the engine-only metrics have no identity row.
    assert result.missing == tuple(spec.name for spec in GPU_SPECS)
    assert set(result.ignored.values()) == {CREATED_RULE}


# --- llama.cpp b11434, recorded live --------------------------------------------------------------

LLAMACPP_LIVE = "llamacpp-b11434-cpu-live.prom"


def test_every_family_of_the_live_llamacpp_page_is_decided() -> None:
    result = coverage(parse_page(read_fixture(LLAMACPP_LIVE), LLAMACPP_LIVE), ["llamacpp"])
    assert (result.undecided, result.missing) == ((), ())
    assert result.complete
    # No client library: nothing to ignore, and the KV-cache gauges are gone (legacy row).
    assert result.ignored == {}
    assert result.mapped == (
        "llamacpp:n_decode_total", "llamacpp:prompt_tokens_cached_total",
        "llamacpp:prompt_tokens_total", "llamacpp:requests_deferred",
        "llamacpp:requests_processing", "llamacpp:tokens_predicted_total")
    assert sorted(result.not_mapped) == [
        "llamacpp:n_busy_slots_per_decode", "llamacpp:n_tokens_max",
        "llamacpp:predicted_tokens_seconds", "llamacpp:prompt_seconds_total",
        "llamacpp:prompt_tokens_seconds", "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:tokens_predicted_seconds_total"]


def test_the_live_llamacpp_page_normalizes_to_its_own_values() -> None:
    """Recorded after 1 completion (16 tokens) and 3 chat completions (8 each): 50 prompt
    tokens charged, 10 of them reused from a slot's cache (the chats share their template's
    opening), 40 generated, one llama_decode() per generated token."""
    page = normalize(parse_page(read_fixture(LLAMACPP_LIVE), LLAMACPP_LIVE), "llamacpp",
                     {"model": "tiny"})
    tiny = {"model": "tiny"}
    assert page.value("gen_ai_server_prompt_tokens_total", tiny) == 40.0
    assert page.value("gen_ai_server_prompt_tokens_cached_total", tiny) == 10.0
    assert page.value("gen_ai_server_generation_tokens_total", tiny) == 40.0
    assert page.value("gen_ai_server_engine_steps_total", tiny) == 40.0
    assert page.value("gen_ai_server_requests_running", tiny) == 0.0
    assert page.value("gen_ai_server_requests_waiting", tiny) == 0.0
    assert page.value(KV_USAGE, tiny) is None  # removed upstream: the legacy row finds nothing
    assert page.problems == []
