"""The normalized LLM inference metric schema, declared once as data.

Every consumer speaks this schema: the in-process instrumentation builds its metrics from it,
engine adapters map foreign metrics onto it, the collector, dashboards and rules read it.
Names follow the OpenTelemetry GenAI semantic conventions where a metric exists there
(``gen_ai.server.time_to_first_token`` -> ``gen_ai_server_time_to_first_token_seconds``), in
Prometheus form: unit suffix in the name, ``_total`` added to counters by prometheus_client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from exporters.buckets import latency_buckets, power_of_two_buckets, token_count_buckets

# --- label names and their closed value sets --------------------------------------------------
MODEL: Final = "model"
FINISH_REASON: Final = "finish_reason"
ERROR_TYPE: Final = "error_type"
STAGE: Final = "stage"
GPU: Final = "gpu"
UUID: Final = "uuid"
# Labels with the engine's own (open) value sets; only mapped from engines, never instrumented.
REASON: Final = "reason"
SLEEP_STATE: Final = "sleep_state"
CACHE_TIER: Final = "tier"
# The gateway's labels: identity under a cardinality budget, the SLO class, the outcome.
TENANT: Final = "tenant"
SLO_CLASS: Final = "slo_class"
OUTCOME: Final = "outcome"
# ok; refused (upstream 4xx, 429 included); error (upstream 5xx, unreachable, broken stream,
# an error event in the stream);
# timeout (upstream silent past the gateway's timeout); cancelled (the client went away).
GATEWAY_OUTCOMES: Final[tuple[str, ...]] = ("ok", "refused", "error", "timeout", "cancelled")

FINISH_REASONS: Final[tuple[str, ...]] = ("stop", "length", "abort", "error", "timeout")
ERROR_TYPES: Final[tuple[str, ...]] = ("oom", "timeout", "model_error", "rejected", "bad_request",
                                        "server_error")
STEP_STAGES: Final[tuple[str, ...]] = ("schedule", "run", "postprocess")
# Labels (besides model) whose values are closed sets: their series exist from the start at 0.
LABEL_VALUES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    FINISH_REASON: FINISH_REASONS,
    ERROR_TYPE: ERROR_TYPES,
    STAGE: STEP_STAGES,
})

# --- metric names (counters without _total, as prometheus_client takes them) ------------------
PROMPT_TOKENS: Final = "gen_ai_server_prompt_tokens"
GENERATION_TOKENS: Final = "gen_ai_server_generation_tokens"
PROMPT_TOKENS_CACHED: Final = "gen_ai_server_prompt_tokens_cached"
REQUESTS: Final = "gen_ai_server_requests"
REQUEST_ERRORS: Final = "gen_ai_server_request_errors"
PREEMPTIONS: Final = "gen_ai_server_preemptions"
ENGINE_STEPS: Final = "gen_ai_server_engine_steps"
PREFIX_CACHE_QUERIES: Final = "gen_ai_server_prefix_cache_queries"
PREFIX_CACHE_HITS: Final = "gen_ai_server_prefix_cache_hits"
PROMPT_TOKENS_CACHED_BY_TIER: Final = "gen_ai_server_prompt_tokens_cached_by_tier"
ESTIMATED_FLOPS: Final = "gen_ai_server_estimated_flops"
ESTIMATED_MEMORY_READ_BYTES: Final = "gen_ai_server_estimated_memory_read_bytes"
ESTIMATED_MEMORY_WRITE_BYTES: Final = "gen_ai_server_estimated_memory_write_bytes"

REQUESTS_RUNNING: Final = "gen_ai_server_requests_running"
REQUESTS_WAITING: Final = "gen_ai_server_requests_waiting"
REQUESTS_SWAPPED: Final = "gen_ai_server_requests_swapped"
REQUESTS_WAITING_BY_REASON: Final = "gen_ai_server_requests_waiting_by_reason"
ENGINE_SLEEP_STATE: Final = "gen_ai_server_engine_sleep_state"
BATCH_SIZE_MAX: Final = "gen_ai_server_batch_size_max"
BATCHED_TOKENS_MAX: Final = "gen_ai_server_batched_tokens_max"
KV_CACHE_USAGE_RATIO: Final = "gen_ai_server_kv_cache_usage_ratio"
KV_CACHE_BLOCKS_USED: Final = "gen_ai_server_kv_cache_blocks_used"
KV_CACHE_BLOCKS_CAPACITY: Final = "gen_ai_server_kv_cache_blocks_capacity"
KV_CACHE_BLOCK_SIZE_TOKENS: Final = "gen_ai_server_kv_cache_block_size_tokens"
KV_CACHE_MEMORY_BYTES: Final = "gen_ai_server_kv_cache_memory_bytes"

TIME_TO_FIRST_TOKEN: Final = "gen_ai_server_time_to_first_token_seconds"
INTER_TOKEN_LATENCY: Final = "gen_ai_server_inter_token_latency_seconds"
TIME_PER_OUTPUT_TOKEN: Final = "gen_ai_server_time_per_output_token_seconds"
REQUEST_DURATION: Final = "gen_ai_server_request_duration_seconds"
REQUEST_QUEUE_TIME: Final = "gen_ai_server_request_queue_time_seconds"
REQUEST_PREFILL_TIME: Final = "gen_ai_server_request_prefill_time_seconds"
REQUEST_DECODE_TIME: Final = "gen_ai_server_request_decode_time_seconds"
ENGINE_STEP_DURATION: Final = "gen_ai_server_engine_step_duration_seconds"
BATCH_SIZE: Final = "gen_ai_server_batch_size"
ITERATION_TOKENS: Final = "gen_ai_server_iteration_tokens"
REQUEST_PROMPT_TOKENS: Final = "gen_ai_server_request_prompt_tokens"
REQUEST_GENERATION_TOKENS: Final = "gen_ai_server_request_generation_tokens"

GPU_UP: Final = "gpu_up"
GPU_MEMORY_USED_BYTES: Final = "gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES: Final = "gpu_memory_total_bytes"
GPU_MEMORY_KV_CACHE_BYTES: Final = "gpu_memory_kv_cache_bytes"
GPU_UTILIZATION_RATIO: Final = "gpu_utilization_ratio"
GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO: Final = "gpu_memory_bandwidth_utilization_ratio"
GPU_POWER_WATTS: Final = "gpu_power_watts"
GPU_TEMPERATURE_CELSIUS: Final = "gpu_temperature_celsius"
GPU_SM_CLOCK_HERTZ: Final = "gpu_sm_clock_hertz"

_NAME_RE: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric of the schema. ``unit`` is the base unit or counted thing ("" if none)."""

    name: str  # as prometheus_client takes it: counters without _total
    type: MetricType
    unit: str
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] | None = None  # histograms only: finite upper bounds
    otel_name: str | None = None  # OpenTelemetry GenAI semconv name, where one exists
    # False: only engines' pages provide it (mapped by an adapter table); the in-process
    # instrumentation (reference server) does not build it, and its identity table lists
    # it as missing.
    in_process: bool = True

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"{self.name!r} is not a valid Prometheus metric name")
        if self.type is MetricType.COUNTER and self.name.endswith("_total"):
            raise ValueError(f"counter {self.name!r}: give the name without _total")
        if (self.buckets is not None) != (self.type is MetricType.HISTOGRAM):
            raise ValueError(f"{self.name!r}: buckets are required for, and only for, histograms")
        if self.buckets is not None and list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError(f"{self.name!r}: buckets must be sorted and unique")

    @property
    def exposed_name(self) -> str:
        """The name as it appears on /metrics (counters gain _total)."""
        return f"{self.name}_total" if self.type is MetricType.COUNTER else self.name


