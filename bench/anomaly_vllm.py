"""Labelled evaluation of the anomaly detectors on a live vLLM with faults caused from outside
(issue 17): the evaluation of ``bench.anomaly_reference``, on an engine we did not write.

    flock /tmp/iw/bench.lock python -m bench.anomaly_vllm [--step 5] [--fault-steps 10]
        [--faults cpu_hog,bad_requests,surge,hang] [--json out.json] [--timeline]

The engine: vLLM's CPU build serving the tiny model as the live tests start it
(tests/live/vllm_server.py: eager, in-core engine, one OpenMP thread), with ``--max-num-seqs
8`` (a small batch cap, so that its capacity, about 20 req/s of this workload, is within what
the load generator sends from the other core), every thread of its process group pinned to
one core (``--engine-cpu``, default 1). This process (load generator, collector, SQLite
store, detectors) is pinned to the other cores. The collector scrapes vLLM's /metrics every
second through the vLLM adapter table (``max_num_seqs`` given to the target, as an operator
would, since vLLM does not export it), and the monitor
(:class:`monitor.anomaly.monitor.AnomalyMonitor`) ticks once per closed step.

The load is the reference run's (:class:`bench.anomaly_reference.LoadShape`): open-loop
Poisson between 35% and 100% of ``--rate`` (12 req/s) over a cosine cycle of 48 steps,
prompts of 50-250 random letters, 16-96 output tokens (EOS ignored), clients that give up
after 10 s without a byte. After a clean warm-up, each fault is held ``fault_steps`` with
``gap_steps`` clean steps between; none changes vLLM, each is something that happens to a
deployment:

* ``cpu_hog``: a busy-loop process pinned to vLLM's core (a noisy neighbour, a throttled or
  slower device): every engine step takes longer. Expected diagnosis ``slow_gpu``.
* ``bad_requests``: 4 req/s more, each a prompt of 6,000 letters, over ``--max-model-len``
  (1024): vLLM's OpenAI server answers 400 before the engine sees them. Expected
  ``errors``; see the note below.
* ``surge``: 18 req/s more of the usual requests, past the engine's capacity: the batch cap
  is reached and requests queue (and time out on the client). Labelled an overload: the
  offered-load feature is honest (finished + rejected + growth of requests in flight), so
  the load-aware latency/queue detectors look for values seen at that load; none were (the
  load was never that high), so they fall back to their time baselines and should alert.
  Had the surge stayed within loads seen before, at the latencies seen then, no alert would
  be right. Expected ``batch_size_cap`` (batches full at the cap, requests queue) or another
  queueing limit (``token_budget``, ``kv_cache_pressure``).
* ``hang``: the engine's process group stopped (SIGSTOP) and continued (SIGCONT) at the clear
  (a hung engine, a frozen VM): scrapes time out, the steps have no data, clients time out;
  at the thaw the backlog drains. No diagnosis names it: an unresponsive target is the
  collector's ``up`` state; recorded here to show what the detectors do with the gap.

Note on ``bad_requests``: vLLM 0.32 counts them only in ``http_requests_total{status="4xx"}``
(its HTTP middleware); the engine's own counters never see them, and the vLLM adapter table
ignores ``http_*`` (exporters/adapters/coverage.py), so the error ratio does not move. A
miss here is the adapter's blind spot, not a detector's.

TIME-COMPRESSED as ``bench.anomaly_reference``: ``AnomalyParams(step_seconds=5)``, every other
parameter default; ONE STEP OF 5 s HERE STANDS FOR ONE MINUTE OF A PRODUCTION RUN, so "per
week" below is per 10,080 steps. Labels and scoring are the reference run's
(:func:`bench.anomaly_reference.evaluate`: label ``[inject, clear - 1]``, window to
``recovery_steps`` past the clear, NAB with the warm-up as probation, and per detector on its
own alert starts: recall, precision, delay per fault, false starts and those per "week"),
plus the target alert's false starts after the warm-up per "week".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import anomaly_reference as reference
from bench.anomaly_reference import (
    STEPS_PER_WEEK, FaultSpec, LoadShape, LoadStats, Schedule, StepRecord, _record,
    _RecordingDetector, detector_report, evaluate, step_line,
)
from bench.stack import collecting, sqlite_store
from monitor.anomaly.features import THROUGHPUT
from monitor.anomaly.monitor import AnomalyMonitor
from monitor.anomaly.params import AnomalyParams
from monitor.loadgen import RequestRecord, RequestSpec, send_requests

TARGET = "vllm-0"
MAX_NUM_SEQS = 8
ENGINE_ARGS: tuple[str, ...] = ("--max-num-seqs", str(MAX_NUM_SEQS))
BAD_PROMPT_CHARS = 6000         # over --max-model-len 1024 in the tiny model's tokens
QUEUEING = ("batch_size_cap", "token_budget", "kv_cache_pressure")

# Injected at load factors ~0.68 falling, ~0.76 rising, ~0.51 falling, ~0.90 rising (the
# default schedule): the hog and the surge where the load is mid-cycle, so the hog pushes the
# engine near its capacity and the surge past it.
FAULTS: dict[str, FaultSpec] = {f.name: f for f in (
    FaultSpec("cpu_hog", "cpu_hog", 1, ("slow_gpu",)),
    FaultSpec("bad_requests", "bad_requests", 4.0, ("errors",)),
    FaultSpec("surge", "surge", 18.0, QUEUEING),
    FaultSpec("hang", "hang", 0, ()),
)}
SCHEDULE = Schedule(faults=tuple(FAULTS.values()), warmup_steps=36, fault_steps=10,
                    gap_steps=16, tail_steps=15, recovery_steps=8)
LOAD = LoadShape(base_rate=12.0)


@dataclass(frozen=True, slots=True)
class Result:
    """The reference run's result (steps, evaluation, per-detector results) of this run, and
    what is particular to a live vLLM."""

    run: reference.Result           # server_args: vLLM's extra arguments
    engine_cpu: int
    alert_false_per_week: float     # the target's alert: false starts after warm-up, per week
    loadavg_before: str
    loadavg_after: str


# --- the faults --------------------------------------------------------------------------------
def fault_arrivals(schedule: Schedule, load: LoadShape, step: float, start: float, end: float
                   ) -> list[RequestSpec]:
    """The extra requests of the ``surge`` and ``bad_requests`` faults: Poisson at the fault's
    value (req/s) over its label, as offsets from ``start`` (the run's clock, like
    ``LoadShape.workload``)."""
    specs: list[RequestSpec] = []
    for j, fault in enumerate(schedule.faults):
        if fault.kind not in ("surge", "bad_requests"):
            continue
        on, off = schedule.inject_step(j) * step, schedule.clear_step(j) * step
        extra = dataclasses.replace(load, base_rate=fault.value, seed=load.seed + 1 + j,
                                    profile=((on - 1e-3, 0.0), (on, 1.0), (off - 1e-3, 1.0),
                                             (off, 0.0)))
        found = extra.workload(start, end)
        if fault.kind == "bad_requests":
            rng = np.random.default_rng(load.seed + 100 + j)
            found = [dataclasses.replace(s, prompt="".join(
                chr(c) for c in rng.integers(97, 123, BAD_PROMPT_CHARS)), max_tokens=16)
                for s in found]
        specs += found
    return specs


def _group_tasks(pgid: int) -> Iterator[int]:
    """Every thread of every process in the process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry)) == pgid:
                yield from (int(t) for t in os.listdir(f"/proc/{entry}/task"))


