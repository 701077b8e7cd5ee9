"""Labelled end-to-end evaluation of the anomaly detectors on the real reference server.

    python -m bench.anomaly_reference [--step 5] [--fault-steps 15] [--warmup-steps 132]
        [--json out.json] [--timeline] [--workdir DIR]
    python -m bench.anomaly_reference --report-json out.json   # re-score a saved run
    python -m bench.anomaly_reference --report-json out.json --rejudge  # today's detectors

The reference server (tiny model, CPU, one torch thread, fault injection on) gets an
open-loop Poisson load whose rate follows a slow cosine cycle between ``low_fraction`` and
100% of ``base_rate`` (so the load-aware throughput ratio is exercised: a quiet phase must not
be an anomaly). The collector scrapes it every second into a SQLite store, and the anomaly
monitor (:class:`monitor.anomaly.monitor.AnomalyMonitor`, one parameter set) ticks once per
closed step (its detector of the target is created at step 0, when there is no history to
replay, and keeps every step's state for the report). After a clean warm-up, faults are
injected at known steps, each held for ``fault_steps`` with ``gap_steps`` clean steps between
them:

* ``latency``: 30 ms added to every engine step (expected diagnosis ``slow_gpu``);
* ``kv_squeeze`` 0.9: 90% of the KV blocks withheld (the cache reads as nearly full):
  admission stalls, sequences are preempted, requests queue (expected
  ``kv_cache_pressure``);
* ``throughput_drop``: every model run slowed 5x, so capacity falls below the offered load
  and below 70% of the usual throughput (expected ``slow_gpu``);
* ``errors``: 30% of requests fail (expected ``errors``).

Clients give up on a request after ``client_timeout_seconds`` without a byte (the server
aborts it), as real clients do: an open-loop load on a server that fell behind would
otherwise queue without bound and drain for many steps after the fault.

TIME-COMPRESSED. The detectors count durations in steps (``AnomalyParams.step_seconds``, 60 s
in production: "5 steps" is the 5-minute hold). A real-time run at 60 s steps would take
hours, so this one runs ``AnomalyParams(step_seconds=5)`` with every other parameter at its
default: ONE STEP OF 5 s HERE STANDS FOR ONE MINUTE OF A PRODUCTION RUN (the 15-step faults
are 15 "minutes", the 132-step warm-up 132 "minutes", the 4-minute load cycle a 48-"minute"
one). Each step's percentiles and rates come from ~5 scrapes and a few dozen requests, so
they are noisier than a production minute's.

The warm-up is 132 steps (2 h 12 "minutes"), as a deployment that has watched the target for
two hours before its first incident: the multivariate detector fits its first model on
``multivariate_min_points`` (120) points no other detector flagged, so it is fitted and
scoring before the first fault (the report says at which step; a shorter ``--warmup-steps``
leaves it unfitted, and the report says that too). 132 = 36 + two 48-step load cycles: the
faults meet the load at the same phases as with the 36-step warm-up of the earlier runs.

Labels and scoring, per run: a fault's label is its steps ``[inject, clear - 1]``. Its
evaluation window (for detection, NAB and the per-window metrics) extends ``recovery_steps``
past the clear: a backlog queued during the fault drains for a while after it, and the
alert's own hysteresis needs ``clear_points`` clean steps to end, so an alert (or a late
detection) in that tail is part of the fault, not a false alert. Reported:

* per fault: detected (an alert starts in the window, or, when an alert was already active
  at the injection, a new detector turns on in it), the delay from the injection (steps:
  0 = detected on the first fault step; seconds: wall clock from the injection to the tick
  that raised it), the diagnosis at detection and the most frequent one while the fault's
  alert held, the detectors active at detection;
* false alert starts outside every window (during the warm-up and in the clean gaps);
* NAB normalized scores (:mod:`monitor.anomaly.nab`; standard, reward_low_fp_rate,
  reward_low_fn_rate) of the per-step alert starts, windows = the evaluation windows,
  probation = the warm-up steps; and recall, precision and mean delay per window
  (:func:`monitor.anomaly.nab.window_metrics`);
* per detector (the throughput ratio, each scored feature, the multivariate distance; its own
  alert starts, from its reading's ``started``): per fault, whether it fired (one of its alerts
  starts in the window; "carried" when it was already alerting at the injection) and its delay
  (steps and seconds, as above); its precision (its alert starts inside a window over all its
  alert starts, the warm-up's included), recall over the faults, mean delay, and its false
  alert starts outside the windows, also per "week" at the time compression (one step stands
  for a minute, so a week is 10,080 steps; counted over the clean steps on which the detector
  had a baseline, i.e. could alert).

The load generator, the collector, the store and the detectors run in this process beside
the server: on a small machine they compete for the same cores, which shows in the latency
percentiles (state the machine with the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from bench.stack import collecting, sqlite_store
from monitor.anomaly import nab
from monitor.anomaly.features import OFFERED_LOAD, THROUGHPUT
from monitor.anomaly.monitor import AnomalyMonitor
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.target import MULTIVARIATE, TargetDetector, TargetState
from monitor.demo import reference_server
from monitor.loadgen import RequestRecord, RequestSpec, send_requests

TARGET = "reference-0"
MODEL = "tiny"
_wall = time.time
STEPS_PER_WEEK = 7 * 24 * 60  # one step stands for one production minute

# Reported per step (the features the diagnosis reads, in a short form).
STEP_VALUES: tuple[tuple[str, str], ...] = (
    (THROUGHPUT, "tok/s"), (OFFERED_LOAD, "req/s"), ("ttft_p99_seconds", "ttft99"),
    ("itl_p99_seconds", "itl99"), ("e2e_p99_seconds", "e2e99"), ("queue_depth", "queue"),
    ("kv_cache_usage_ratio", "kv"), ("error_ratio", "err"),
    ("preemptions_per_second", "preempt/s"), ("batch_utilization", "batch"),
)


@dataclass(frozen=True, slots=True)
class FaultSpec:
    name: str
    kind: str                   # the reference server's fault kind
    value: float
    expected: tuple[str, ...]   # diagnosis limits that name this fault correctly


# In this order the default schedule injects them at different phases of the load cycle
# (factor at injection ~0.67 falling, ~0.99 falling, ~0.59 rising, ~0.37 rising): the
# capacity faults where the load is high enough for them to bite, the latency one where the
# load is falling to its trough, the errors near the trough.
FAULTS: tuple[FaultSpec, ...] = (
    FaultSpec("latency", "latency", 0.03, ("slow_gpu",)),
    FaultSpec("kv_squeeze", "kv_squeeze", 0.9, ("kv_cache_pressure",)),
    FaultSpec("throughput_drop", "slowdown", 5.0, ("slow_gpu",)),
    FaultSpec("errors", "error_rate", 0.3, ("errors",)),
)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Steps of the run: warm-up, then per fault ``fault_steps`` faulty and (between faults)
    ``gap_steps`` clean, then ``tail_steps`` clean."""

    faults: tuple[FaultSpec, ...] = FAULTS
    warmup_steps: int = 132   # the multivariate detector's 120 clean points, and 12 scored
    fault_steps: int = 15
    gap_steps: int = 20
    tail_steps: int = 15
    recovery_steps: int = 8

    def __post_init__(self) -> None:
        if self.fault_steps < 1 or self.warmup_steps < 1:
            raise ValueError("need at least one warm-up and one fault step")
        if len(self.faults) > 1 and self.gap_steps <= self.recovery_steps:
            raise ValueError("gap_steps must exceed recovery_steps (windows must not touch)")

    def inject_step(self, j: int) -> int:
        return self.warmup_steps + j * (self.fault_steps + self.gap_steps)

    def clear_step(self, j: int) -> int:
        return self.inject_step(j) + self.fault_steps

    @property
    def total_steps(self) -> int:
        if not self.faults:
            return self.warmup_steps + self.tail_steps
        return self.clear_step(len(self.faults) - 1) + self.tail_steps

    def window_end(self, j: int) -> int:
        """Last step of fault j's evaluation window (label + recovery), inside the run."""
        return min(self.clear_step(j) - 1 + self.recovery_steps, self.total_steps - 1)

    def windows(self) -> list[nab.Window]:
        return [nab.Window(self.inject_step(j), self.window_end(j), self.inject_step(j))
                for j in range(len(self.faults))]

    def phase(self, index: int) -> str:
        """What step ``index`` is labelled: warmup, clean, a fault's name, or recovery."""
        if index < self.warmup_steps:
            return "warmup"
        for j, fault in enumerate(self.faults):
            if self.inject_step(j) <= index < self.clear_step(j):
                return fault.name
            if self.clear_step(j) <= index <= self.window_end(j):
                return "recovery"
        return "clean"