def _counter(name: str, unit: str, help: str, *extra: str, in_process: bool = True
             ) -> MetricSpec:
    return MetricSpec(name, MetricType.COUNTER, unit, help, (MODEL, *extra),
                      in_process=in_process)


def _gauge(name: str, unit: str, help: str, *extra: str, in_process: bool = True
           ) -> MetricSpec:
    return MetricSpec(name, MetricType.GAUGE, unit, help, (MODEL, *extra), in_process=in_process)


def _histogram(
    name: str,
    unit: str,
    help: str,
    buckets: tuple[float, ...],
    *extra: str,
    otel_name: str | None = None,
) -> MetricSpec:
    return MetricSpec(name, MetricType.HISTOGRAM, unit, help, (MODEL, *extra), buckets, otel_name)


def _gpu_gauge(name: str, unit: str, help: str) -> MetricSpec:
    return MetricSpec(name, MetricType.GAUGE, unit, help, (GPU, UUID))


# Request latencies: R20 over 1 ms..60 s (p99 within 1.5% for long tails with PromQL's linear
# interpolation, 2.6% for tight ones; 0.5% with exporters.buckets.log_slope_quantile, issue 21;
# bench/percentile_accuracy.py);
# whole-request and decode times run longer (long generations), so 1 ms..10 min. Step stages
# are diagnostics.
_LATENCY = latency_buckets()
_LONG_LATENCY = latency_buckets(min_seconds=0.001, max_seconds=600.0)
_STEP_LATENCY = latency_buckets(min_seconds=0.0001, max_seconds=10.0, per_decade=10)
_TOKENS_PER_REQUEST = token_count_buckets(100_000)

