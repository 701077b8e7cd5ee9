"""The labelled reference-server evaluation (bench/anomaly_reference.py): its schedule and
scoring on hand-made steps, and a short real run (one injected error fault, time-compressed
to 3 s steps) that must be detected at once as errors after a warm-up with no alert."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from bench.anomaly_reference import (
    FAULTS, LoadShape, LoadStats, Result, Schedule, StepRecord, evaluate, from_json, report,
    run, to_json,
)

BY_NAME = {f.name: f for f in FAULTS}
SMALL = Schedule(faults=(BY_NAME["kv_squeeze"], BY_NAME["throughput_drop"]), warmup_steps=4,
                 fault_steps=3, gap_steps=5, tail_steps=2, recovery_steps=2)


def steps(alerting: dict[int, str], schedule: Schedule = SMALL) -> list[StepRecord]:
    """One record per step of ``schedule``; ``alerting``: step -> diagnosis while alerting
    (an alert starts where the step before was not alerting)."""
    out = []
    for k in range(schedule.total_steps):
        limit = alerting.get(k)
        out.append(StepRecord(
            index=k, end_time=100.0 + 5 * (k + 1), evaluated_at=100.0 + 5 * (k + 1) + 2.5,
            phase=schedule.phase(k), load_factor=1.0,
            level="warning" if limit else None, started=bool(limit) and k - 1 not in alerting,
            score=0.6 if limit else 0.1, limit=limit,
            active=("error_ratio",) if limit else (), newly_active=(),
            throughput_ratio=1.0, values={}))
    return out


def test_schedule_labels_faults_and_recovery() -> None:
    assert SMALL.total_steps == 4 + 3 + 5 + 3 + 2
    assert [SMALL.phase(k) for k in range(SMALL.total_steps)] == (
        ["warmup"] * 4 + ["kv_squeeze"] * 3 + ["recovery"] * 2 + ["clean"] * 3
        + ["throughput_drop"] * 3 + ["recovery"] * 2)
    assert [(w.start, w.end) for w in SMALL.windows()] == [(4, 8), (12, 16)]
    with pytest.raises(ValueError, match="gap_steps"):
        Schedule(gap_steps=3, recovery_steps=3)


def test_load_cycles_between_its_low_fraction_and_the_base_rate() -> None:
    shape = LoadShape(base_rate=10.0, low_fraction=0.4, period_seconds=100.0)
    assert shape.factor(0.0) == pytest.approx(0.4) and shape.factor(50.0) == pytest.approx(1.0)
    specs = shape.workload(0.0, 400.0)
    assert 0.7 * 0.7 * 4000 < len(specs) < 1.3 * 0.7 * 4000  # mean factor 0.7
    quiet = sum(1 for s in specs if s.arrival_seconds % 100 < 10)
    busy = sum(1 for s in specs if 45 <= s.arrival_seconds % 100 < 55)
    assert busy > 1.8 * quiet
    assert all(16 <= s.max_tokens <= 96 for s in specs)


def test_evaluate_counts_detections_delays_diagnoses_and_false_alerts() -> None:
    # kv_squeeze (4..6) detected on its 2nd step but diagnosed as errors; throughput_drop
    # (12..14) missed; a false alert at 10 in the clean gap.
    records = steps({5: "errors", 6: "errors", 10: "slow_gpu"})
    ev = evaluate(records, SMALL, 5.0, t0=100.0)
    kv, drop = ev.faults
    assert kv.detected and kv.delay_steps == 1 and kv.detection_step == 5
    assert kv.delay_seconds == pytest.approx(132.5 - 120.0)  # evaluated - injected
    assert kv.limit == "errors" and not kv.diagnosis_ok and kv.peak_level == "warning"
    assert not drop.detected and drop.delay_steps is None and drop.limit is None
    assert [(a.step, a.limit, a.length_steps) for a in ev.false_alerts] == [(10, "slow_gpu", 1)]
    assert ev.recall == 0.5 and ev.precision == 0.5 and ev.mean_delay_steps == 1
    assert ev.false_alert_steps == 1 and ev.clean_steps == 4 + 3 + 0
    assert set(ev.nab) == {"standard", "reward_low_fp_rate", "reward_low_fn_rate"}
    assert ev.nab["reward_low_fp_rate"] < ev.nab["standard"] < 100.0


def test_a_perfect_detector_scores_100() -> None:
    ev = evaluate(steps({4: "kv_cache_pressure", 12: "slow_gpu"}), SMALL, 5.0)
    assert [f.diagnosis_ok for f in ev.faults] == [True, True]
    assert [f.delay_steps for f in ev.faults] == [0, 0]
    assert all(v == pytest.approx(100.0) for v in ev.nab.values())
    assert not ev.false_alerts and ev.recall == 1.0 and ev.precision == 1.0


def test_an_alert_carried_into_a_fault_counts_when_a_new_detector_turns_on() -> None:
    records = steps({3: "slow_gpu", 4: "slow_gpu", 5: "errors"})
    records[5] = dataclasses.replace(records[5], newly_active=("preemptions_per_second",))
    ev = evaluate(records, SMALL, 5.0)
    kv = ev.faults[0]
    assert kv.active_at_injection and kv.detected and kv.detection_step == 5
    assert [a.step for a in ev.false_alerts] == [3]


def test_per_detector_precision_recall_delay_and_false_alerts_per_week() -> None:
    # error_ratio starts on kv_squeeze's 2nd step; queue_depth in the warm-up (false) and on
    # throughput_drop's 2nd step; the multivariate model is fitted on step 8, starts a false
    # alert on 10 in the clean gap and is still alerting when throughput_drop begins (12).
    records = steps({5: "errors", 6: "errors", 10: "slow_gpu"})
    active = {2: ("queue_depth",), 5: ("error_ratio",), 6: ("error_ratio",),
              10: ("multivariate",), 11: ("multivariate",), 13: ("queue_depth",)}
    starts = {2: ("queue_depth",), 5: ("error_ratio",), 10: ("multivariate",),
              13: ("queue_depth",)}
    for k, r in enumerate(records):
        live = ("error_ratio", "queue_depth") + (("multivariate",) if k >= 9 else ())
        records[k] = dataclasses.replace(r, active=active.get(k, ()),
                                         newly_active=starts.get(k, ()), live=live)
    ev = evaluate(records, SMALL, 5.0, t0=100.0)
    assert ev.multivariate_fitted_step == 8
    errors, queue, multi = ev.detectors
    assert [errors.name, queue.name, multi.name] == ["error_ratio", "queue_depth",
                                                     "multivariate"]
    assert [f.delay_steps for f in errors.faults] == [1, None]
    assert errors.faults[0].delay_seconds == pytest.approx(132.5 - 120.0)
    assert (errors.precision, errors.recall, errors.false_starts) == (1.0, 0.5, 0)
    assert errors.live_clean_steps == 7 and errors.false_per_week == 0.0
    assert [f.fired for f in queue.faults] == [False, True] and queue.mean_delay_steps == 1
    assert (queue.alert_starts, queue.true_starts, queue.false_starts,
            queue.false_in_warmup) == (2, 1, 1, 1)
    assert queue.precision == 0.5 and queue.false_per_week == pytest.approx(10080 / 7)
    assert [(f.fired, f.carried) for f in multi.faults] == [(False, False), (False, True)]
    assert multi.recall == 0.0 and multi.precision == 0.0 and multi.first_live_step == 9
    assert multi.live_clean_steps == 3 and multi.false_per_week == pytest.approx(10080 / 3)
    # A saved run re-scores to the same report.
    result = Result(5.0, 2.0, 1.0, SMALL, LoadShape(), ("--num-threads", "1"), records, ev,
                    LoadStats(10, 9, 1, 0, 0.1), 100.0, 100.0)
    text = report(result)
    assert "first fitted on step 8" in text and "multivariate" in text.split("per detector")[1]
    assert report(from_json(to_json(result))) == text
    with pytest.raises(ValueError, match="not a bench.anomaly_reference"):
        from_json({"schedule": {}})


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_injected_error_fault_is_detected_and_diagnosed_after_a_quiet_warm_up(
        tmp_path: Path) -> None:
    """A real server under the cycling load: 32 clean warm-up steps (the detectors score
    from step 30), then 30% errors for 8 steps. ~2.5 minutes. The load peaks at 8 req/s, a
    fifth of what the server serves alone, so that other work on a 2-core machine cannot
    push it into a real overload (a queue of 100 is an anomaly, rightly flagged)."""
    step = 3.0
    schedule = Schedule(faults=(BY_NAME["errors"],), warmup_steps=32, fault_steps=8, tail_steps=3,
                        recovery_steps=3)
    shape = LoadShape(base_rate=8.0, period_seconds=48 * step)
    result = run(schedule, step_seconds=step, load=shape, workdir=tmp_path)
    assert len(result.steps) == schedule.total_steps
    assert [s.index for s in result.steps if s.level is not None and s.index < 32] == [], \
        report(result)
    mean_rate = shape.base_rate * (1 + shape.low_fraction) / 2
    assert result.load_stats.requests > 0.5 * mean_rate * schedule.total_steps * step
    fault = result.evaluation.faults[0]
    assert fault.detected and fault.delay_steps is not None and fault.delay_steps <= 4, \
        report(result)
    assert fault.limit == "errors" and "error_ratio" in fault.detectors, report(result)
    assert result.evaluation.recall == 1.0 and result.evaluation.false_alerts == []
    assert to_json(result)["evaluation"]["faults"][0]["limit"] == "errors"
    by_name = {d.name: d for d in result.evaluation.detectors}
    assert by_name["error_ratio"].faults[0].fired, report(result)
    assert not math.isnan(result.evaluation.nab["standard"])


def test_rejudge_feeds_the_recorded_values_to_a_fresh_detector() -> None:
    """A run's steps recorded from the live detector, saved and loaded: judged again by the
    same detectors they come out the same, step for step (NaN gaps included)."""
    import numpy as np

    from bench.anomaly_reference import TARGET, _record, rejudge
    from monitor.anomaly.params import AnomalyParams
    from monitor.anomaly.target import TargetDetector

    schedule = Schedule(faults=(BY_NAME["errors"],), warmup_steps=40, fault_steps=6,
                        tail_steps=4, recovery_steps=2)
    rng = np.random.default_rng(3)
    live = TargetDetector(TARGET, AnomalyParams(step_seconds=5.0))
    records = []
    for k in range(schedule.total_steps):
        values = {"tokens_per_second": 300 + 10 * rng.standard_normal(),
                  "offered_requests_per_second": 5 + 0.2 * rng.standard_normal(),
                  "ttft_p99_seconds": 0.1 + 0.01 * rng.standard_normal(),
                  "error_ratio": 0.3 if schedule.phase(k) == "errors" else 0.0,
                  "queue_depth": math.nan if k == 20 else 0.0}
        state = live.update(100.0 + 5 * (k + 1), values)
        records.append(_record(k, 100.0 + 5 * (k + 1) + 1, state, schedule, LoadShape(),
                               100.0, 5.0))
    ev = evaluate(records, schedule, 5.0, t0=100.0)
    saved = from_json(to_json(Result(5.0, 2.0, 1.0, schedule, LoadShape(), (), records, ev,
                                     LoadStats(1, 1, 0, 0, 0.1), 10.0, 100.0)))
    again = rejudge(saved)
    key = [(s.level, s.started, s.active, s.limit) for s in again.steps]
    assert key == [(s.level, s.started, s.active, s.limit) for s in records]
    assert any(s.started for s in records) and again.evaluation.recall == 1.0
