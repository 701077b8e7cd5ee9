"""CPU time of the detectors alone (no store reads): what a restart's replay costs in Python.

    python -m bench.anomaly_replay [--steps 5000] [--days 22] [--targets 10]

A synthetic target (one-minute steps, a daily load cycle, latency rising with load) is fed
through ``TargetDetector``; process CPU time, so other work on the machine counts less (it
still slows a shared CPU's caches: report the load beside the figures).

- ``--steps``: the first steps row by row (``update(warm_up=True)``), per target-step. Less
  than a week: the seasonal baseline is not yet in use (it costs more per step).
- ``--days``: a whole replay of one target, side by side in one run: the step path (``update``
  row by row), ``TargetDetector.replay`` (the detectors compiled, every state built) and
  ``catch_up`` (compiled, only the last state: what a restart runs); their states are asserted
  equal. The first call compiles the kernels (or loads them from numba's cache): timed apart.
- ``--targets``: that many targets (other seeds) replayed one after another as the monitor's
  restart does, and the time for 100 projected from them (said so when fewer than 100).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from collections.abc import Sequence

import numpy as np

from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.target import TargetDetector, TargetState

STEP = 60.0
GOAL_ONE = 2.0       # seconds for a 22-day replay of one target (issue 17)
GOAL_HUNDRED = 180.0  # seconds for 100 targets


def rows(steps: int, seed: int = 0) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        load = 10 * (0.6 + 0.4 * math.sin(2 * math.pi * (k % 1440) / 1440)) * (
            1 + 0.05 * rng.standard_normal())
        out.append({
            "tokens_per_second": 300 * load * (1 + 0.03 * rng.standard_normal()),
            "offered_requests_per_second": load,
            "ttft_p99_seconds": 0.1 + 0.01 * load + 0.01 * rng.standard_normal(),
            "itl_p99_seconds": 0.02 + 0.001 * rng.standard_normal(),
            "e2e_p99_seconds": 1 + 0.05 * rng.standard_normal(),
            "kv_cache_usage_ratio": 0.03 * load, "queue_depth": 0.0, "error_ratio": 0.0,
            "gpu_memory_used_bytes": math.nan, "preemptions_per_second": 0.0,
            "batch_utilization": 0.1 * load})
    return out


def _key(state: TargetState) -> tuple[object, ...]:
    """A state as comparable values (NaN equal to NaN)."""
    readings = tuple((name, tuple("nan" if isinstance(v, float) and math.isnan(v) else v
                                  for v in dataclasses.astuple(r)))
                     for name, r in state.readings.items())
    return state.level, state.started, state.diagnosis, readings


def step_path(timed: Sequence[tuple[float, dict[str, float]]]) -> tuple[float, list[TargetState]]:
    detector = TargetDetector("target", AnomalyParams())
    started = time.process_time()
    states = [detector.update(t, row, warm_up=True) for t, row in timed]
    return time.process_time() - started, states


def replay(timed: Sequence[tuple[float, dict[str, float]]], keep: bool
           ) -> tuple[float, list[TargetState]]:
    """``TargetDetector.replay``, every state built (``keep``: kept for the comparison), or,
    without ``keep``, ``catch_up`` (what the monitor's restart runs: only the last state)."""
    detector = TargetDetector("target", AnomalyParams())
    started, wall = time.process_time(), time.perf_counter()
    if keep:
        states = list(detector.replay(timed, live_last=False))
    else:
        last = detector.catch_up(timed)
        states = [] if last is None else [last]
    WALL.append(time.perf_counter() - wall)
    return time.process_time() - started, states


WALL: list[float] = []  # the wall time of each ``replay`` call (its detectors run in threads)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--days", type=float, default=22.0)
    parser.add_argument("--targets", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    feature_rows = rows(args.steps)
    detector = TargetDetector("target", AnomalyParams())
    started = time.process_time()
    for k, row in enumerate(feature_rows):
        detector.update(STEP * k, row, warm_up=True)
    per_step = (time.process_time() - started) / args.steps
    print(f"first {args.steps} steps, step path: {1e6 * per_step:.0f} us per target-step")

    steps = round(args.days * 86400 / STEP)
    timed = [(STEP * k, row) for k, row in enumerate(rows(steps))]
    started = time.perf_counter()
    replay(timed[:2000], keep=False)  # compiles the kernels, or loads them from numba's cache
    print(f"first call (numba compile or cache load): {time.perf_counter() - started:.1f} s "
          "wall")
    old, old_states = step_path(timed)
    states_time, new_states = replay(timed, keep=True)
    same = [_key(s) for s in old_states] == [_key(s) for s in new_states]
    assert same, "replay and step path differ"
    new, last = replay(timed, keep=False)
    wall = WALL[-1]
    assert _key(last[0]) == _key(old_states[-1]), "catch_up and step path differ"
    print(f"{args.days:g}-day replay of one target ({steps} steps), CPU: step path {old:.1f} s, "
          f"replay with every state built {states_time:.1f} s (states equal), catch_up "
          f"{new:.2f} s ({old / new:.1f}x; last state equal)")
    print(f"  catch_up wall {wall:.2f} s (detectors in {os.cpu_count()} threads); goal "
          f"{GOAL_ONE:g} s: " + ("met" if wall < GOAL_ONE else f"missed by {wall - GOAL_ONE:.1f} s "
                                 f"({wall / GOAL_ONE:.1f}x)"))
    del old_states, new_states

    total = 0.0
    walls = len(WALL)
    for seed in range(1, args.targets + 1):
        total += replay([(STEP * k, row) for k, row in enumerate(rows(steps, seed))],
                        keep=False)[0]
    wall = sum(WALL[walls:])
    hundred = wall * 100 / args.targets
    how = "measured" if args.targets == 100 else f"projected from {args.targets} targets"
    print(f"{args.targets} targets caught up one after another: CPU {total:.0f} s "
          f"({total / args.targets:.2f} s each), wall {wall:.0f} s ({wall / args.targets:.2f} s "
          f"each); 100 targets: {hundred:.0f} s wall ({how}); goal {GOAL_HUNDRED:g} s: "
          + ("met" if hundred < GOAL_HUNDRED else f"missed by {hundred - GOAL_HUNDRED:.0f} s"))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
