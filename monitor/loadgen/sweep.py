"""Rate sweeps: from a low rate up to saturation, then the SLO-bounded capacity.

Each step is an open-loop run at one rate. A step is *saturated* when the server falls
behind: the backlog (requests sent but not answered) grows through the step at more than
``saturation_slope`` of the offered rate, or too many requests fail or go unanswered. The
sweep stops at the first saturated step.

The capacity is DistServe's goodput criterion: the highest rate at which at least
``attainment_target`` of requests meet every latency SLO. It is bracketed between the highest
passing and the lowest failing rate measured, narrowed by running midpoints, and read off by
linear interpolation of attainment between the two. The knee is the point of the
throughput-latency curve furthest below the chord from its first to its last point
(Kneedle, on normalised axes): where latency starts to climb faster than throughput.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from monitor.loadgen.dimensions import profile, profile_json
from monitor.loadgen.metrics import DEFAULT_PERCENTILES, LatencySlo, RunSummary, summarize
from monitor.loadgen.runner import (
    Endpoint,
    Limits,
    RunResult,
    make_client,
    one_token,
    run_load,
)
from monitor.loadgen.workload import WorkloadSpec


@dataclass(frozen=True, slots=True)
class SweepOptions:
    slo: LatencySlo
    attainment_target: float = 0.99
    rates: tuple[float, ...] | None = None     # explicit ascending rates, else geometric
    start_rate: float = 1.0
    growth: float = 2.0
    max_rate: float = 1000.0
    step_seconds: float = 60.0
    warmup_seconds: float = 5.0
    refine_steps: int = 2                      # midpoints run inside the SLO bracket
    saturation_slope: float = 0.05             # backlog growth as a fraction of the rate
    max_failure_ratio: float = 0.05
    max_concurrency: int | None = None
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    knee_metric: str = "ttft_p99"              # latency metric of the curve: <metric>_p<q>
    # Before each step, wait until a one-token probe answers within this factor of its
    # latency on the idle server (at most settle_max_seconds): a saturated step leaves a
    # backlog in the server that would otherwise bleed into the next step.
    settle_factor: float = 2.0
    settle_max_seconds: float = 120.0

    def __post_init__(self) -> None:
        if not 0 < self.attainment_target <= 1:
            raise ValueError("attainment target must be in (0, 1]")
        if self.rates is not None and (not self.rates or any(
                b <= a for a, b in zip(self.rates, self.rates[1:])) or self.rates[0] <= 0):
            raise ValueError("rates must be positive and ascending")
        if self.growth <= 1:
            raise ValueError("growth must be > 1")


@dataclass(frozen=True, slots=True)
class SweepPoint:
    rate: float
    summary: RunSummary
    backlog_slope: float          # requests/s the backlog grew by through the step
    saturated: bool
    reason: str                   # why saturated, or ""

    @property
    def attainment(self) -> float:
        return self.summary.slo_attainment or 0.0

    def latency(self, metric: str) -> float:
        """``ttft_p99``-style lookup, in seconds; NaN when the run has no such sample."""
        name, _, q = metric.rpartition("_")
        dist = self.summary.latency.get(name)
        return dist.percentiles.get(q, math.nan) if dist else math.nan

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "saturated": self.saturated, "reason": self.reason,
                "backlog_slope": self.backlog_slope, "attainment": self.attainment,
                "summary": self.summary.to_json()}


@dataclass(slots=True)
class SweepResult:
    options: SweepOptions
    points: list[SweepPoint] = field(default_factory=list)
    saturation_rate: float | None = None       # first saturated rate
    max_rate_under_slo: float | None = None
    bracket: tuple[float | None, float | None] = (None, None)   # passing, failing
    knee: SweepPoint | None = None
    note: str = ""

    def sorted_points(self) -> list[SweepPoint]:
        return sorted(self.points, key=lambda p: p.rate)

    def to_json(self) -> dict[str, Any]:
        slo = self.options.slo
        document: dict[str, Any] = {
            "slo": slo.describe(),
            "slo_seconds": {"ttft": slo.ttft, "tpot": slo.tpot, "e2e": slo.e2e},
            "attainment_target": self.options.attainment_target,
            "max_rate_under_slo": self.max_rate_under_slo,
            "bracket": list(self.bracket),
            "saturation_rate": self.saturation_rate,
            "knee_rate": self.knee.rate if self.knee else None,
            "knee_metric": self.options.knee_metric,
            "note": self.note,
            "points": [p.to_json() for p in self.sorted_points()],
        }
        # The capacity per load dimension and the binding one, for `inferwatch slo propose`
        # and the monitor's live headroom (monitor/loadgen/dimensions.py).
        document["dimensions"] = profile_json(document)
        return document

    def format(self) -> str:
        lines = [f"{'rate':>8} {'req/s':>8} {'tok/s':>9} {'attain':>7} "
                 f"{self.options.knee_metric:>10} {'tpot_p99':>9}  state"]
        for p in self.sorted_points():
            s = p.summary
            lines.append(
                f"{p.rate:8.3g} {s.request_throughput:8.2f} {s.output_throughput:9.1f} "
                f"{p.attainment:7.2%} {p.latency(self.options.knee_metric) * 1000:8.1f}ms "
                f"{p.latency('tpot_p99') * 1000:7.1f}ms  "
                + ("SATURATED: " + p.reason if p.saturated else "ok")
                + ("  <- knee" if self.knee is p else ""))
        target = self.options.attainment_target
        if self.max_rate_under_slo is not None:
            lines.append(f"max rate with >= {target:.1%} of requests within "
                         f"{self.options.slo.describe()}: {self.max_rate_under_slo:.3g} req/s "
                         f"(bracket {self.bracket[0]}..{self.bracket[1]})")
        found = profile(self.to_json())
        if found is not None:
            binding = found.binding
            lines.append("capacity per dimension: " + ", ".join(
                f"{d.value} {v:.4g}" for d, v in found.capacity.items()))
            lines.append(f"binding dimension: {binding.dimension or 'none'} ({binding.reason})")
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def backlog_slope(result: RunResult, start: float, end: float, step: float = 0.25) -> float:
    """Least-squares slope (requests/s) of requests in flight over [start, end)."""
    if end - start < 2 * step:
        return 0.0
    sent = np.sort([r.sent_at for r in result.records])
    finished = np.sort([r.finished_at for r in result.records])
    grid = np.arange(start, end, step)
    in_flight = (np.searchsorted(sent, grid, side="right")
                 - np.searchsorted(finished, grid, side="right"))
    return float(np.polyfit(grid, in_flight, 1)[0])


def judge_step(result: RunResult, summary: RunSummary, options: SweepOptions,
               rate: float) -> SweepPoint:
    measured = result.measured
    send_end = max((r.intended_at for r in measured), default=result.measure_start)
    slope = backlog_slope(result, result.measure_start, send_end)
    failed = summary.failed / summary.requests if summary.requests else 0.0
    reasons = []
    span = send_end - result.measure_start
    if slope > options.saturation_slope * rate and slope * span > 5:
        reasons.append(f"backlog grew {slope:.2f} req/s ({slope / rate:.0%} of the rate)")
    if failed > options.max_failure_ratio:
        top = ", ".join(f"{k} {v}" for k, v in sorted(summary.errors.items()))
        reasons.append(f"{failed:.0%} of requests failed ({top})")
    return SweepPoint(rate, summary, slope, bool(reasons), "; ".join(reasons))


def knee(points: Sequence[SweepPoint], metric: str) -> SweepPoint | None:
    """Kneedle on (achieved throughput, latency): the point furthest below the chord."""
    usable = [p for p in points if not math.isnan(p.latency(metric))]
    if len(usable) < 3:
        return None
    x = np.array([p.summary.request_throughput for p in usable])
    y = np.array([p.latency(metric) for p in usable])
    if np.ptp(x) <= 0 or np.ptp(y) <= 0:
        return None
    xn, yn = (x - x.min()) / np.ptp(x), (y - y.min()) / np.ptp(y)
    difference = xn - yn
    best = int(np.argmax(difference))
    return usable[best] if 0 < best < len(usable) - 1 and difference[best] > 0 else None


def slo_bracket(points: Sequence[SweepPoint],
                target: float) -> tuple[SweepPoint | None, SweepPoint | None]:
    """The highest passing point below the lowest failing one."""
    ordered = sorted(points, key=lambda p: p.rate)
    failing = next((p for p in ordered if p.attainment < target), None)
    passing = [p for p in ordered if p.attainment >= target
               and (failing is None or p.rate < failing.rate)]
    return (passing[-1] if passing else None), failing


def interpolate_capacity(low: SweepPoint, high: SweepPoint, target: float) -> float:
    """Rate where attainment crosses ``target``, linear between the bracket's two points."""
    a, b = low.attainment, high.attainment
    if a == b:
        return low.rate
    return low.rate + (a - target) / (a - b) * (high.rate - low.rate)