@dataclass(frozen=True, slots=True)
class LoadShape:
    """Poisson arrivals at ``base_rate * f(t)``, f a cosine from ``low_fraction`` (at the run's
    start) up to 1 (half a period later) and back, or, given a ``profile`` of (seconds,
    factor) points, f interpolated between them (flat after the last). Prompts of random
    letters (no prefix-cache hits; the byte tokenizer makes a character a token), completions
    of uniform length, generated to the end (ignore_eos)."""

    base_rate: float = 15.0
    low_fraction: float = 0.35
    period_seconds: float = 240.0
    prompt_chars: tuple[int, int] = (50, 250)
    max_tokens: tuple[int, int] = (16, 96)
    client_timeout_seconds: float = 10.0
    seed: int = 0
    profile: tuple[tuple[float, float], ...] = ()

    def factor(self, seconds: float) -> float:
        if self.profile:
            times, factors = zip(*self.profile)
            return float(np.interp(seconds, times, factors))
        swing = (1.0 - math.cos(2.0 * math.pi * seconds / self.period_seconds)) / 2.0
        return self.low_fraction + (1.0 - self.low_fraction) * swing

    def workload(self, start: float, end: float) -> list[RequestSpec]:
        """Arrivals over [start, end) seconds of the run's clock (thinning a Poisson process
        at the peak rate), as offsets from ``start``."""
        rng = np.random.default_rng(self.seed)
        n = int(self.base_rate * (end - start) * 1.5) + 100
        times = start + np.cumsum(rng.exponential(1.0 / self.base_rate, n))
        times = times[times < end]
        keep = rng.random(len(times)) < np.array([self.factor(t) for t in times])
        specs = []
        for t in times[keep]:
            length = int(rng.integers(self.prompt_chars[0], self.prompt_chars[1] + 1))
            prompt = "".join(chr(c) for c in rng.integers(97, 123, length))
            tokens = int(rng.integers(self.max_tokens[0], self.max_tokens[1] + 1))
            specs.append(RequestSpec(float(t - start), prompt, tokens))
        return specs