_COUNTERS: Final[tuple[MetricSpec, ...]] = (
    _counter(PROMPT_TOKENS, "tokens",
             "Prompt tokens computed in prefill by the engine, counted when the step that "
             "computes them finishes (recomputation after preemption included, prefix-cache "
             "hits excluded)"),
    _counter(GENERATION_TOKENS, "tokens",
             "Output tokens emitted by the engine, counted per step"),
    _counter(PROMPT_TOKENS_CACHED, "tokens",
             "Prompt tokens served from the prefix cache instead of being computed, counted "
             "when the request is admitted to a step"),
    _counter(REQUESTS, "requests",
             "Requests that entered the engine and finished, by finish reason (stop, length, "
             "abort, error, timeout); requests refused at admission are not counted here",
             FINISH_REASON),
    _counter(REQUEST_ERRORS, "requests",
             "Failed requests by error type (oom, timeout, model_error, rejected, bad_request, "
             "server_error), including requests refused before entering the engine (rejected, "
             "bad_request) and those the engine's API server answered with a 5xx (server_error)",
             ERROR_TYPE),
    _counter(PREEMPTIONS, "preemptions",
             "Sequences preempted by the scheduler to free KV-cache blocks"),
    _counter(ENGINE_STEPS, "steps",
             "Engine iterations (schedule, run, postprocess) completed"),
    # From engines only (in_process=False): what vLLM exports beyond the core set.
    _counter(PREFIX_CACHE_QUERIES, "tokens",
             "Prompt tokens looked up in the engine's local prefix cache (the hit ratio's "
             "denominator)", in_process=False),
    _counter(PREFIX_CACHE_HITS, "tokens",
             "Prompt tokens found in the engine's local prefix cache, of those looked up",
             in_process=False),
    _counter(PROMPT_TOKENS_CACHED_BY_TIER, "tokens",
             "Prompt tokens served from a cache instead of being computed, by the cache tier "
             "that supplied them (the engine's own names: device, host, disk, p2p ...)",
             CACHE_TIER, in_process=False),
    _counter(ESTIMATED_FLOPS, "flops",
             "Floating-point operations the engine estimates it executed, per GPU (model "
             "FLOPs utilisation: the rate over the GPU's peak)", in_process=False),
    _counter(ESTIMATED_MEMORY_READ_BYTES, "bytes",
             "Bytes the engine estimates it read from accelerator memory, per GPU (memory "
             "bandwidth utilisation: the rate over the GPU's peak)", in_process=False),
    _counter(ESTIMATED_MEMORY_WRITE_BYTES, "bytes",
             "Bytes the engine estimates it wrote to accelerator memory, per GPU",
             in_process=False),
)

