"""The anomaly detectors' per-target signals (monitor.anomaly.features) as PromQL over the
normalized schema, one value per target (``job``, ``instance``) at each rule evaluation.

Rates are over 5 minutes where the embedded monitor takes one step's difference: the rule
file's signals are smoother, so the same thresholds fire a little later and on less noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from exporters import schema
from monitor.anomaly.detectors import Direction
from monitor.anomaly.features import OFFERED_LOAD, SCORED, THROUGHPUT, Feature

TARGET: Final = "job, instance"  # the labels a target is (what Prometheus attaches)
RATE_WINDOW: Final = "5m"
RECORD_PREFIX: Final = "inferwatch_target:"


@dataclass(frozen=True, slots=True)
class Signal:
    feature: Feature
    expr: str

    @property
    def record(self) -> str:
        return RECORD_PREFIX + self.feature.name


def _counter(metric: str, where: str = "") -> str:
    name = schema.get_spec(metric).exposed_name
    return f"sum by ({TARGET}) (rate({name}{where}[{RATE_WINDOW}]))"


def _or_zero(expr: str, like: str) -> str:
    """``expr``, or 0 for a target that lacks its series (``+`` would drop the target)."""
    return f"({expr} or ({like}) * 0)"


def _p99(histogram: str) -> str:
    return (f"histogram_quantile(0.99, sum by ({TARGET}, le) "
            f"(rate({histogram}_bucket[{RATE_WINDOW}])))")


def _offered_load() -> str:
    """Finished + rejected requests per second + the growth of requests in flight, as in
    features.read_features: a server falling behind is still offered the same load."""
    finished = _counter(schema.REQUESTS)
    rejected = _counter(schema.REQUEST_ERRORS, '{error_type="rejected"}')
    growth = " + ".join(f"sum by ({TARGET}) (deriv({gauge}[{RATE_WINDOW}]))"
                        for gauge in (schema.REQUESTS_WAITING, schema.REQUESTS_RUNNING))
    return (f"clamp_min({finished} + {_or_zero(rejected, finished)} + "
            f"{_or_zero(growth, finished)}, 0)")


def _expressions() -> dict[str, str]:
    requests = _counter(schema.REQUESTS)
    return {
        OFFERED_LOAD: _offered_load(),
        "ttft_p99_seconds": _p99(schema.TIME_TO_FIRST_TOKEN),
        "itl_p99_seconds": _p99(schema.INTER_TOKEN_LATENCY),
        "e2e_p99_seconds": _p99(schema.REQUEST_DURATION),
        "kv_cache_usage_ratio": f"max by ({TARGET}) ({schema.KV_CACHE_USAGE_RATIO})",
        "queue_depth": f"sum by ({TARGET}) ({schema.REQUESTS_WAITING})",
        "error_ratio": f"{_counter(schema.REQUEST_ERRORS)} / ({requests} > 0)",
        "gpu_memory_used_bytes": f"sum by ({TARGET}) ({schema.GPU_MEMORY_USED_BYTES})",
        "preemptions_per_second": _counter(schema.PREEMPTIONS),
    }


def scored_signals() -> tuple[Signal, ...]:
    """Every robustly scored feature, in features.SCORED's order."""
    expressions = _expressions()
    return tuple(Signal(feature, expressions[feature.name]) for feature in SCORED)


def throughput_signal() -> Signal:
    """Prompt + generated tokens per second, the ratio detector's signal."""
    prompt, generated = _counter(schema.PROMPT_TOKENS), _counter(schema.GENERATION_TOKENS)
    return Signal(Feature(THROUGHPUT, Direction.DOWN, 0.0, "tokens/s"),
                  f"{prompt} + {_or_zero(generated, prompt)}")