# The server: a 512-block KV pool (8,192 tokens), so the workload above fills up to a third
# of it at the peak and a squeeze of 90% leaves too little for the sequences in flight.
SERVER_ARGS: tuple[str, ...] = ("--num-threads", "1", "--num-kv-blocks", "512")


@dataclass(frozen=True, slots=True)
class StepRecord:
    index: int
    end_time: float             # the step's end (unix seconds)
    evaluated_at: float         # wall clock of the tick that evaluated it
    phase: str
    load_factor: float          # offered-rate multiplier at the step's middle
    level: str | None           # None, "warning" or "critical"
    started: bool               # the target's alert starts on this step
    score: float
    limit: str | None           # the diagnosis while alerting
    active: tuple[str, ...]     # detectors alerting
    newly_active: tuple[str, ...]  # detectors whose own alert starts on this step
    throughput_ratio: float
    values: dict[str, float]
    live: tuple[str, ...] = ()  # detectors with a baseline on this step (able to alert)
    scores: dict[str, float] = field(default_factory=dict)  # every detector's score, [0, 1]
    multivariate_z: float = math.nan  # distance over the training q99.5 (NaN: not fitted)


@dataclass(frozen=True, slots=True)
class FaultResult:
    name: str
    kind: str
    value: float
    inject_step: int
    clear_step: int
    window_end: int
    load_factor: float          # at injection
    expected: tuple[str, ...]
    detected: bool
    detection_step: int | None
    delay_steps: int | None     # 0: on the first fault step
    delay_seconds: float | None  # wall clock, injection -> the tick that raised it
    limit: str | None           # diagnosis at detection
    dominant_limit: str | None  # most frequent diagnosis while alerting in the window
    detectors: tuple[str, ...]  # active at detection
    peak_level: str | None
    active_at_injection: bool   # an earlier alert was still active when the fault began

    @property
    def diagnosis_ok(self) -> bool:
        return self.limit in self.expected

    @property
    def dominant_ok(self) -> bool:
        return self.dominant_limit in self.expected


@dataclass(frozen=True, slots=True)
class FalseAlert:
    step: int
    phase: str
    limit: str | None
    detectors: tuple[str, ...]
    length_steps: int


@dataclass(frozen=True, slots=True)
class DetectorFault:
    """One detector on one fault's window."""

    fault: str
    fired: bool                  # one of its alerts starts in the window
    carried: bool                # it was already alerting at the injection
    detection_step: int | None
    delay_steps: int | None      # 0: on the first fault step
    delay_seconds: float | None


@dataclass(frozen=True, slots=True)
class DetectorResult:
    """One detector's own alert starts against the labelled windows."""

    name: str
    faults: list[DetectorFault]
    alert_starts: int            # all of them, the warm-up's included
    true_starts: int             # inside a fault's window
    false_starts: int            # outside every window
    false_in_warmup: int
    live_clean_steps: int        # steps outside every window on which it could alert
    first_live_step: int | None  # its first step with a baseline
    precision: float             # true / all starts (NaN: it never alerted)
    recall: float                # faults fired on / faults
    mean_delay_steps: float | None
    mean_delay_seconds: float | None
    false_per_week: float        # false starts per 10,080 live clean steps (NaN: none live)


@dataclass(frozen=True, slots=True)
class Evaluation:
    faults: list[FaultResult]
    false_alerts: list[FalseAlert]        # alert starts outside every window (warm-up too)
    false_alert_steps: int                # steps alerting outside every window
    clean_steps: int                      # steps outside every window
    recall: float
    precision: float
    mean_delay_steps: float | None
    nab: dict[str, float]                 # profile -> normalized score
    detectors: list[DetectorResult] = field(default_factory=list)
    multivariate_fitted_step: int | None = None  # its first model fitted on this step