def pin_group(pgid: int, cpus: set[int]) -> int:
    """Pin the engine's threads (all of its processes') to ``cpus``; how many were pinned."""
    pinned = 0
    for task in _group_tasks(pgid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(task, cpus)
            pinned += 1
    if not pinned:
        raise RuntimeError(f"no thread of the engine's process group {pgid} could be pinned")
    return pinned


class Injector:
    """Turns the schedule's outside faults on and off; everything undone by ``close``."""

    def __init__(self, engine_pgid: int, engine_cpu: int) -> None:
        self.pgid, self.cpu = engine_pgid, engine_cpu
        self.hogs: list[subprocess.Popen[bytes]] = []
        self.stopped = False

    def on(self, fault: FaultSpec) -> None:
        if fault.kind == "cpu_hog":
            for _ in range(int(fault.value)):
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                os.sched_setaffinity(hog.pid, {self.cpu})
                self.hogs.append(hog)
        elif fault.kind == "hang":
            os.killpg(self.pgid, signal.SIGSTOP)
            self.stopped = True

    def off(self) -> None:
        for hog in self.hogs:
            hog.kill()
            hog.wait()
        self.hogs.clear()
        if self.stopped:
            os.killpg(self.pgid, signal.SIGCONT)
            self.stopped = False

    close = off

    async def follow(self, schedule: Schedule, t0: float, step: float) -> None:
        """Each fault on at its inject step's start, off at its clear step's start."""
        for j, fault in enumerate(schedule.faults):
            await asyncio.sleep(max(0.0, t0 + schedule.inject_step(j) * step - time.time()))
            self.on(fault)
            await asyncio.sleep(max(0.0, t0 + schedule.clear_step(j) * step - time.time()))
            self.off()


# --- the run -----------------------------------------------------------------------------------
def run(schedule: Schedule = SCHEDULE, *, step_seconds: float = 5.0, load: LoadShape = LOAD,
        engine_cpu: int = 1, scrape_interval: float = 1.0, settle_seconds: float = 2.0,
        workdir: Path | None = None,
        progress: Callable[[StepRecord], None] | None = None) -> Result:
    """Start vLLM, run the labelled schedule against it, score the steps."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.live.vllm_server import running_vllm

    others = os.sched_getaffinity(0) - {engine_cpu}
    if engine_cpu not in os.sched_getaffinity(0) or not others:
        raise ValueError(f"--engine-cpu {engine_cpu}: need it and one more of this process's "
                         f"CPUs {sorted(os.sched_getaffinity(0))}")
    os.sched_setaffinity(0, others)  # this process, and the threads it starts from now on
    before = _loadavg()
    began = time.time()
    params = AnomalyParams(step_seconds=step_seconds)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="anomaly-vllm-")))
        engine = stack.enter_context(running_vllm(*ENGINE_ARGS))
        pin_group(engine.pid, {engine_cpu})
        injector = Injector(engine.pid, engine_cpu)
        stack.callback(injector.close)
        store = stack.enter_context(sqlite_store(workdir / "anomaly-vllm.db"))
        steps, records, t0 = asyncio.run(_run(
            engine.url, engine.model, store, injector, schedule, step_seconds, load,
            scrape_interval, settle_seconds, params, progress))
    evaluation = evaluate(steps, schedule, step_seconds, t0)
    sent = [r for r in records if r.sent_at > 0]
    gave_up = sum(1 for r in sent if r.error is not None and "Timeout" in r.error.split(":")[0])
    stats = LoadStats(len(sent), sum(r.ok for r in sent), sum(not r.ok for r in sent) - gave_up,
                      gave_up, len(sent) / (schedule.total_steps * step_seconds))
    run = reference.Result(step_seconds, settle_seconds, scrape_interval, schedule, load,
                           ENGINE_ARGS, steps, evaluation, stats, time.time() - began, t0)
    return Result(run, engine_cpu, alert_false_per_week(run), before, _loadavg())


async def _run(url: str, model: str, store: Any, injector: Injector, schedule: Schedule,
               step: float, load: LoadShape, scrape_interval: float, settle: float,
               params: AnomalyParams, progress: Callable[[StepRecord], None] | None
               ) -> tuple[list[StepRecord], list[RequestRecord], float]:
    options: dict[str, str | int | float] = {"engine": "vllm", "max_num_seqs": MAX_NUM_SEQS}
    async with collecting(store, TARGET, url, scrape_interval, "anomaly-vllm", options):
        # Step 0 starts at the first step boundary at least two scrapes from now.
        t0 = math.ceil((time.time() + 2.0 * scrape_interval + 0.5) / step) * step
        end = t0 + schedule.total_steps * step
        load_start = time.time()
        specs = sorted(load.workload(load_start - t0, end - t0)
                       + fault_arrivals(schedule, load, step, load_start - t0, end - t0),
                       key=lambda s: s.arrival_seconds)
        loading = asyncio.create_task(send_requests(
            url, model, specs, timeout_seconds=load.client_timeout_seconds))
        monitor = AnomalyMonitor(store, params, settle_seconds=settle,
                                 history_seconds=schedule.total_steps * step + 600.0)
        detector = _RecordingDetector(TARGET, params, t0)
        monitor.detectors[TARGET] = detector
        steps: list[StepRecord] = []
        records: list[RequestRecord] = []
        try:
            faulting = asyncio.create_task(injector.follow(schedule, t0, step))
            while detector.last_time < end - 1e-6:
                for task in (loading, faulting):
                    if task.done():  # a failure of either is a failure of the run
                        task.result()
                closed = math.floor((time.time() - settle) / step) * step
                await asyncio.sleep(max(0.0, closed + step + settle + 0.1 - time.time()))
                await asyncio.to_thread(monitor.tick, time.time())
                for evaluated_at, state in detector.states[len(steps):]:
                    record = _record(len(steps), evaluated_at, state, schedule, load, t0, step)
                    steps.append(record)
                    if progress is not None:
                        progress(record)
            await faulting
        finally:
            injector.close()
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                records = await loading
    return steps, records, t0


# --- scoring -----------------------------------------------------------------------------------
def alert_false_per_week(run: reference.Result) -> float:
    """The target's alert starts outside every window after the warm-up, per 10,080 clean
    steps after the warm-up (a week at one step per production minute); NaN without any."""
    windows = [w for w in run.schedule.windows() if w.end < len(run.steps)]
    inside = {k for w in windows for k in range(w.start, w.end + 1)}
    warmup = run.schedule.warmup_steps
    clean = sum(1 for s in run.steps if s.index >= warmup and s.index not in inside)
    false = sum(1 for a in run.evaluation.false_alerts if a.step >= warmup)
    return false / clean * STEPS_PER_WEEK if clean else math.nan


# --- report ------------------------------------------------------------------------------------
def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}g}"


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def report(result: Result) -> str:
    run = result.run
    ev, sched, load, stats = run.evaluation, run.schedule, run.load, run.load_stats
    step = run.step_seconds
    lines = [
        f"Anomaly detectors on a live vLLM (CPU build, tiny model, {' '.join(run.server_args)}"
        f", pinned to CPU {result.engine_cpu}), TIME-COMPRESSED: 1 step = {step:g} s stands "
        "for 1 minute of production (AnomalyParams(step_seconds="
        f"{step:g}), other parameters default).",
        f"load: Poisson {load.low_fraction:.0%}..100% of {load.base_rate:g} req/s over "
        f"{load.period_seconds:g} s, prompts {load.prompt_chars[0]}-{load.prompt_chars[1]} "
        f"letters, {load.max_tokens[0]}-{load.max_tokens[1]} output tokens; sent "
        f"{stats.requests} ({stats.mean_rate:.1f} req/s mean), {stats.failed} failed, "
        f"{stats.gave_up} given up by the client; {len(run.steps)} steps "
        f"({sched.warmup_steps} warm-up), {run.wall_seconds:.0f} s wall; load average "
        f"before {result.loadavg_before}, after {result.loadavg_after}.",
        "",
        f"{'fault':<13} {'value':>5} {'steps':>9} {'load':>5} {'detected':>8} {'delay':>14} "
        "  diagnosis at detection / while alerting (expected); detectors at detection",
    ]
    for f in ev.faults:
        found = ("yes" + (" (c)" if f.active_at_injection else "")) if f.detected else "NO"
        delay = (f"{f.delay_steps} st {f.delay_seconds:5.1f} s"
                 if f.delay_steps is not None and f.delay_seconds is not None else "-")
        expected = "|".join(f.expected) or "none names it"
        blind = sum(1 for s in run.steps[f.inject_step:f.clear_step]
                    if math.isnan(s.values[THROUGHPUT]))
        found += f" ({blind} st no data)" if blind else ""
        lines.append(
            f"{f.name:<13} {f.value:>5g} {f.inject_step:>4}-{f.clear_step - 1:<4} "
            f"{f.load_factor:>5.2f} {found:>8} {delay:>14}   {f.limit or '-'} / "
            f"{f.dominant_limit or '-'} ({expected}); {', '.join(f.detectors) or '-'}")
    delay = "-" if ev.mean_delay_steps is None else f"{ev.mean_delay_steps:.1f} steps"
    after = sum(1 for a in ev.false_alerts if a.step >= sched.warmup_steps)
    lines += [
        "",
        f"target alert: recall {_fmt(ev.recall)}, precision {_fmt(ev.precision)}, mean delay "
        f"{delay}; false starts {len(ev.false_alerts)} ({after} after the warm-up: "
        f"{_fmt(result.alert_false_per_week)} per week); NAB "
        + ", ".join(f"{k} {v:.1f}" for k, v in ev.nab.items()),
    ]
    for a in ev.false_alerts:
        lines.append(f"  false start step {a.step} ({a.phase}, {a.length_steps} steps): "
                     f"{a.limit} [{', '.join(a.detectors)}]")
    lines += ["", *detector_report(run)]
    return "\n".join(lines)


def to_json(result: Result) -> dict[str, Any]:
    out: dict[str, Any] = reference.json_ready(dataclasses.asdict(result))
    out["time_compression"] = (f"1 step = {result.run.step_seconds:g} s stands for 1 minute of "
                               "a production run")
    out["step_values"] = dict(reference.STEP_VALUES)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--step", type=float, default=5.0,
                        help="step_seconds of the detectors (stands for 1 minute)")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated, in order, of {', '.join(FAULTS)}")
    parser.add_argument("--fault-steps", type=int, default=SCHEDULE.fault_steps)
    parser.add_argument("--gap-steps", type=int, default=SCHEDULE.gap_steps)
    parser.add_argument("--warmup-steps", type=int, default=SCHEDULE.warmup_steps)
    parser.add_argument("--tail-steps", type=int, default=SCHEDULE.tail_steps)
    parser.add_argument("--rate", type=float, default=LOAD.base_rate,
                        help="peak Poisson rate of the cycle, requests/s")
    parser.add_argument("--hogs", type=int, default=int(FAULTS["cpu_hog"].value),
                        help="busy-loop processes of the cpu_hog fault")
    parser.add_argument("--seed", type=int, default=LOAD.seed,
                        help="of the arrivals and prompts (the faults' too)")
    parser.add_argument("--engine-cpu", type=int, default=1,
                        help="the CPU vLLM (and the cpu_hog fault) is pinned to")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the run's SQLite store (anomaly-vllm.db) here")
    parser.add_argument("--timeline", action="store_true",
                        help="print every step as it is evaluated")
    args = parser.parse_args(argv)
    names = [n for n in args.faults.split(",") if n]
    if unknown := [n for n in names if n not in FAULTS]:
        parser.error(f"--faults: unknown {unknown}; known: {list(FAULTS)}")
    if args.hogs < 1:
        parser.error(f"--hogs: need at least 1, got {args.hogs}")
    faults = {**FAULTS, "cpu_hog": dataclasses.replace(FAULTS["cpu_hog"], value=args.hogs)}
    schedule = dataclasses.replace(
        SCHEDULE, faults=tuple(faults[n] for n in names), fault_steps=args.fault_steps,
        gap_steps=args.gap_steps, warmup_steps=args.warmup_steps, tail_steps=args.tail_steps)
    load = dataclasses.replace(LOAD, base_rate=args.rate, period_seconds=48 * args.step,
                               seed=args.seed)
    print(f"{schedule.total_steps} steps of {args.step:g} s (~"
          f"{schedule.total_steps * args.step / 60:.1f} min after vLLM starts); 1 step stands "
          "for 1 minute", flush=True)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    result = run(schedule, step_seconds=args.step, load=load, engine_cpu=args.engine_cpu,
                 workdir=args.workdir,
                 progress=(lambda r: print(step_line(r), flush=True)) if args.timeline else None)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(to_json(result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