_GAUGES: Final[tuple[MetricSpec, ...]] = (
    _gauge(REQUESTS_RUNNING, "requests",
           "Requests in the running batch after the last engine step"),
    _gauge(REQUESTS_WAITING, "requests",
           "Requests queued in the engine waiting to be scheduled, after the last engine step"),
    _gauge(REQUESTS_SWAPPED, "requests",
           "Requests preempted with their KV cache swapped out to CPU memory, after the last "
           "engine step"),
    _gauge(BATCH_SIZE_MAX, "sequences",
           "Configured maximum number of sequences in one engine step (max_num_seqs)"),
    _gauge(BATCHED_TOKENS_MAX, "tokens",
           "Configured token budget of one engine step (max_num_batched_tokens)"),
    _gauge(KV_CACHE_USAGE_RATIO, "ratio",
           "Fraction of KV-cache blocks in use after the last engine step (0 to 1)"),
    _gauge(KV_CACHE_BLOCKS_USED, "blocks",
           "KV-cache blocks in use after the last engine step"),
    _gauge(KV_CACHE_BLOCKS_CAPACITY, "blocks",
           "KV-cache blocks the engine manages in total (used plus free)"),
    _gauge(KV_CACHE_BLOCK_SIZE_TOKENS, "tokens",
           "Tokens held by one KV-cache block, as configured in the engine"),
    _gauge(KV_CACHE_MEMORY_BYTES, "bytes",
           "Accelerator memory the engine allocated for its KV cache"),
    _gauge(REQUESTS_WAITING_BY_REASON, "requests",
           "Requests waiting to be scheduled by the engine's reason (vLLM: capacity, "
           "deferred); the reasons add up to the requests waiting", REASON, in_process=False),
    _gauge(ENGINE_SLEEP_STATE, "",
           "1 for the engine's current sleep state, 0 for the others (vLLM: awake, "
           "weights_offloaded, discard_all); a sleeping engine serves nothing",
           SLEEP_STATE, in_process=False),
)

_HISTOGRAMS: Final[tuple[MetricSpec, ...]] = (
    _histogram(TIME_TO_FIRST_TOKEN, "seconds",
               "Time from request arrival to the first output token, measured by the engine",
               _LATENCY, otel_name="gen_ai.server.time_to_first_token"),
    _histogram(INTER_TOKEN_LATENCY, "seconds",
               "Time between two consecutive output tokens of one request, measured by the "
               "engine at each step", _LATENCY),
    _histogram(TIME_PER_OUTPUT_TOKEN, "seconds",
               "Mean time per output token after the first of one finished request: "
               "(e2e - ttft) / (output tokens - 1), measured by the engine",
               _LATENCY, otel_name="gen_ai.server.time_per_output_token"),
    _histogram(REQUEST_DURATION, "seconds",
               "End-to-end time from request arrival to its finish (any outcome), measured by "
               "the engine", _LONG_LATENCY, otel_name="gen_ai.server.request.duration"),
    _histogram(REQUEST_QUEUE_TIME, "seconds",
               "Time from request arrival until the engine first schedules it", _LATENCY),
    _histogram(REQUEST_PREFILL_TIME, "seconds",
               "Time from a request's first scheduling to its first output token", _LATENCY),
    _histogram(REQUEST_DECODE_TIME, "seconds",
               "Time from a request's first output token to its last", _LONG_LATENCY),
    _histogram(ENGINE_STEP_DURATION, "seconds",
               "Wall time of one engine step by stage (schedule, run, postprocess)",
               _STEP_LATENCY, STAGE),
    _histogram(BATCH_SIZE, "sequences",
               "Sequences processed in one engine step", power_of_two_buckets(1024)),
    _histogram(ITERATION_TOKENS, "tokens",
               "Tokens (prefill plus decode) computed in one engine step",
               power_of_two_buckets(16384)),
    _histogram(REQUEST_PROMPT_TOKENS, "tokens",
               "Prompt length of each finished request in tokens", _TOKENS_PER_REQUEST),
    _histogram(REQUEST_GENERATION_TOKENS, "tokens",
               "Output tokens generated for each finished request", _TOKENS_PER_REQUEST),
)