@dataclass(frozen=True, slots=True)
class LoadStats:
    requests: int
    ok: int
    failed: int          # an error from the server (the injected errors among them)
    gave_up: int         # the client's timeout: no byte for ``client_timeout_seconds``
    mean_rate: float


@dataclass(frozen=True, slots=True)
class Result:
    step_seconds: float
    settle_seconds: float
    scrape_interval: float
    schedule: Schedule
    load: LoadShape
    server_args: tuple[str, ...]
    steps: list[StepRecord]
    evaluation: Evaluation
    load_stats: LoadStats
    wall_seconds: float
    t0: float                   # step 0's start (unix seconds)


class _RecordingDetector(TargetDetector):
    """The monitor's detector of the target, keeping every step's state and when it came."""

    def __init__(self, target: str, params: AnomalyParams, start: float) -> None:
        super().__init__(target, params)
        self.last_time = start  # the monitor reads steps from here on (nothing to replay)
        self.states: list[tuple[float, TargetState]] = []

    def update(self, time: float, row: Mapping[str, float], warm_up: bool = False
               ) -> TargetState:
        state = super().update(time, row, warm_up)
        self.states.append((_wall(), state))
        return state


def run(schedule: Schedule = Schedule(), *, step_seconds: float = 5.0,
        load: LoadShape = LoadShape(), settle_seconds: float = 2.0,
        scrape_interval: float = 1.0, server_args: Sequence[str] = SERVER_ARGS,
        workdir: Path | None = None,
        progress: Callable[[StepRecord], None] | None = None,
        params: AnomalyParams | None = None) -> Result:
    """Run the labelled schedule against a fresh reference server; steps and scores.
    ``params``: the detectors' (default: the defaults at ``step_seconds``)."""
    if params is None:
        params = AnomalyParams(step_seconds=step_seconds)
    if workdir is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run(schedule, step_seconds=step_seconds, load=load,
                       settle_seconds=settle_seconds, scrape_interval=scrape_interval,
                       server_args=server_args, workdir=Path(tmp), progress=progress,
                       params=params)
    return asyncio.run(_run(schedule, step_seconds, load, settle_seconds, scrape_interval,
                            tuple(server_args), workdir, progress, params))


async def _run(schedule: Schedule, step: float, load: LoadShape, settle: float,
               scrape_interval: float, server_args: tuple[str, ...], workdir: Path,
               progress: Callable[[StepRecord], None] | None,
               params: AnomalyParams) -> Result:
    began = _wall()
    token = secrets.token_hex(8)
    args = [*server_args, "--enable-fault-injection", "--admin-token", token]
    with reference_server(args, 180.0) as base_url, \
            sqlite_store(workdir / "anomaly-reference.db") as store:
        async with collecting(store, TARGET, base_url, scrape_interval, "anomaly-reference"):
            # Step 0 starts at the first step boundary at least two scrapes from now, so the
            # counters have a first reading before it.
            t0 = math.ceil((_wall() + 2.0 * scrape_interval + 0.5) / step) * step
            end = t0 + schedule.total_steps * step
            load_start = _wall()
            specs = load.workload(load_start - t0, end - t0)
            loading = asyncio.create_task(send_requests(base_url, MODEL, specs,
                                              timeout_seconds=load.client_timeout_seconds))
            monitor = AnomalyMonitor(store, params, settle_seconds=settle,
                                     history_seconds=schedule.total_steps * step + 600.0)
            detector = _RecordingDetector(TARGET, params, t0)
            monitor.detectors[TARGET] = detector
            steps: list[StepRecord] = []
            try:
                faulting = asyncio.create_task(_inject(base_url, token, schedule, t0, step))
                while detector.last_time < end - 1e-6:
                    if loading.done():  # a failure of the load is a failure of the run
                        loading.result()
                    if faulting.done():
                        faulting.result()
                    closed = math.floor((_wall() - settle) / step) * step
                    await asyncio.sleep(max(0.0, closed + step + settle + 0.1 - _wall()))
                    await asyncio.to_thread(monitor.tick, _wall())
                    for evaluated_at, state in detector.states[len(steps):]:
                        record = _record(len(steps), evaluated_at, state, schedule, load, t0, step)
                        steps.append(record)
                        if progress is not None:
                            progress(record)
                await faulting
            finally:
                loading.cancel()
                records: list[RequestRecord] = []
                with contextlib.suppress(asyncio.CancelledError):
                    records = await loading
    sent = [r for r in records if r.sent_at > 0]
    gave_up = sum(1 for r in sent if r.error is not None and "Timeout" in r.error.split(":")[0])
    stats = LoadStats(len(sent), sum(r.ok for r in sent),
                      sum(not r.ok for r in sent) - gave_up, gave_up,
                      len(sent) / (schedule.total_steps * step))
    return Result(step, settle, scrape_interval, schedule, load, server_args, steps,
                  evaluate(steps, schedule, step, t0), stats, _wall() - began, t0)


