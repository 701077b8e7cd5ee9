"""bench/anomaly_vllm.py without a vLLM (the run itself needs minutes: vLLM's start and a
30-step warm-up before the detectors score, so it is a bench, not a test): the faults' extra
requests fall inside their labels, and the target alert's false starts per "week" leave the
warm-up out (per-detector scoring is bench.anomaly_reference's, tested with it)."""

from __future__ import annotations

import math

from bench import anomaly_vllm as av
from bench.anomaly_reference import (
    STEP_VALUES, STEPS_PER_WEEK, FaultSpec, LoadStats, Result, Schedule, StepRecord, evaluate,
)

SCHEDULE = Schedule(faults=(av.FAULTS["surge"], av.FAULTS["bad_requests"],
                            FaultSpec("quiet", "cpu_hog", 1, ("slow_gpu",))),
                    warmup_steps=10, fault_steps=4, gap_steps=6, tail_steps=4,
                    recovery_steps=2)
STEP = 5.0


def step(index: int, started: tuple[str, ...] = (), active: tuple[str, ...] = ()
         ) -> StepRecord:
    on = active or started
    return StepRecord(index, index * STEP, index * STEP + 1.0, SCHEDULE.phase(index), 1.0,
                      "warning" if on else None, bool(started), 0.0, None, on, started, 1.0,
                      {name: 1.0 for name, _ in STEP_VALUES})


def test_the_extra_requests_of_a_surge_and_a_400_burst_arrive_within_their_labels() -> None:
    # Offsets from a start 3 s before step 0, as the bench sends them.
    specs = av.fault_arrivals(SCHEDULE, av.LOAD, STEP, -3.0, SCHEDULE.total_steps * STEP)
    surge = [s.arrival_seconds - 3.0 for s in specs if len(s.prompt) < av.BAD_PROMPT_CHARS]
    bad = [s.arrival_seconds - 3.0 for s in specs if len(s.prompt) == av.BAD_PROMPT_CHARS]
    for times, j, rate in ((surge, 0, 18.0), (bad, 1, 4.0)):
        on, off = SCHEDULE.inject_step(j) * STEP, SCHEDULE.clear_step(j) * STEP
        assert all(on <= t < off for t in times)
        # Poisson at the fault's rate over its 20 s: within 4 sigmas of the mean
        assert abs(len(times) - rate * (off - on)) < 4 * math.sqrt(rate * (off - on))


def test_the_target_alert_counts_false_starts_per_week_after_the_warm_up_only() -> None:
    n = SCHEDULE.total_steps
    false_step = SCHEDULE.window_end(0) + 1     # clean, between the windows
    starts = {SCHEDULE.inject_step(0) + 1, false_step, 2}  # step 2: in the warm-up
    steps = [step(k, ("queue_depth",) if k in starts else ()) for k in range(n)]
    evaluation = evaluate(steps, SCHEDULE, STEP)
    run = Result(STEP, 2.0, 1.0, SCHEDULE, av.LOAD, av.ENGINE_ARGS, steps, evaluation,
                 LoadStats(0, 0, 0, 0, 0.0), 0.0, 0.0)
    assert [a.step for a in evaluation.false_alerts] == [2, false_step]
    clean = n - SCHEDULE.warmup_steps - sum(w.end - w.start + 1 for w in SCHEDULE.windows())
    assert av.alert_false_per_week(run) == STEPS_PER_WEEK / clean
