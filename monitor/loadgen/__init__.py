"""Load generation against OpenAI-compatible endpoints: workloads, open/closed-loop runs,
vLLM-style metrics, rate sweeps to the SLO-bounded capacity, capacity planning."""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.loadgen.metrics import LatencySlo, RunSummary, summarize
from monitor.loadgen.runner import Endpoint, Limits, RequestRecord, RunResult, run_load
from monitor.loadgen.workload import LengthDist, RequestSpec, WorkloadSpec

__all__ = [
    "Endpoint",
    "LatencySlo",
    "LengthDist",
    "Limits",
    "RequestRecord",
    "RequestSpec",
    "RunResult",
    "RunSummary",
    "WorkloadSpec",
    "run_load",
    "send_requests",
    "summarize",
]


async def send_requests(base_url: str, model: str, specs: Sequence[RequestSpec],
                        timeout_seconds: float = 120.0) -> list[RequestRecord]:
    """Send exactly ``specs`` (completions API) at their arrival times; their records."""
    endpoint = Endpoint(base_url, model, timeout_seconds=timeout_seconds)
    result = await run_load(endpoint, specs, Limits(num_requests=len(specs)), rate=math.nan)
    return result.records
