"""inferwatch exporters: the normalized LLM metric schema, its buckets, and in-process
instrumentation for engines."""

from exporters.buckets import (
    SLO_THRESHOLDS_SECONDS,
    interpolate_quantile,
    log_slope_quantile,
    latency_buckets,
    power_of_two_buckets,
    token_count_buckets,
)
from exporters.instrumentation import (
    EngineMetrics,
    NullEngineMetrics,
    PrometheusEngineMetrics,
    RequestStats,
    StepStats,
)
from exporters.schema import (
    ENGINE_SPECS,
    GPU_SPECS,
    SCHEMA,
    MetricSpec,
    MetricType,
    get_spec,
)

__all__ = [
    "ENGINE_SPECS",
    "GPU_SPECS",
    "SCHEMA",
    "SLO_THRESHOLDS_SECONDS",
    "EngineMetrics",
    "MetricSpec",
    "MetricType",
    "NullEngineMetrics",
    "PrometheusEngineMetrics",
    "RequestStats",
    "StepStats",
    "get_spec",
    "interpolate_quantile",
    "log_slope_quantile",
    "latency_buckets",
    "power_of_two_buckets",
    "token_count_buckets",
]
