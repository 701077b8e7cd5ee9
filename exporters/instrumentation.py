"""In-process instrumentation: what an engine calls at its seams (after each step, at each
request's end, when it refuses a request).

``PrometheusEngineMetrics`` builds every engine metric of the schema on the registry it is
given and resolves all label children once, so the per-step path is attribute loads and
``inc``/``set``/``observe`` calls only. ``NullEngineMetrics`` is the metrics-off baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, Counter, Gauge

from exporters import schema
from exporters.fast_histogram import SingleWriterHistogram
from exporters.schema import IN_PROCESS_ENGINE_SPECS, LABEL_VALUES, MetricSpec, MetricType


@dataclass(slots=True)
class StepStats:
    """One engine iteration, recorded after postprocess."""

    num_running: int
    num_waiting: int
    num_swapped: int
    batch_size: int  # sequences in this step
    num_prefill_tokens: int  # prompt tokens computed this step
    num_decode_tokens: int  # decode tokens computed this step
    num_cached_prompt_tokens: int  # prompt tokens served from prefix cache at admission
    num_preemptions: int
    kv_blocks_used: int
    kv_blocks_total: int
    schedule_seconds: float
    run_seconds: float
    postprocess_seconds: float
    inter_token_latencies: list[float]  # one per sequence that emitted a non-first token
    num_generation_tokens: int  # output tokens emitted this step


@dataclass(slots=True)
class RequestStats:
    """One finished request, any outcome."""

    finish_reason: str  # stop | length | abort | error | timeout
    error_type: str | None  # None, or oom | timeout | model_error | rejected | bad_request
    num_prompt_tokens: int
    num_generation_tokens: int
    queue_seconds: float | None  # arrival -> first scheduled
    ttft_seconds: float | None  # arrival -> first token
    prefill_seconds: float | None  # first scheduled -> first token
    decode_seconds: float | None  # first token -> last token
    e2e_seconds: float  # arrival -> finish


@runtime_checkable
class EngineMetrics(Protocol):
    def record_step(self, stats: StepStats) -> None: ...

    def record_request(self, stats: RequestStats) -> None: ...

    def record_rejected(self, error_type: str) -> None:
        """A request refused before entering the engine (queue full: "rejected", 400:
        "bad_request")."""
        ...


class NullEngineMetrics:
    """Records nothing: metrics off (the overhead benchmark's baseline)."""

    __slots__ = ()

    def record_step(self, stats: StepStats) -> None:
        pass

    def record_request(self, stats: RequestStats) -> None:
        pass

    def record_rejected(self, error_type: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Families:
    """The metric families of one registry by schema name, split by type for typed access."""

    counters: dict[str, Counter]
    gauges: dict[str, Gauge]
    histograms: dict[str, SingleWriterHistogram]


def _build_families(registry: CollectorRegistry, model: str) -> _Families:
    """Every in-process engine metric of the schema on ``registry``, built from the spec data
    (those only engines export, ``in_process=False``, have nothing to record here)."""
    families = _Families({}, {}, {})
    for spec in IN_PROCESS_ENGINE_SPECS:
        metric: Counter | Gauge | SingleWriterHistogram
        if spec.type is MetricType.COUNTER:
            metric = families.counters[spec.name] = Counter(
                spec.name, spec.help, spec.labels, registry=registry
            )
        elif spec.type is MetricType.GAUGE:
            metric = families.gauges[spec.name] = Gauge(
                spec.name, spec.help, spec.labels, registry=registry
            )
        else:
            # Histograms are recorded by the engine loop alone (per token, for ITL).
            metric = families.histograms[spec.name] = SingleWriterHistogram(
                spec.name, spec.help, spec.labels, spec.buckets or (), registry
            )
        _create_series(metric, spec, model)
    return families


def _create_series(metric: Counter | Gauge | SingleWriterHistogram, spec: MetricSpec,
                   model: str) -> None:
    """Create every child now, so each series exists (at 0) from the first scrape; the extra
    label, if any, must have a closed value set (bounded cardinality)."""
    if spec.labels == (schema.MODEL,):
        metric.labels(model)
        return
    if len(spec.labels) != 2 or spec.labels[1] not in LABEL_VALUES:
        raise ValueError(f"{spec.name}: no instrumentation for labels {spec.labels}")
    for value in LABEL_VALUES[spec.labels[1]]:
        metric.labels(model, value)


class PrometheusEngineMetrics:
    """Engine metrics of the schema, for one model, on ``registry``.

    One instance per registry: a second on the same registry is refused by prometheus_client
    (duplicated timeseries), so a multi-model process gives each model its own registry.
    Counters and gauges take prometheus_client's lock on every inc/set; histograms are
    SingleWriterHistogram (binary search, no lock), recorded by the engine loop only.
    """

    __slots__ = (
        "_prompt_tokens", "_generation_tokens", "_cached_prompt_tokens", "_preemptions",
        "_engine_steps", "_requests", "_errors",
        "_running", "_waiting", "_swapped", "_kv_usage", "_kv_blocks_used", "_kv_blocks_total",
        "_ttft", "_itl", "_tpot", "_e2e", "_queue_time", "_prefill_time", "_decode_time",
        "_schedule_time", "_run_time", "_postprocess_time", "_batch_size", "_iteration_tokens",
        "_request_prompt_tokens", "_request_generation_tokens",
    )

    def __init__(
        self,
        registry: CollectorRegistry,
        model: str,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        kv_block_size: int,
        kv_cache_bytes: int,
    ) -> None:
        config = {
            schema.BATCH_SIZE_MAX: max_num_seqs,
            schema.BATCHED_TOKENS_MAX: max_num_batched_tokens,
            schema.KV_CACHE_BLOCK_SIZE_TOKENS: kv_block_size,
            schema.KV_CACHE_MEMORY_BYTES: kv_cache_bytes,
        }
        for name, value in config.items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        families = _build_families(registry, model)
        for name, value in config.items():
            families.gauges[name].labels(model).set(value)
        self._bind_step_metrics(families, model)
        self._bind_request_metrics(families, model)

    def _bind_step_metrics(self, families: _Families, model: str) -> None:
        counters, gauges, histograms = families.counters, families.gauges, families.histograms
        self._prompt_tokens = counters[schema.PROMPT_TOKENS].labels(model)
        self._generation_tokens = counters[schema.GENERATION_TOKENS].labels(model)
        self._cached_prompt_tokens = counters[schema.PROMPT_TOKENS_CACHED].labels(model)
        self._preemptions = counters[schema.PREEMPTIONS].labels(model)
        self._engine_steps = counters[schema.ENGINE_STEPS].labels(model)
        self._running = gauges[schema.REQUESTS_RUNNING].labels(model)
        self._waiting = gauges[schema.REQUESTS_WAITING].labels(model)
        self._swapped = gauges[schema.REQUESTS_SWAPPED].labels(model)
        self._kv_usage = gauges[schema.KV_CACHE_USAGE_RATIO].labels(model)
        self._kv_blocks_used = gauges[schema.KV_CACHE_BLOCKS_USED].labels(model)
        self._kv_blocks_total = gauges[schema.KV_CACHE_BLOCKS_CAPACITY].labels(model)
        self._itl = histograms[schema.INTER_TOKEN_LATENCY].labels(model)
        step_duration = histograms[schema.ENGINE_STEP_DURATION]
        self._schedule_time = step_duration.labels(model, "schedule")
        self._run_time = step_duration.labels(model, "run")
        self._postprocess_time = step_duration.labels(model, "postprocess")
        self._batch_size = histograms[schema.BATCH_SIZE].labels(model)
        self._iteration_tokens = histograms[schema.ITERATION_TOKENS].labels(model)

    def _bind_request_metrics(self, families: _Families, model: str) -> None:
        requests = families.counters[schema.REQUESTS]
        errors = families.counters[schema.REQUEST_ERRORS]
        self._requests = {r: requests.labels(model, r) for r in schema.FINISH_REASONS}
        self._errors = {e: errors.labels(model, e) for e in schema.ERROR_TYPES}
        histograms = families.histograms
        self._ttft = histograms[schema.TIME_TO_FIRST_TOKEN].labels(model)
        self._tpot = histograms[schema.TIME_PER_OUTPUT_TOKEN].labels(model)
        self._e2e = histograms[schema.REQUEST_DURATION].labels(model)
        self._queue_time = histograms[schema.REQUEST_QUEUE_TIME].labels(model)
        self._prefill_time = histograms[schema.REQUEST_PREFILL_TIME].labels(model)
        self._decode_time = histograms[schema.REQUEST_DECODE_TIME].labels(model)
        self._request_prompt_tokens = histograms[schema.REQUEST_PROMPT_TOKENS].labels(model)
        self._request_generation_tokens = histograms[schema.REQUEST_GENERATION_TOKENS].labels(
            model
        )

    def record_step(self, stats: StepStats) -> None:
        # Hot path (every iteration): no label lookups, and inc(0) skipped (each takes a lock).
        self._running.set(stats.num_running)
        self._waiting.set(stats.num_waiting)
        self._swapped.set(stats.num_swapped)
        self._kv_blocks_used.set(stats.kv_blocks_used)
        self._kv_blocks_total.set(stats.kv_blocks_total)
        if stats.kv_blocks_total:
            self._kv_usage.set(stats.kv_blocks_used / stats.kv_blocks_total)
        else:
            self._kv_usage.set(0.0)
        if stats.num_prefill_tokens:
            self._prompt_tokens.inc(stats.num_prefill_tokens)
        if stats.num_generation_tokens:
            self._generation_tokens.inc(stats.num_generation_tokens)
        if stats.num_cached_prompt_tokens:
            self._cached_prompt_tokens.inc(stats.num_cached_prompt_tokens)
        if stats.num_preemptions:
            self._preemptions.inc(stats.num_preemptions)
        self._engine_steps.inc()
        self._schedule_time.observe(stats.schedule_seconds)
        self._run_time.observe(stats.run_seconds)
        self._postprocess_time.observe(stats.postprocess_seconds)
        # An empty step is no batch: a 0 would land in the le="1" bucket and read as size 1.
        if stats.batch_size:
            self._batch_size.observe(stats.batch_size)
            self._iteration_tokens.observe(stats.num_prefill_tokens + stats.num_decode_tokens)
        observe_itl = self._itl.observe
        for latency in stats.inter_token_latencies:
            observe_itl(latency)

    def record_request(self, stats: RequestStats) -> None:
        _child(self._requests, stats.finish_reason, "finish_reason").inc()
        if stats.error_type is not None:
            _child(self._errors, stats.error_type, "error_type").inc()
        self._request_prompt_tokens.observe(stats.num_prompt_tokens)
        self._request_generation_tokens.observe(stats.num_generation_tokens)
        self._e2e.observe(stats.e2e_seconds)
        if stats.queue_seconds is not None:
            self._queue_time.observe(stats.queue_seconds)
        if stats.prefill_seconds is not None:
            self._prefill_time.observe(stats.prefill_seconds)
        if stats.decode_seconds is not None:
            self._decode_time.observe(stats.decode_seconds)
        if stats.ttft_seconds is not None:
            self._ttft.observe(stats.ttft_seconds)
            # TPOT as vLLM defines it; undefined with fewer than two output tokens.
            if stats.num_generation_tokens > 1:
                tpot = (stats.e2e_seconds - stats.ttft_seconds) / (stats.num_generation_tokens - 1)
                self._tpot.observe(tpot)

    def record_rejected(self, error_type: str) -> None:
        _child(self._errors, error_type, "error_type").inc()


def _child(children: Mapping[str, Counter], value: str, label: str) -> Counter:
    try:
        return children[value]
    except KeyError:
        # A closed set keeps cardinality bounded; an unknown value is a bug in the caller.
        raise ValueError(
            f"unknown {label} {value!r}: expected one of {sorted(children)}"
        ) from None