async def probe_latency(endpoint: Endpoint, tries: int = 3) -> float:
    """The best end-to-end latency of a one-token request (seconds), over ``tries``."""
    best = math.inf
    async with make_client(endpoint, 1) as client:
        for _ in range(tries):
            try:
                status, _, seconds = await one_token(client, endpoint)
            except httpx.HTTPError:
                continue
            if status == 200:
                best = min(best, seconds)
    return best


async def settle(endpoint: Endpoint, within: float, max_seconds: float) -> float:
    """Probe until the server answers within ``within`` s; the seconds waited."""
    began = time.perf_counter()
    while time.perf_counter() - began < max_seconds:
        if await probe_latency(endpoint, 1) <= within:
            break
        await asyncio.sleep(0.5)
    return time.perf_counter() - began


def _rates(options: SweepOptions) -> Iterator[float]:
    if options.rates is not None:
        yield from options.rates
        return
    rate = options.start_rate
    while rate <= options.max_rate * (1 + 1e-9):
        yield rate
        rate *= options.growth


ProgressLine = Callable[[str], None]


async def sweep(endpoint: Endpoint, workload: WorkloadSpec, options: SweepOptions,
                progress: ProgressLine | None = None,
                step_progress: Callable[[float, float, Any], None] | None = None) -> SweepResult:
    """Run the sweep; ``progress`` gets a line per step, ``step_progress`` live updates."""
    result = SweepResult(options)
    idle = await probe_latency(endpoint)

    async def measure(rate: float) -> SweepPoint:
        await settle(endpoint, idle * options.settle_factor, options.settle_max_seconds)
        limits = Limits(duration_seconds=options.step_seconds,
                        warmup_seconds=options.warmup_seconds,
                        max_concurrency=options.max_concurrency,
                        drain_seconds=max(10.0, options.step_seconds / 2))

        def live(state: Any, elapsed: float) -> None:
            if step_progress is not None:
                step_progress(rate, elapsed, state)

        run = await run_load(endpoint, workload.stream(rate), limits, rate=rate,
                             on_progress=live if step_progress else None)
        summary = summarize(run, options.percentiles, options.slo)
        point = judge_step(run, summary, options, rate)
        result.points.append(point)
        if progress is not None:
            progress(f"rate {rate:.3g} req/s: {summary.request_throughput:.2f} req/s done, "
                     f"attainment {point.attainment:.2%}, "
                     f"{options.knee_metric} {point.latency(options.knee_metric) * 1000:.1f} ms"
                     + (f", SATURATED ({point.reason})" if point.saturated else ""))
        return point

    for rate in _rates(options):
        point = await measure(rate)
        if point.saturated:
            result.saturation_rate = rate
            break
    else:
        result.note = "no step saturated the server: raise --max-rate to find saturation"

    target = options.attainment_target
    low, high = slo_bracket(result.points, target)
    for _ in range(options.refine_steps):
        if low is None or high is None or high.rate - low.rate < 0.02 * high.rate:
            break
        await measure((low.rate + high.rate) / 2)
        low, high = slo_bracket(result.points, target)
    result.bracket = (low.rate if low else None, high.rate if high else None)
    if low is not None and high is not None:
        result.max_rate_under_slo = interpolate_capacity(low, high, target)
    elif low is not None:
        result.max_rate_under_slo = low.rate
        result.note = (result.note + "; " if result.note else "") + (
            "every rate met the SLO target: the capacity is at least the highest rate run")
    else:
        result.note = (result.note + "; " if result.note else "") + (
            "even the lowest rate missed the SLO target: lower --start-rate")
    result.knee = knee(result.sorted_points(), options.knee_metric)
    return result
