"""Load-aware latency on the reference server: a load ramp that must not alert, and a
latency fault at constant load that must.

    python -m bench.anomaly_load_ramp [--step 3] [--rate 8] [--json out.json]

The real reference server (as ``bench.anomaly_reference``, time-compressed: one step stands
for one minute) under Poisson load shaped in four phases:
1. two cycles between 35% and 100% of ``--rate`` (the target is seen at every load);
2. a long quiet stretch at 35%, longer than the trailing baseline (it forgets the busy hours);
3. a ramp back to 100%, held: latency and queue rise with the load, as seen in phase 1;
4. at 100%, the ``latency`` fault (+30 ms per engine step): the same load, slower.

The monitor's detectors (load-aware latency, queue, KV usage) run live. The same recorded
feature rows are then replayed through the same detectors blind to the load (every feature on
its time baseline), so both judge identical data. Reported per detector set: alert starts in
phases 1-3 (false: the load was seen before) and whether, when and as what the fault was
detected. Parameters: the defaults at the step, except a trailing window of 40 steps (a
compressed run cannot wait 120 steps for the blind baseline to forget).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.anomaly_reference import (
    FAULTS, LoadShape, Result, Schedule, StepRecord, report, run, step_line,
)
from monitor.anomaly.features import SCORED
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.target import TargetDetector

CYCLE_STEPS = 32
CYCLES = 2
QUIET_STEPS = 45
RAMP_STEPS = 10
HOLD_STEPS = 15
FAULT_STEPS = 12
TAIL_STEPS = 5
TRAILING_POINTS = 40


@dataclass(frozen=True, slots=True)
class Judged:
    detectors: str
    false_starts: list[tuple[int, str, str]]   # (step, phase, detectors) before the fault
    fault_detected_step: int | None
    fault_detectors: list[str]
    fault_limit: str | None


def shape(step: float, rate: float, low: float = 0.35) -> tuple[LoadShape, dict[str, range]]:
    """The load profile and the steps of each phase."""
    cycle_end = CYCLES * CYCLE_STEPS
    quiet_end = cycle_end + QUIET_STEPS
    ramp_end = quiet_end + RAMP_STEPS
    hold_end = ramp_end + HOLD_STEPS
    points = [(k * step, low + (1 - low) * (1 - math.cos(2 * math.pi * k / CYCLE_STEPS)) / 2)
              for k in range(cycle_end + 1)]
    points += [(quiet_end * step, low), (ramp_end * step, 1.0), (10**6, 1.0)]
    phases = {"cycles": range(0, cycle_end), "quiet": range(cycle_end, quiet_end),
              "ramp": range(quiet_end, ramp_end), "hold": range(ramp_end, hold_end),
              "fault": range(hold_end, hold_end + FAULT_STEPS)}
    return LoadShape(base_rate=rate, profile=tuple(points)), phases


def phase_of(index: int, phases: dict[str, range]) -> str:
    return next((name for name, steps in phases.items() if index in steps), "tail")


def judge(name: str, states: Sequence[tuple[int, bool, tuple[str, ...], str | None]],
          phases: dict[str, range]) -> Judged:
    """``states``: per step (index, alert starts, detectors active, diagnosis)."""
    fault = phases["fault"]
    false = [(k, phase_of(k, phases), ",".join(active)) for k, started, active, _ in states
             if started and k < fault.start]
    detected = next(((k, active, limit) for k, started, active, limit in states
                     if k in fault and active and (started or k == fault.start)), None)
    return Judged(name, false, detected[0] if detected else None,
                  list(detected[1]) if detected else [], detected[2] if detected else None)


def replay_blind(steps: Sequence[StepRecord], params: AnomalyParams
                 ) -> list[tuple[int, bool, tuple[str, ...], str | None]]:
    """The recorded rows through the detectors with every feature on its time baseline."""
    blind = tuple(dataclasses.replace(f, load_aware=False) for f in SCORED)
    detector = TargetDetector("blind", params, blind)
    out = []
    for s in steps:
        state = detector.update(s.end_time, s.values)
        out.append((s.index, state.started, tuple(sorted(state.active)),
                    state.diagnosis.limit if state.diagnosis else None))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=8.0, help="peak Poisson rate, req/s")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeline", action="store_true")
    args = parser.parse_args(argv)
    load, phases = shape(args.step, args.rate)
    latency = next(f for f in FAULTS if f.name == "latency")
    schedule = Schedule(faults=(latency,), warmup_steps=phases["fault"].start,
                        fault_steps=FAULT_STEPS, tail_steps=TAIL_STEPS, recovery_steps=3)
    params = AnomalyParams(step_seconds=args.step, trailing_points=TRAILING_POINTS)
    print(f"{schedule.total_steps} steps of {args.step:g} s "
          f"(~{schedule.total_steps * args.step / 60:.1f} min)", flush=True)
    result: Result = run(schedule, step_seconds=args.step, load=load, params=params,
                         progress=(lambda r: print(step_line(r), flush=True))
                         if args.timeline else None)
    aware = judge("load-aware (the monitor's)",
                  [(s.index, s.started, s.active, s.limit) for s in result.steps], phases)
    blind = judge("blind to the load (time baselines)", replay_blind(result.steps, params),
                  phases)
    print(report(result))
    print("\nphases (steps): " + ", ".join(f"{k} {r.start}-{r.stop - 1}"
                                          for k, r in phases.items()))
    fault_start = phases["fault"].start
    for j in (aware, blind):
        found = (f"step {j.fault_detected_step} (delay {j.fault_detected_step - fault_start} "
                 f"steps) as {j.fault_limit} by {', '.join(j.fault_detectors)}"
                 if j.fault_detected_step is not None else "not detected")
        print(f"\n{j.detectors}:\n  alert starts before the fault: {len(j.false_starts)} "
              f"{j.false_starts}\n  fault at constant load: {found}")
    if args.json:
        args.json.write_text(json.dumps({"aware": dataclasses.asdict(aware),
                                         "blind": dataclasses.asdict(blind),
                                         "phases": {k: [r.start, r.stop - 1]
                                                    for k, r in phases.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