async def _inject(base_url: str, token: str, schedule: Schedule, t0: float,
                  step: float) -> None:
    """Each fault on at its inject step's start, off at its clear step's start."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30.0) as admin:
        for j, fault in enumerate(schedule.faults):
            await asyncio.sleep(max(0.0, t0 + schedule.inject_step(j) * step - _wall()))
            response = await admin.post("/admin/faults", json={
                "kind": fault.kind, "value": fault.value,
                "duration_seconds": (schedule.fault_steps + 5) * step})
            response.raise_for_status()
            await asyncio.sleep(max(0.0, t0 + schedule.clear_step(j) * step - _wall()))
            (await admin.delete("/admin/faults")).raise_for_status()


def _record(index: int, evaluated_at: float, state: TargetState, schedule: Schedule,
            load: LoadShape, t0: float, step: float) -> StepRecord:
    throughput = state.readings.get(THROUGHPUT)
    return StepRecord(
        index=index, end_time=state.time, evaluated_at=evaluated_at,
        phase=schedule.phase(index),
        load_factor=load.factor((index + 0.5) * step),
        level=state.level.value if state.level is not None else None,
        started=state.started, score=state.score,
        limit=state.diagnosis.limit if state.diagnosis is not None else None,
        active=tuple(sorted(state.active)),
        newly_active=tuple(sorted(n for n, r in state.readings.items() if r.started)),
        throughput_ratio=throughput.ratio if throughput is not None else math.nan,
        values={name: state.values.get(name, math.nan) for name, _ in STEP_VALUES},
        live=tuple(sorted(n for n, r in state.readings.items() if not math.isnan(r.expected))),
        scores={n: r.score for n, r in sorted(state.readings.items())},
        multivariate_z=(state.readings[MULTIVARIATE].z if MULTIVARIATE in state.readings
                        else math.nan))


def evaluate(steps: Sequence[StepRecord], schedule: Schedule, step_seconds: float,
             t0: float | None = None) -> Evaluation:
    """Score the per-step alert states against the schedule's labelled fault windows.
    ``t0`` (the run's step 0 start, wall clock) gives measured delays in seconds; without it
    they are counted as whole steps."""
    n = len(steps)
    windows = [w for w in schedule.windows() if w.end < n]
    starts = np.array([s.index for s in steps if s.started], dtype=np.int64)
    faults = [_fault_result(j, steps, schedule, step_seconds, t0)
              for j in range(len(windows))]
    inside = np.zeros(n, dtype=bool)
    for w in windows:
        inside[w.start:w.end + 1] = True
    false_alerts = [FalseAlert(s.index, s.phase, s.limit, s.active, _length(steps, s.index))
                    for s in steps if s.started and not inside[s.index]]
    metrics = nab.window_metrics(starts, windows, n=n, probation=schedule.warmup_steps)
    detections = np.zeros(n, dtype=bool)
    detections[starts] = True
    scores = {}
    for name, profile in nab.PROFILES.items():
        if windows:
            series = nab.score_series(detections, windows, profile,
                                      probation=schedule.warmup_steps)
            scores[name] = nab.normalized([series])
        else:
            scores[name] = math.nan
    names = sorted({n for s in steps for n in (*s.scores, *s.live, *s.active)},
                   key=_detector_order)
    fitted = next((s.index - 1 for s in steps if MULTIVARIATE in s.live), None)
    return Evaluation(
        faults=faults, false_alerts=false_alerts,
        false_alert_steps=sum(1 for s in steps if s.level is not None and not inside[s.index]),
        clean_steps=int((~inside).sum()), recall=metrics.recall, precision=metrics.precision,
        mean_delay_steps=metrics.mean_delay, nab=scores,
        detectors=[_detector_result(name, steps, schedule, len(windows), inside,
                                    step_seconds, t0) for name in names],
        multivariate_fitted_step=fitted)


def _detector_order(name: str) -> tuple[int, str]:
    """The throughput ratio first, the multivariate distance last, the features between."""
    return (0 if name == THROUGHPUT else 2 if name == MULTIVARIATE else 1, name)


def _detector_result(name: str, steps: Sequence[StepRecord], schedule: Schedule,
                     n_faults: int, inside: npt.NDArray[np.bool_], step_seconds: float,
                     t0: float | None) -> DetectorResult:
    starts = [s.index for s in steps if name in s.newly_active]
    per_fault = []
    for j in range(n_faults):
        inject, end = schedule.inject_step(j), schedule.window_end(j)
        hit = next((k for k in starts if inject <= k <= end), None)
        carried = inject > 0 and name in steps[inject - 1].active
        delay_seconds: float | None = None
        if hit is not None:
            delay_seconds = ((steps[hit].evaluated_at - (t0 + inject * step_seconds))
                             if t0 is not None else (hit - inject + 1) * step_seconds)
        per_fault.append(DetectorFault(
            schedule.faults[j].name, hit is not None, carried, hit,
            hit - inject if hit is not None else None, delay_seconds))
    true = sum(1 for k in starts if inside[k])
    false = [k for k in starts if not inside[k]]
    live_clean = sum(1 for s in steps if name in s.live and not inside[s.index])
    delays = [f.delay_steps for f in per_fault if f.delay_steps is not None]
    seconds = [f.delay_seconds for f in per_fault if f.delay_seconds is not None]
    return DetectorResult(
        name=name, faults=per_fault, alert_starts=len(starts), true_starts=true,
        false_starts=len(false),
        false_in_warmup=sum(1 for k in false if k < schedule.warmup_steps),
        live_clean_steps=live_clean,
        first_live_step=next((s.index for s in steps if name in s.live), None),
        precision=true / len(starts) if starts else math.nan,
        recall=sum(f.fired for f in per_fault) / n_faults if n_faults else math.nan,
        mean_delay_steps=float(np.mean(delays)) if delays else None,
        mean_delay_seconds=float(np.mean(seconds)) if seconds else None,
        false_per_week=(len(false) * STEPS_PER_WEEK / live_clean if live_clean
                        else math.nan))


def _length(steps: Sequence[StepRecord], start: int) -> int:
    k = start
    while k < len(steps) and steps[k].level is not None:
        k += 1
    return k - start


def _fault_result(j: int, steps: Sequence[StepRecord], schedule: Schedule,
                  step_seconds: float, t0: float | None) -> FaultResult:
    fault = schedule.faults[j]
    inject, clear, end = schedule.inject_step(j), schedule.clear_step(j), schedule.window_end(j)
    window = steps[inject:end + 1]
    carried = inject > 0 and steps[inject - 1].level is not None
    hit = next((s for s in window if s.started or (carried and s.level is not None
                                                   and s.newly_active)), None)
    limits = Counter(s.limit for s in window if s.level is not None and s.limit is not None
                     and (hit is None or s.index >= hit.index))
    levels = {s.level for s in window if s.level is not None}
    delay_seconds: float | None = None
    if hit is not None:
        delay_seconds = ((hit.evaluated_at - (t0 + inject * step_seconds)) if t0 is not None
                         else (hit.index - inject + 1) * step_seconds)
    return FaultResult(
        name=fault.name, kind=fault.kind, value=fault.value, inject_step=inject,
        clear_step=clear, window_end=end, load_factor=steps[inject].load_factor,
        expected=fault.expected, detected=hit is not None,
        detection_step=hit.index if hit is not None else None,
        delay_steps=hit.index - inject if hit is not None else None,
        delay_seconds=delay_seconds,
        limit=hit.limit if hit is not None else None,
        dominant_limit=limits.most_common(1)[0][0] if limits else None,
        detectors=hit.active if hit is not None else (),
        peak_level=("critical" if "critical" in levels else "warning" if levels else None),
        active_at_injection=carried)


# --- report -----------------------------------------------------------------------------------
def _fmt(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}g}"


def step_line(s: StepRecord) -> str:
    values = " ".join(f"{short}={_fmt(s.values[name])}" for name, short in STEP_VALUES)
    alert = (f"{s.level}{'*' if s.started else ''} {s.limit} [{','.join(s.active)}]"
             if s.level is not None else "-")
    return (f"{s.index:4d} {s.phase:<16} load={s.load_factor:.2f} ratio="
            f"{_fmt(s.throughput_ratio, 2)} {values} | {alert}")


def report(result: Result) -> str:
    ev, sched, load = result.evaluation, result.schedule, result.load
    step = result.step_seconds
    lines = [
        f"Anomaly detectors on the reference server, TIME-COMPRESSED: 1 step = {step:g} s here "
        "stands for 1 minute of production",
        f"(AnomalyParams(step_seconds={step:g}), every other parameter default; scrape every "
        f"{result.scrape_interval:g} s, settle {result.settle_seconds:g} s).",
        f"server: tiny model on CPU, {' '.join(result.server_args)}; load: Poisson at "
        f"{load.low_fraction:.0%}..100% of {load.base_rate:g} req/s over a "
        f"{load.period_seconds:g} s cycle, prompts {load.prompt_chars[0]}-"
        f"{load.prompt_chars[1]} tokens, completions {load.max_tokens[0]}-"
        f"{load.max_tokens[1]} tokens, clients give up after {load.client_timeout_seconds:g} s "
        "without a byte;",
        f"sent {result.load_stats.requests} requests ({result.load_stats.mean_rate:.1f} req/s "
        f"mean), {result.load_stats.failed} failed, {result.load_stats.gave_up} given up by "
        f"the client; {len(result.steps)} steps "
        f"({sched.warmup_steps} warm-up), run {result.wall_seconds:.0f} s wall.",
        "",
        f"{'fault':<16} {'value':>6} {'steps':>9} {'load':>5} {'detected':>8} "
        f"{'delay':>14} {'level':>8}  diagnosis at detection / while alerting (expected)",
    ]
    for f in ev.faults:
        if f.detected and f.delay_steps is not None and f.delay_seconds is not None:
            delay = f"{f.delay_steps} st {f.delay_seconds:5.1f} s"
            found = "yes" + (" (c)" if f.active_at_injection else "")
        else:
            delay, found = "-", "NO"
        mark = "ok" if f.diagnosis_ok else "WRONG"
        dmark = "ok" if f.dominant_ok else "WRONG"
        lines.append(
            f"{f.name:<16} {f.value:>6g} {f.inject_step:>4}-{f.clear_step - 1:<4} "
            f"{f.load_factor:>5.2f} {found:>8} {delay:>14} {f.peak_level or '-':>8}  "
            f"{f.limit or '-'} ({mark}) / {f.dominant_limit or '-'} ({dmark}) "
            f"(expected {'|'.join(f.expected)})")
        if f.detected:
            lines.append(f"{'':<16} detectors at detection: {', '.join(f.detectors)}")
    lines.append("")
    warm = sum(1 for a in ev.false_alerts if a.step < sched.warmup_steps)
    lines.append(f"false alert starts outside the fault windows: {len(ev.false_alerts)} "
                 f"({warm} in the warm-up, {len(ev.false_alerts) - warm} in clean gaps/tail); "
                 f"{ev.false_alert_steps} of {ev.clean_steps} clean steps alerting")
    for a in ev.false_alerts:
        lines.append(f"  step {a.step} ({a.phase}, {a.length_steps} steps): {a.limit} "
                     f"[{', '.join(a.detectors)}]")
    delay = "-" if ev.mean_delay_steps is None else f"{ev.mean_delay_steps:.1f} steps"
    lines.append(f"per window (alert starts, probation {sched.warmup_steps} steps): recall "
                 f"{_fmt(ev.recall)}, precision {_fmt(ev.precision)}, mean delay {delay}")
    lines.append(f"NAB normalized (windows = fault steps + {sched.recovery_steps} recovery "
                 f"steps, probation = the {sched.warmup_steps} warm-up steps, detections = "
                 "alert starts): " + ", ".join(f"{k} {v:.1f}" for k, v in ev.nab.items()))
    lines.append("")
    lines.extend(detector_report(result))
    return "\n".join(lines)


def detector_report(result: Result) -> list[str]:
    """Per detector: fired per fault (delay in steps), precision, recall, false starts."""
    ev, sched = result.evaluation, result.schedule
    if ev.multivariate_fitted_step is None:
        fitted = ("multivariate: NEVER fitted (needs multivariate_min_points clean points; "
                  f"the warm-up was {sched.warmup_steps} steps)")
    else:
        fitted = (f"multivariate: first fitted on step {ev.multivariate_fitted_step}, scoring "
                  f"from step {ev.multivariate_fitted_step + 1} (first fault at step "
                  f"{sched.inject_step(0) if sched.faults else '-'})")
    names = [f.name for f in ev.faults]
    lines = [
        "per detector (its own alert starts; per fault: delay in steps if one starts in the "
        "window, 'c' already alerting at the injection, '-' none; false/week: its false "
        f"starts per {STEPS_PER_WEEK} clean steps it could alert on, 1 step = 1 minute):",
        fitted,
        f"{'detector':<28} " + " ".join(f"{n[:15]:>15}" for n in names)
        + f" {'prec':>5} {'recall':>6} {'delay st/s':>11} {'false':>5} {'(warm)':>6}"
        f" {'clean':>5} {'false/wk':>8}",
    ]
    for d in ev.detectors:
        cells = []
        for f in d.faults:
            cell = (f"{f.delay_steps} st {f.delay_seconds:.0f}s"
                    if f.delay_steps is not None and f.delay_seconds is not None else "-")
            cells.append(f"{cell + (' c' if f.carried else ''):>15}")
        delay = ("-" if d.mean_delay_steps is None or d.mean_delay_seconds is None
                 else f"{d.mean_delay_steps:.1f}/{d.mean_delay_seconds:.0f}")
        lines.append(f"{d.name:<28} " + " ".join(cells)
                     + f" {_fmt(d.precision, 2):>5} {_fmt(d.recall, 2):>6} {delay:>11}"
                     f" {d.false_starts:>5} {d.false_in_warmup:>6} {d.live_clean_steps:>5}"
                     f" {_fmt(d.false_per_week, 3):>8}")
    return lines


def json_ready(value: Any) -> Any:
    """``value`` (from ``dataclasses.asdict``) with non-finite floats as None (JSON has no
    NaN), through dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def to_json(result: Result) -> dict[str, Any]:
    out: dict[str, Any] = json_ready(dataclasses.asdict(result))
    out["time_compression"] = (f"1 step = {result.step_seconds:g} s stands for 1 minute of a "
                               "production run")
    return out


def from_json(data: Mapping[str, Any]) -> Result:
    """A run written by ``to_json``, its steps re-scored by today's ``evaluate``."""
    def num(value: Any) -> float:
        return math.nan if value is None else float(value)

    try:
        sched = dict(data["schedule"])
        sched["faults"] = tuple(FaultSpec(f["name"], f["kind"], f["value"], tuple(f["expected"]))
                                for f in sched["faults"])
        schedule = Schedule(**sched)
        shape = dict(data["load"])
        for key in ("prompt_chars", "max_tokens"):
            shape[key] = tuple(shape[key])
        shape["profile"] = tuple(tuple(p) for p in shape["profile"])
        load = LoadShape(**shape)
        steps = []
        for raw in data["steps"]:
            step = dict(raw)
            for key in ("active", "newly_active", "live"):
                step[key] = tuple(step.get(key, ()))
            step["values"] = {k: num(v) for k, v in step["values"].items()}
            step["scores"] = {k: num(v) for k, v in step.get("scores", {}).items()}
            for key in ("score", "throughput_ratio", "multivariate_z"):
                step[key] = num(step.get(key))
            steps.append(StepRecord(**step))
        step_seconds, t0 = float(data["step_seconds"]), data.get("t0")
        return Result(step_seconds, float(data["settle_seconds"]),
                      float(data["scrape_interval"]), schedule, load,
                      tuple(data["server_args"]), steps,
                      evaluate(steps, schedule, step_seconds, t0),
                      LoadStats(**data["load_stats"]), float(data["wall_seconds"]),
                      math.nan if t0 is None else float(t0))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a bench.anomaly_reference --json result: {exc!r}") from exc


def rejudge(saved: Result) -> Result:
    """The saved run judged again by today's detectors: a fresh detector of the target fed
    each step's recorded feature values in order, as the live monitor fed them (no warm-up
    flag: it ticked live from step 0). The same server run, so detector versions compare
    like for like."""
    detector = TargetDetector(TARGET, AnomalyParams(step_seconds=saved.step_seconds))
    steps = [_record(old.index, old.evaluated_at, detector.update(old.end_time, old.values),
                     saved.schedule, saved.load, saved.t0, saved.step_seconds)
             for old in saved.steps]
    return dataclasses.replace(saved, steps=steps, evaluation=evaluate(
        steps, saved.schedule, saved.step_seconds, saved.t0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults, load_defaults = Schedule(), LoadShape()
    parser.add_argument("--step", type=float, default=5.0,
                        help="step_seconds of the detectors (stands for 1 minute)")
    parser.add_argument("--fault-steps", type=int, default=defaults.fault_steps)
    parser.add_argument("--gap-steps", type=int, default=defaults.gap_steps)
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--rate", type=float, default=load_defaults.base_rate,
                        help="peak Poisson rate, requests/s")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the run's SQLite store (anomaly-reference.db) here")
    parser.add_argument("--timeline", action="store_true",
                        help="print every step as it is evaluated")
    parser.add_argument("--report-json", type=Path, default=None, metavar="PATH",
                        help="no run: re-score and report a run saved with --json")
    parser.add_argument("--rejudge", action="store_true",
                        help="with --report-json: judge the saved run's recorded values again "
                             "with today's detectors (a bench.anomaly_vllm --json file too)")
    args = parser.parse_args(argv)
    if args.report_json is not None:
        try:
            data = json.loads(args.report_json.read_text())
            saved = from_json(data.get("run", data))  # anomaly_vllm nests the run
        except (OSError, ValueError) as exc:
            parser.error(f"--report-json {args.report_json}: {exc}")
        if args.rejudge:
            saved = rejudge(saved)
        print(report(saved))
        if args.json:
            args.json.write_text(json.dumps(to_json(saved), indent=1))
        return 0
    schedule = Schedule(fault_steps=args.fault_steps, gap_steps=args.gap_steps,
                        warmup_steps=args.warmup_steps)
    load = dataclasses.replace(load_defaults, base_rate=args.rate,
                               period_seconds=48 * args.step)
    print(f"{schedule.total_steps} steps of {args.step:g} s (~"
          f"{schedule.total_steps * args.step / 60:.1f} min); 1 step stands for 1 minute",
          flush=True)

    def show(record: StepRecord) -> None:
        print(step_line(record), flush=True)

    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    result = run(schedule, step_seconds=args.step, load=load, workdir=args.workdir,
                 progress=show if args.timeline else None)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(to_json(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
