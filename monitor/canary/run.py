"""Canary comparisons: identical live load on two endpoints, or two targets' stored data.

Live: one workload stream sent to both sides by one dispatcher (runner.run_paired), so both
endpoints get the same prompts at the same moments, in a random order per request (a fixed
order would serve one side first every time), and any difference is the servers'. The
judge then compares per-request and per-interval samples (samples.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.canary.judge import JudgeConfig, Judgement, judge
from monitor.canary.samples import Samples, run_samples, stored_samples
from monitor.loadgen.metrics import RunSummary, summarize
from monitor.loadgen.runner import Endpoint, Limits, ProgressCallback, RunResult, run_paired
from monitor.loadgen.workload import WorkloadSpec
from monitor.store import Store


@dataclass(frozen=True, slots=True)
class LiveComparison:
    baseline: RunResult
    canary: RunResult
    baseline_summary: RunSummary
    canary_summary: RunSummary
    judgement: Judgement
    interval_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"judgement": self.judgement.to_dict(),
                "interval_seconds": self.interval_seconds,
                "baseline": self.baseline_summary.to_json(),
                "canary": self.canary_summary.to_json()}


async def run_both(baseline: Endpoint, canary: Endpoint, workload: WorkloadSpec, rate: float,
                   limits: Limits, on_progress: tuple[ProgressCallback, ProgressCallback]
                   | None = None) -> tuple[RunResult, RunResult]:
    base, can = await run_paired((baseline, canary), workload.stream(rate), limits, rate=rate,
                                 on_progress=on_progress, seed=workload.seed)
    return base, can


def judge_runs(base: RunResult, can: RunResult, config: JudgeConfig,
               interval_seconds: float = 10.0, min_requests: int = 5) -> LiveComparison:
    b = run_samples(base, interval_seconds, min_requests)
    c = run_samples(can, interval_seconds, min_requests)
    return LiveComparison(base, can, summarize(base), summarize(can), judge(b, c, config),
                          interval_seconds)


@dataclass(frozen=True, slots=True)
class StoredComparison:
    baseline_target: str
    canary_target: str
    start: float
    end: float
    step: float
    baseline: Samples
    canary: Samples
    judgement: Judgement

    def to_json(self) -> dict[str, Any]:
        return {"judgement": self.judgement.to_dict(), "baseline_target": self.baseline_target,
                "canary_target": self.canary_target, "start": self.start, "end": self.end,
                "step": self.step}


def judge_stored(store: Store, baseline_target: str, canary_target: str, start: float,
                 end: float, step: float, config: JudgeConfig) -> StoredComparison:
    if end <= start:
        raise ValueError(f"the range is empty: end {end} <= start {start}")
    if step <= 0:
        raise ValueError("the step must be > 0 s")
    known = {t.name for t in store.targets()}
    for name in (baseline_target, canary_target):
        if name not in known:
            raise ValueError(f"target {name!r} is not in the store (known: "
                             f"{', '.join(sorted(known)) or 'none'})")
    b = stored_samples(store, baseline_target, start, end, step)
    c = stored_samples(store, canary_target, start, end, step)
    return StoredComparison(baseline_target, canary_target, start, end, step, b, c,
                            judge(b, c, config))