ENGINE_SPECS: Final[tuple[MetricSpec, ...]] = _COUNTERS + _GAUGES + _HISTOGRAMS

GPU_SPECS: Final[tuple[MetricSpec, ...]] = (
    MetricSpec(GPU_UP, MetricType.GAUGE, "",
               "1 if the last read of the GPU management library (NVML/DCGM) succeeded, else 0",
               ()),
    _gpu_gauge(GPU_MEMORY_USED_BYTES, "bytes",
               "Device memory in use on the GPU, all processes, as reported by NVML/DCGM"),
    _gpu_gauge(GPU_MEMORY_TOTAL_BYTES, "bytes",
               "Device memory installed on the GPU, as reported by NVML/DCGM"),
    _gpu_gauge(GPU_MEMORY_KV_CACHE_BYTES, "bytes",
               "Device memory on this GPU reserved by the inference engine for its KV cache"),
    _gpu_gauge(GPU_UTILIZATION_RATIO, "ratio",
               "Fraction of the last sample period in which a kernel ran on the GPU (0 to 1), "
               "as reported by NVML/DCGM"),
    _gpu_gauge(GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO, "ratio",
               "Fraction of the last sample period in which device memory was read or written "
               "(0 to 1), as reported by NVML/DCGM"),
    _gpu_gauge(GPU_POWER_WATTS, "watts",
               "Power drawn by the GPU board, as reported by NVML/DCGM"),
    _gpu_gauge(GPU_TEMPERATURE_CELSIUS, "celsius",
               "GPU die temperature, as reported by NVML/DCGM"),
    _gpu_gauge(GPU_SM_CLOCK_HERTZ, "hertz",
               "Current streaming-multiprocessor clock frequency, as reported by NVML/DCGM"),
)

SCHEMA: Final[tuple[MetricSpec, ...]] = ENGINE_SPECS + GPU_SPECS

# --- the gateway's own page (`inferwatch gateway`): per-request events judged at the edge ---
# Not part of SCHEMA (engine and GPU pages, which adapters map onto): the gateway measures
# what the client sees, so its latencies are not the engine's and keep their own names on
# /metrics. Its OTLP metrics push (monitor/gateway/otlp_metrics.py) uses the OTel names: there
# the gateway is the gen_ai server its clients talk to.
GATEWAY_REQUESTS: Final = "inferwatch_gateway_requests"
GATEWAY_GOOD_REQUESTS: Final = "inferwatch_gateway_good_requests"
GATEWAY_PROMPT_TOKENS: Final = "inferwatch_gateway_prompt_tokens"
GATEWAY_GENERATION_TOKENS: Final = "inferwatch_gateway_generation_tokens"
GATEWAY_TIME_TO_FIRST_TOKEN: Final = "inferwatch_gateway_time_to_first_token_seconds"
GATEWAY_TIME_TO_FIRST_CONTENT_TOKEN: Final = (
    "inferwatch_gateway_time_to_first_content_token_seconds")
GATEWAY_INTER_TOKEN_LATENCY: Final = "inferwatch_gateway_inter_token_latency_seconds"
GATEWAY_TIME_PER_OUTPUT_TOKEN: Final = "inferwatch_gateway_time_per_output_token_seconds"
GATEWAY_REQUEST_DURATION: Final = "inferwatch_gateway_request_duration_seconds"

