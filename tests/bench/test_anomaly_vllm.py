"""bench/anomaly_vllm.py without a vLLM (the run itself needs minutes: vLLM's start and a
30-step warm-up before the detectors score, so it is a bench, not a test): the faults' extra
requests fall inside their labels, and each detector is scored on its own alert starts."""

from __future__ import annotations

import math

from bench import anomaly_vllm as av
from bench.anomaly_reference import STEP_VALUES, FaultSpec, Schedule, StepRecord

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


def test_each_detector_is_scored_on_its_own_alert_starts() -> None:
    n = SCHEDULE.total_steps
    surge, bad = SCHEDULE.inject_step(0), SCHEDULE.inject_step(1)
    false_step = SCHEDULE.window_end(0) + 1     # clean, between the windows
    starts = {surge + 1: ("queue_depth",), bad + 2: ("error_ratio",),
              false_step: ("error_ratio",), 2: ("queue_depth",)}  # step 2: in the warm-up
    steps = [step(k, starts.get(k, ())) for k in range(n)]
    results = {d.name: d for d in av.per_detector(steps, SCHEDULE)}
    queue, errors = results["queue_depth"], results["error_ratio"]
    assert (queue.recall, queue.precision, queue.false_starts) == (1 / 3, 1.0, 0)
    assert queue.delays == {"surge": 1, "bad_requests": None, "quiet": None}
    assert (errors.recall, errors.precision, errors.false_starts) == (1 / 3, 0.5, 1)
    assert errors.delays["bad_requests"] == 2
    clean = n - SCHEDULE.warmup_steps - sum(w.end - w.start + 1 for w in SCHEDULE.windows())
    assert errors.false_per_week == av.STEPS_PER_WEEK / clean
    assert results["multivariate"].recall == 0.0
