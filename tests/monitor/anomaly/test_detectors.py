"""The streaming detectors: hysteresis, robust scores, seasonal baseline, load-aware ratio,
the multivariate forest, and no look-ahead."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.anomaly.baseline import Ring, SeriesBaseline, median, quantile
from monitor.anomaly.detectors import (
    Direction,
    Hysteresis,
    Level,
    RatioDetector,
    RobustDetector,
    squash,
)
from monitor.anomaly.multivariate import MultivariateDetector
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import score_series

PARAMS = AnomalyParams()
DAY = 1440  # points at the default 60 s step


def noisy(n: int, level: float = 100.0, noise: float = 0.03, seed: int = 0) -> np.ndarray:
    return level * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def test_squash_is_half_at_the_threshold_and_bounded() -> None:
    assert squash(6.0, 6.0) == pytest.approx(0.5)
    assert squash(0.0, 6.0) == 0.0 and squash(-3.0, 6.0) == 0.0
    assert 0.99 < squash(100.0, 6.0) < 1.0


def test_hysteresis_needs_a_run_of_breaches_and_a_run_of_clears() -> None:
    h = Hysteresis(for_points=3, clear_points=2)
    starts = [h.update(breach=b, clear=not b) for b in (True, True, False, True, True, True)]
    assert starts == [False, False, False, False, False, True]
    assert h.active
    # Neither breaching nor clear (between the two levels) keeps it active; one clear does too.
    assert not h.update(breach=False, clear=False) and h.active
    assert not h.update(breach=False, clear=True) and h.active
    assert not h.update(breach=False, clear=True) and not h.active
    assert h.update(breach=True, clear=False, extreme=True) and h.active  # a spike at once


def test_a_hold_of_k_of_n_survives_one_point_under_the_threshold() -> None:
    # The reference run's ITL p99 under a latency fault: z 6.3, 8.0, 7.2, 6.1, then 4.8. Five
    # in a row never fired; four of the last five fires on the fourth breach.
    in_a_row, four_of_five = Hysteresis(5, 5), Hysteresis(5, 5, required=4)
    zs = [1.0, 6.3, 8.0, 4.8, 7.2, 6.1, 3.5]
    assert [in_a_row.update(z >= 6, z < 3) for z in zs] == [False] * 7
    assert [four_of_five.update(z >= 6, z < 3) for z in zs] == [False] * 5 + [True, False]
    with pytest.raises(ValueError, match="required"):
        Hysteresis(5, 5, required=6)


def test_a_long_incident_is_still_flagged_at_its_end_and_a_lasting_change_is_learned() -> None:
    # A latency shift of 1.6x for 4 hours: twice the trailing window. A baseline that learned
    # the incident would clear after about an hour; this one still flags its last point.
    values = noisy(1200, seed=3)
    values[300:540] *= 1.6
    detector = RobustDetector(PARAMS, Direction.UP)
    readings = [detector.update(float(v)) for v in values]
    assert readings[303].started and all(r.active for r in readings[303:540])
    assert readings[539].z > PARAMS.z_alert
    assert not any(r.active for r in readings[545:]), "clears once the incident ends"
    # A change that lasts past relearn_points (6 h) becomes the normal: the alert ends.
    values = noisy(1500, seed=4)
    values[300:] *= 1.6
    detector = RobustDetector(PARAMS, Direction.UP)
    readings = [detector.update(float(v)) for v in values]
    ended = next(k for k in range(303, 1500) if not readings[k].active)
    relearned = 303 + PARAMS.relearn_points
    assert relearned < ended < relearned + PARAMS.trailing_points
    assert not any(r.active for r in readings[ended:])


def test_level_shift_alerts_after_the_hold_and_clean_noise_never_does() -> None:
    values = noisy(600)
    values[400:460] *= 1.6
    detector = RobustDetector(PARAMS, Direction.UP)
    readings = [detector.update(float(v)) for v in values]
    starts = [k for k, r in enumerate(readings) if r.started]
    assert starts == [400 + PARAMS.for_breaches - 1]
    assert not any(r.active for r in readings[:400])
    assert all(r.score == 0.0 for r in readings[:PARAMS.min_points])  # nothing scored yet
    assert not readings[-1].active  # cleared after the shift ended


def test_direction_up_ignores_drops() -> None:
    values = noisy(300)
    values[200:260] *= 0.3
    detector = RobustDetector(PARAMS, Direction.UP)
    assert not any(detector.update(float(v)).active for v in values)


def test_a_flat_series_has_a_spread_floor() -> None:
    """GPU memory reads the same every minute (MAD 0): a 1% wiggle is not an anomaly."""
    values = np.full(200, 40e9)
    values[150] = 40.4e9
    detector = RobustDetector(PARAMS, Direction.UP)
    assert not any(detector.update(float(v)).active for v in values)


def test_gaps_neither_breach_nor_clear() -> None:
    values = noisy(200)
    values[150:170] *= 2
    values[160:165] = math.nan
    detector = RobustDetector(PARAMS, Direction.UP)
    readings = [detector.update(float(v)) for v in values]
    assert all(r.active for r in readings[155:170])
    assert math.isnan(readings[162].z)


def weekly_series(weeks: int, seed: int = 0) -> np.ndarray:
    """A daily cycle (night at 35% of day) and quiet weekends, 3% noise."""
    minutes = np.arange(weeks * 7 * DAY)
    daily = 0.65 + 0.35 * np.sin(2 * np.pi * (minutes % DAY) / DAY - np.pi / 2) ** 2
    weekend = np.where((minutes // DAY) % 7 >= 5, 0.5, 1.0)
    return 1000 * daily * weekend * (1 + 0.03 * np.random.default_rng(seed).standard_normal(
        len(minutes)))


def test_seasonal_baseline_learns_the_week() -> None:
    values = weekly_series(3)
    baseline = SeriesBaseline(PARAMS)
    errors, seasonal = [], []
    for k, v in enumerate(values):
        e = baseline.expect()
        baseline.push(float(v))
        if k >= 2 * 7 * DAY and e is not None:
            errors.append(abs(e.expected - v) / v)
            seasonal.append(e.seasonal)
    assert all(seasonal)
    assert float(np.median(errors)) < 0.03  # predicts the third week within its noise


def test_seasonal_baseline_corrects_for_trend() -> None:
    values = weekly_series(2)
    values[7 * DAY:] *= 1.3  # the service grew 30% since last week
    baseline = SeriesBaseline(PARAMS)
    ratios = []
    for k, v in enumerate(values):
        e = baseline.expect()
        baseline.push(float(v))
        if k >= 9 * 7 * DAY // 7 and e is not None and e.seasonal:
            ratios.append(v / e.expected)
    assert abs(float(np.median(ratios)) - 1.0) < 0.03


def test_weekly_pattern_raises_no_alert_but_a_drop_in_it_does() -> None:
    values = weekly_series(3)
    clean = list(score_series(enumerate(values.tolist()), PARAMS, Direction.DOWN))
    alerts_after_week_one = [p for p in clean[7 * DAY:] if p.started]
    assert alerts_after_week_one == []
    dropped = values.copy()
    at = 2 * 7 * DAY + 5 * DAY + 600  # a Saturday morning: already quiet, and now half that
    dropped[at:at + 30] *= 0.45
    scored = list(score_series(enumerate(dropped.tolist()), PARAMS, Direction.DOWN))
    starts = [k for k, p in enumerate(scored[7 * DAY:], start=7 * DAY) if p.started]
    assert starts and at <= starts[0] <= at + PARAMS.for_points


def test_ratio_detector_follows_offered_load() -> None:
    """Throughput that falls with the load offered (a quiet night) is fine; throughput that
    falls at the same load is a warning below 70%, critical below 50%."""
    n = 400
    load = np.full(n, 10.0)
    load[200:300] = 4.0                        # the night: 40% of the load
    tokens = noisy(n, 3000.0) * load / 10.0
    detector = RatioDetector(PARAMS)
    quiet = [detector.update(float(t), float(q)) for t, q in zip(tokens, load, strict=True)]
    assert not any(r.active for r in quiet)

    tokens = noisy(n, 3000.0)
    tokens[200:240] *= 0.6
    tokens[300:340] *= 0.4
    detector = RatioDetector(PARAMS)
    readings = [detector.update(float(t), 10.0) for t in tokens]
    assert [k for k, r in enumerate(readings) if r.started] == [204, 304]
    assert readings[220].level is Level.WARNING and readings[220].ratio == pytest.approx(
        0.6, abs=0.08)
    assert readings[320].level is Level.CRITICAL
    assert readings[399].level is None


def test_no_look_ahead() -> None:
    """Scoring a prefix gives the same scores as scoring the whole series."""
    values = noisy(500)
    values[300:340] *= 1.8
    full = list(score_series(enumerate(values.tolist()), PARAMS))
    prefix = list(score_series(enumerate(values[:320].tolist()), PARAMS))
    assert prefix == full[:320]


def test_multivariate_catches_a_combination_normal_one_by_one() -> None:
    """KV usage follows load; full KV at a low load is abnormal though both values are
    common on their own."""
    rng = np.random.default_rng(1)
    n = 600
    load = rng.uniform(1.0, 10.0, n)
    kv = 0.08 * load + 0.02 * rng.standard_normal(n)
    load[500:520], kv[500:520] = 1.5, 0.75    # both within their ranges, not together
    detector = MultivariateDetector(PARAMS, ("load", "kv"))
    readings = [detector.update([float(a), float(b)]) for a, b in zip(load, kv, strict=True)]
    starts = [k for k, r in enumerate(readings) if r.started]
    assert starts and 500 <= starts[0] <= 500 + PARAMS.for_points
    assert not any(r.active for r in readings[:500])
    for values in (load, kv):  # neither alone is an outlier
        detector_1d = RobustDetector(PARAMS)
        assert not any(detector_1d.update(float(v)).active for v in values[:520])


def test_multivariate_rejects_a_wrong_vector() -> None:
    with pytest.raises(ValueError, match="expected 2 values"):
        MultivariateDetector(PARAMS, ("a", "b")).update([1.0])


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="ratio_critical"):
        AnomalyParams(ratio_warning=0.5, ratio_critical=0.7)
    with pytest.raises(ValueError, match="step_seconds"):
        AnomalyParams(step_seconds=0)


def latency_at(load: np.ndarray, seed: int) -> np.ndarray:
    """p99 latency of a server that queues as load approaches its capacity (20 req/s)."""
    noise = 1 + 0.05 * np.random.default_rng(seed).standard_normal(len(load))
    return 0.1 / (1 - load / 20.0) * noise


def test_latency_rising_with_a_load_already_served_is_normal_and_at_a_served_load_is_not(
        ) -> None:
    # Four hours cycling between 2 and 16 req/s, then two quiet hours at 3 req/s (a trailing
    # baseline forgets the busy hours), then a ramp back to 16 req/s: latency triples.
    t = np.arange(240)
    cycle = 9 - 7 * np.cos(2 * np.pi * t / 60)
    load = np.concatenate([cycle, np.full(120, 3.0), np.linspace(3, 16, 30), np.full(60, 16.0)])
    latency = latency_at(load, seed=5)
    aware, blind = (RobustDetector(PARAMS, Direction.UP, 0.005, load_aware=flag)
                    for flag in (True, False))
    ramp = range(360, 450)
    aware_readings = [aware.update(float(v), float(x)) for v, x in zip(latency, load)]
    blind_readings = [blind.update(float(v), float(x)) for v, x in zip(latency, load)]
    assert any(blind_readings[k].started for k in ramp), "the time baseline cries wolf"
    assert not any(r.active for r in aware_readings[PARAMS.min_points:]), \
        "latency at a load seen before is normal"
    assert all(aware_readings[k].load_aware for k in ramp)
    # The same ramp, but the server slowed 1.5x at 16 req/s: an anomaly at a served load.
    slowed = latency.copy()
    slowed[420:] *= 1.5
    aware = RobustDetector(PARAMS, Direction.UP, 0.005, load_aware=True)
    readings = [aware.update(float(v), float(x)) for v, x in zip(slowed, load)]
    starts = [k for k, r in enumerate(readings) if r.started]
    assert len(starts) == 1 and 420 <= starts[0] <= 420 + PARAMS.for_points
    # At a load never seen (no curve), the time baseline judges, and the reading says so.
    unseen = RobustDetector(PARAMS, Direction.UP, 0.005, load_aware=True)
    readings = [unseen.update(0.1, 2.0) for _ in range(40)] + [unseen.update(0.1, 19.0)]
    assert readings[-2].load_aware and not readings[-1].load_aware


def test_a_p99_needs_two_extreme_steps_in_a_row_to_alert_at_once() -> None:
    # A step's p99 is about its slowest request: one extreme step is one slow request.
    values = noisy(200, level=0.1, seed=6)
    values[100] = 2.0                # one slow request
    values[150:152] = 2.0            # two steps in a row: an incident
    detector = RobustDetector(PARAMS, Direction.UP, 0.005, extreme_points=2)
    readings = [detector.update(float(v)) for v in values]
    assert [k for k, r in enumerate(readings) if r.started] == [151]
    single = RobustDetector(PARAMS, Direction.UP, 0.005)
    assert [k for k, r in enumerate(single.update(float(v)) for v in values)
            if r.started] == [100, 150]


def test_a_jump_in_spread_at_the_same_level_is_flagged_and_a_level_shift_is_not_a_spread(
        ) -> None:
    values = noisy(600, seed=7)
    values[400:460] = 100 + 5 * (values[400:460] - 100)   # 5x the noise, same level
    detector = RobustDetector(PARAMS, Direction.BOTH)
    readings = [detector.update(float(v)) for v in values]
    starts = [k for k, r in enumerate(readings) if r.started]
    assert len(starts) == 1 and 400 <= starts[0] <= 400 + PARAMS.spread_points + PARAMS.for_points
    assert not any(r.active for r in readings[:400])
    # A level shift of multiplicative noise (twice the level, twice the noise) is a level
    # alert in the direction watched, and no spread alert in the other.
    values = noisy(600, seed=8)
    values[400:] *= 2
    detector = RobustDetector(PARAMS, Direction.DOWN)
    for v in values:
        detector.update(float(v))
        assert not detector.spread.active


def test_ring_median_and_quantile_equal_numpy() -> None:
    rng = np.random.default_rng(1)
    for capacity in (1, 5, 17):
        ring, pushed = Ring(capacity), []
        for _ in range(40):
            for n in range(capacity + 3):
                expected = pushed[len(pushed) - min(n, capacity, len(pushed)):]
                assert ring.last(n).tolist() == expected
            pushed.append(float(rng.standard_normal()))
            ring.push(pushed[-1])
    for n in range(1, 50):
        values = rng.standard_normal(n)
        assert median(values.copy()) == float(np.median(values))
        for q in (0.0, 0.01, 0.5, 0.99, 1.0):
            assert quantile(values.copy(), q) == pytest.approx(float(np.quantile(values, q)),
                                                               abs=1e-12)


def test_a_spread_alert_ends_when_the_expectation_switches_every_few_steps() -> None:
    """A load-aware detector judged at a load it knows, then at loads it has never seen (its
    time baseline), every three steps: the spread of its z-scores is watched per kind of
    expectation, so a variance jump's alert still ends once the values calm down. (It used to
    restart one window at every switch, which then never filled: the alert held for good.)"""
    params = AnomalyParams(step_seconds=60.0, load_min_neighbours=7, load_curve_points=120)
    rng = np.random.default_rng(5)
    known = 10.0
    steps: list[tuple[float, float]] = [(known, 1 + 0.05 * rng.standard_normal())
                                        for _ in range(200)]
    steps += [(known, 1 + 0.6 * rng.standard_normal()) for _ in range(30)]  # variance jumps
    novel = 100.0
    for k in range(120):  # calm again; every third step at a load never seen before
        if k % 6 < 3:
            steps.append((known, 1 + 0.05 * rng.standard_normal()))
        else:
            novel *= 2
            steps.append((novel, 1 + 0.05 * rng.standard_normal()))
    for replayed in (False, True):
        detector = RobustDetector(params, Direction.BOTH, 0.001, load_aware=True)
        loads = np.array([x for x, _ in steps])
        values = np.array([v for _, v in steps])
        if replayed:
            column = detector.replay(values, loads)
            active = column.active.tolist()
            aware = [bool(f & 8) for f in column.flags.tolist()]
        else:
            readings = [detector.update(float(v), float(x)) for v, x in zip(values, loads)]
            active = [r.active for r in readings]
            aware = [r.load_aware for r in readings]
        assert any(active[200:230]), "the variance jump must alert"
        assert aware[230:236] == [True] * 3 + [False] * 3  # the switching really happens
        assert not any(active[-40:]), f"still alerting at the end (replayed={replayed})"
