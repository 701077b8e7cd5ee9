"""Capacity planning from a measured per-replica capacity: replicas for a peak, and cost.

A request's work is modelled as output tokens + ``prefill_weight`` x prompt tokens: decode
dominates the time a request holds a batch slot, and a prefill token costs a fraction of a
decode token because prefill runs many tokens per forward pass. The weight is the one
assumption here; set it from your own measurements (0 when prompts are short). Capacity
measured at one token mix is rescaled to another by the ratio of work per request.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

# Work of one prompt token in decode-token units (see the module doc); 0 for short prompts.
DEFAULT_PREFILL_WEIGHT: Final = 0.1


@dataclass(frozen=True, slots=True)
class CapacityInputs:
    replica_max_qps: float          # measured: the highest rate one replica sustains in SLO
    measured_input_tokens: float    # mean prompt tokens of the measured load
    measured_output_tokens: float
    peak_qps: float
    peak_input_tokens: float | None = None    # None: the measured mix
    peak_output_tokens: float | None = None
    target_utilization: float = 0.7           # of the SLO-bounded capacity, per replica
    redundancy: int = 1                       # N+1
    prefill_weight: float = DEFAULT_PREFILL_WEIGHT
    gpus_per_replica: int = 1
    gpu_hour_price: float | None = None       # currency per GPU-hour

    def __post_init__(self) -> None:
        if self.replica_max_qps <= 0:
            raise ValueError("the measured capacity must be > 0 req/s")
        if not 0 < self.target_utilization <= 1:
            raise ValueError("target utilization must be in (0, 1]")
        if self.peak_qps < 0 or self.redundancy < 0 or self.gpus_per_replica < 1:
            raise ValueError("peak QPS and redundancy must be >= 0, GPUs per replica >= 1")


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    replica_qps_at_peak_mix: float     # the measured capacity rescaled to the peak's mix
    replicas_for_peak: int             # N at the target utilization
    replicas: int                      # N + redundancy
    utilization_at_peak: float         # with all N + redundancy serving
    cost_per_hour: float | None
    cost_per_million_output_tokens: float | None       # the fleet at peak
    cost_per_million_tokens: float | None              # prompt + output, fleet at peak
    replica_cost_per_million_output_tokens: float | None   # one replica at its capacity

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def format(self, inputs: CapacityInputs) -> str:
        lines = [
            f"capacity plan: peak {inputs.peak_qps:g} req/s needs {self.replicas_for_peak} "
            f"replica(s) at {inputs.target_utilization:.0%} of "
            f"{self.replica_qps_at_peak_mix:.3g} req/s each, {self.replicas} with "
            f"N+{inputs.redundancy} ({self.utilization_at_peak:.0%} utilized at peak)"]
        if self.cost_per_hour is not None:
            lines.append(
                f"cost: {self.cost_per_hour:.2f}/hour; per million output tokens "
                f"{self.cost_per_million_output_tokens:.3f} (fleet at peak), "
                f"{self.replica_cost_per_million_output_tokens:.3f} (one replica at capacity); "
                f"per million tokens in+out {self.cost_per_million_tokens:.3f}")
        return "\n".join(lines)


def plan(inputs: CapacityInputs) -> CapacityPlan:
    w = inputs.prefill_weight
    peak_in = inputs.peak_input_tokens if inputs.peak_input_tokens is not None \
        else inputs.measured_input_tokens
    peak_out = inputs.peak_output_tokens if inputs.peak_output_tokens is not None \
        else inputs.measured_output_tokens
    measured_work = inputs.measured_output_tokens + w * inputs.measured_input_tokens
    peak_work = peak_out + w * peak_in
    if measured_work <= 0 or peak_work <= 0:
        raise ValueError("token mix: requests must carry some tokens")
    qps = inputs.replica_max_qps * measured_work / peak_work
    needed = math.ceil(inputs.peak_qps / (qps * inputs.target_utilization) - 1e-9)
    replicas = needed + inputs.redundancy
    utilization = inputs.peak_qps / (qps * replicas) if replicas else math.inf
    price = inputs.gpu_hour_price
    if price is None:
        return CapacityPlan(qps, needed, replicas, utilization, None, None, None, None)
    per_hour = replicas * inputs.gpus_per_replica * price
    out_per_hour = inputs.peak_qps * peak_out * 3600
    all_per_hour = inputs.peak_qps * (peak_out + peak_in) * 3600
    replica_out_per_hour = inputs.replica_max_qps * inputs.measured_output_tokens * 3600
    return CapacityPlan(
        qps, needed, replicas, utilization, per_hour,
        per_hour / out_per_hour * 1e6 if out_per_hour else math.inf,
        per_hour / all_per_hour * 1e6 if all_per_hour else math.inf,
        inputs.gpus_per_replica * price / replica_out_per_hour * 1e6
        if replica_out_per_hour else math.inf)
