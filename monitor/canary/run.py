"""Canary comparisons: identical live load on two endpoints, or two targets' stored data.

Live: one workload stream sent to both sides by one dispatcher (runner.run_paired), so both
endpoints get the same prompts at the same moments, in a random order per request (a fixed
order would serve one side first every time), and any difference is the servers'. The
judge then compares per-request and per-interval samples (samples.py), the per-request
ones clustered by the interval they were sent in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from monitor.canary.judge import JudgeConfig, Judgement, Verdict, judge
from monitor.canary.samples import (
    Samples,
    bounded_intervals,
    run_judged,
    stored_samples,
)
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
    b, b_clusters, b_lengths = run_judged(base, interval_seconds, min_requests)
    c, c_clusters, c_lengths = run_judged(can, interval_seconds, min_requests)
    return LiveComparison(base, can, summarize(base), summarize(can),
                          judge(b, c, config, (b_clusters, c_clusters), (b_lengths, c_lengths)),
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
    # Percentile samples that are only bounds of an engine's coarse buckets, and why.
    percentile_bounds: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"judgement": self.judgement.to_dict(), "baseline_target": self.baseline_target,
                "canary_target": self.canary_target, "start": self.start, "end": self.end,
                "step": self.step, "percentile_bounds": dict(self.percentile_bounds)}


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
    notes = percentile_bound_notes(
        bounded_intervals(store, baseline_target, start, end, step),
        bounded_intervals(store, canary_target, start, end, step))
    return StoredComparison(baseline_target, canary_target, start, end, step, b, c,
                            flag_bounds(judge(b, c, config), notes), notes)


def percentile_bound_notes(baseline: dict[str, tuple[int, int]],
                           canary: dict[str, tuple[int, int]]) -> dict[str, str]:
    """Sample name -> why its percentiles are not precise (issue 21), where any interval of
    either target is only a bound of the engine's buckets."""
    notes = {}
    for name in sorted(set(baseline) | set(canary)):
        (b_bound, b_all), (c_bound, c_all) = baseline.get(name, (0, 0)), canary.get(name, (0, 0))
        if b_bound or c_bound:
            notes[name] = (f"only bounds in {b_bound}/{b_all} baseline and {c_bound}/{c_all} "
                           "canary intervals (the engine's buckets are too coarse there): the "
                           "shift is not a precise measure")
    return notes


def flag_bounds(judgement: Judgement, notes: dict[str, str]) -> Judgement:
    """The judgement with each judged metric of ``notes`` saying so in its reason."""
    results = tuple(replace(r, reason=f"{r.reason}; {notes[r.name]}")
                    if r.name in notes and r.verdict is not Verdict.NODATA else r
                    for r in judgement.results)
    return replace(judgement, results=results)