_IDENTITY: Final = (TENANT, SLO_CLASS)
# Histograms carry no tenant: ~100 buckets per series times the tenant budget would be the
# biggest series count of the page; per-tenant goodness is exact in the counters.
_GATEWAY_LATENCY: Final = latency_buckets(min_seconds=0.0001, max_seconds=60.0)

GATEWAY_SPECS: Final[tuple[MetricSpec, ...]] = (
    _counter(GATEWAY_REQUESTS, "requests",
             "Requests that went through the gateway and finished, by outcome (ok, refused: "
             "upstream 4xx or 429, error: upstream 5xx, unreachable or an error event mid-stream, "
             "timeout: upstream silent past the gateway's timeout, cancelled: the client "
             "disconnected; never good)",
             *_IDENTITY, OUTCOME),
    _counter(GATEWAY_GOOD_REQUESTS, "requests",
             "Requests judged good at the gateway: outcome ok AND TTFT <= the SLO class's TTFT "
             "target AND TPOT (the request's mean inter-token latency, as vllm bench serve's "
             "goodput) <= its ITL target", *_IDENTITY),
    _counter(GATEWAY_PROMPT_TOKENS, "tokens",
             "Prompt tokens of finished requests, from the upstream's usage", *_IDENTITY),
    _counter(GATEWAY_GENERATION_TOKENS, "tokens",
             "Output tokens of finished requests, from the upstream's usage (token chunks "
             "counted when it reports none)", *_IDENTITY),
    _histogram(GATEWAY_TIME_TO_FIRST_TOKEN, "seconds",
               "Time from the request's arrival at the gateway to the first token of any kind "
               "(reasoning included); non-streaming: to the response", _GATEWAY_LATENCY,
               SLO_CLASS, otel_name="gen_ai.server.time_to_first_token"),
    _histogram(GATEWAY_TIME_TO_FIRST_CONTENT_TOKEN, "seconds",
               "Time from the request's arrival at the gateway to the first content token "
               "(after a reasoning model's reasoning), streaming requests", _GATEWAY_LATENCY,
               SLO_CLASS),
    _histogram(GATEWAY_INTER_TOKEN_LATENCY, "seconds",
               "Gaps between consecutive token chunks of one streamed request, as forwarded",
               _GATEWAY_LATENCY, SLO_CLASS),
    _histogram(GATEWAY_TIME_PER_OUTPUT_TOKEN, "seconds",
               "(e2e - ttft) / (output tokens - 1) of each streamed request with 2+ tokens",
               _GATEWAY_LATENCY, SLO_CLASS, otel_name="gen_ai.server.time_per_output_token"),
    _histogram(GATEWAY_REQUEST_DURATION, "seconds",
               "Time from the request's arrival at the gateway to the last byte forwarded, "
               "any outcome", _LONG_LATENCY, SLO_CLASS,
               otel_name="gen_ai.server.request.duration"),
)
# The engine metrics the in-process instrumentation builds (the reference server's page).
IN_PROCESS_ENGINE_SPECS: Final[tuple[MetricSpec, ...]] = tuple(
    spec for spec in ENGINE_SPECS if spec.in_process)

# Gateway metrics are found too, so an SLO can take its good/total counters (a ratio SLI).
_BY_NAME: Final[Mapping[str, MetricSpec]] = MappingProxyType({
    alias: spec for spec in SCHEMA + GATEWAY_SPECS for alias in (spec.name, spec.exposed_name)
})


def get_spec(name: str) -> MetricSpec:
    """The spec of a schema metric, by its name or its exposed name (with _total)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not a metric of the inferwatch schema "
            "(see exporters.schema.SCHEMA and GATEWAY_SPECS for the names)"
        ) from None
