"""What a target's simultaneous anomalies most likely mean: one alert naming the limit.

Rules over which detectors are active (and a few current values), first match wins; the
evidence (each active detector's value, baseline and score) goes with the diagnosis into the
alert's annotations. The target detector settles the diagnosis over an anomaly's first steps
and keeps it while it lasts (the first signals are the likeliest cause: a slowed GPU builds a
queue, and the queue later fills the KV cache), unless it was only "unclassified" or
"unusual combination".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from monitor.anomaly.detectors import Reading
from monitor.anomaly.features import OFFERED_LOAD, THROUGHPUT, TOKEN_BUDGET_UTILIZATION


@dataclass(frozen=True, slots=True)
class Diagnosis:
    limit: str        # a short key: kv_cache_pressure, batch_size_cap, ...
    summary: str


_KV_FULL = 0.9
_BATCH_FULL = 0.95


def diagnose(active: Mapping[str, Reading], current: Mapping[str, float]) -> Diagnosis:
    """``active``: the readings of the detectors alerting now, by feature ("multivariate"
    for the forest); ``current``: this step's values of every feature."""
    def on(*names: str) -> bool:
        return any(name in active for name in names)

    def value(name: str) -> float:
        return current.get(name, math.nan)

    queueing = on("queue_depth", "ttft_p99_seconds")
    if on("error_ratio"):
        return Diagnosis("errors", "requests are failing more than usual (model errors, "
                         "timeouts or OOM); see error ratio by type")
    if on("kv_cache_usage_ratio", "preemptions_per_second") and (
            on("preemptions_per_second") or value("kv_cache_usage_ratio") >= _KV_FULL):
        return Diagnosis("kv_cache_pressure", "KV-cache pressure: the cache is nearly full "
                         "and sequences are preempted (recomputed), so requests queue")
    if on("gpu_memory_used_bytes") and not on(OFFERED_LOAD, THROUGHPUT, "queue_depth"):
        return Diagnosis("memory_leak", "GPU memory grows without more load: a likely leak")
    if on("itl_p99_seconds"):
        return _SLOW_GPU
    # Steps full of tokens first: batch_utilization is the token budget's where the engine
    # has no sequence limit, and a full token budget is not a sequence cap.
    if queueing and value(TOKEN_BUDGET_UTILIZATION) >= _BATCH_FULL:
        return _TOKEN_BUDGET
    if queueing and value("batch_utilization") >= _BATCH_FULL:
        return Diagnosis("batch_size_cap", "batches are full at the maximum number of "
                         "sequences and requests queue: the batch-size cap limits throughput")
    if on(THROUGHPUT) and not on(OFFERED_LOAD):
        return _SLOW_GPU
    if queueing:
        return _TOKEN_BUDGET
    if on("e2e_p99_seconds"):
        return _SLOW_GPU
    if on(OFFERED_LOAD):
        return Diagnosis("under_load", "the load offered fell below its baseline: clients "
                         "or routing upstream, the engine itself looks healthy")
    if on("multivariate"):
        return Diagnosis("unusual_combination", "the metrics are each within range but "
                         "their combination is unusual for this target")
    names = ", ".join(sorted(active))
    return Diagnosis("unclassified", f"anomalous: {names}")


_TOKEN_BUDGET = Diagnosis("token_budget", "requests queue while batches are not full and the "
                          "KV cache has room: the per-step token budget (chunked prefill) "
                          "limits admission")

# Steps take longer: inter-token latency up, less throughput for the same load, or requests
# taking longer without a queue in front of them.
_SLOW_GPU = Diagnosis("slow_gpu", "engine steps take longer (inter-token latency up, or less "
                      "throughput for the same load): a slow or throttled GPU or a slowed "
                      "model")
