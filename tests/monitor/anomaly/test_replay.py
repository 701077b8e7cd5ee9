"""The replay (``TargetDetector.replay``, ``score_timeline``: seasonal predictions computed for
the whole series at once) gives exactly what the online step path gives, point by point, on a
series with a weekly and daily cycle, gaps, spikes, a long incident (excluded, then relearned)
and a variance jump. Hourly steps and short windows, so a few weeks (every seasonal lag, the
trend window sliding, tail refreshes, relearning) take a second."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from monitor.anomaly.baseline import SeriesBaseline, seasonal_predictions
from monitor.anomaly.detectors import Direction, RobustDetector
from monitor.anomaly.features import OFFERED_LOAD, THROUGHPUT
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.calibrated import CalibratedDetector
from monitor.anomaly.series import score_timeline
from monitor.anomaly.target import TargetDetector, TargetState
from monitor.anomaly.timeline import build

PARAMS = AnomalyParams(step_seconds=3600.0, trend_points=200, min_seasonal_points=60,
                       tail_days=7.0, tail_refresh_points=24, relearn_points=30,
                       load_curve_points=150, efficiency_trailing_points=100)
STEPS = 900  # five weeks and a bit: all three seasonal lags in use


def messy_rows(seed: int = 7) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(STEPS):
        day = math.sin(2 * math.pi * (k % 24) / 24)
        weekend = 0.6 if (k // 24) % 7 >= 5 else 1.0
        load = 10 * weekend * (0.6 + 0.4 * day) * (1 + 0.05 * rng.standard_normal())
        row = {
            THROUGHPUT: 300 * load * (1 + 0.03 * rng.standard_normal()),
            OFFERED_LOAD: load,
            "ttft_p99_seconds": round(0.1 + 0.01 * load + 0.01 * rng.standard_normal(), 3),
            "itl_p99_seconds": 0.02 + 0.001 * rng.standard_normal(),
            "e2e_p99_seconds": 1 + 0.05 * rng.standard_normal(),
            "kv_cache_usage_ratio": 0.03 * load, "queue_depth": float(rng.poisson(0.2)),
            "error_ratio": 0.0, "gpu_memory_used_bytes": 2e9 + 1e6 * rng.standard_normal(),
            "preemptions_per_second": 0.0, "batch_utilization": 0.1 * load}
        if rng.random() < 0.03 or 400 <= k < 420:  # scattered gaps and a long one
            row = {name: math.nan for name in row}
        elif 500 <= k < 580:  # an incident longer than relearn_points
            row["ttft_p99_seconds"] *= 4
            row[THROUGHPUT] *= 0.4
            row["error_ratio"] = 0.05
        elif 700 <= k < 760:  # variance jumps, level kept
            row["itl_p99_seconds"] += 0.01 * rng.standard_normal()
        if k % 97 == 0:
            row["e2e_p99_seconds"] = 40.0
        rows.append(row)
    return rows


def _key(state: TargetState) -> tuple[object, ...]:
    readings = tuple((name, tuple(np.nan_to_num(v, nan=-1.2345) if isinstance(v, float) else v
                                  for v in dataclasses.astuple(reading)))
                     for name, reading in state.readings.items())
    return state.level, state.started, state.diagnosis, readings


def test_target_replay_equals_the_step_path() -> None:
    rows = [(3600.0 * k, row) for k, row in enumerate(messy_rows())]
    step = TargetDetector("t", PARAMS)
    stepped = [step.update(t, row, warm_up=True) for t, row in rows]
    fast = TargetDetector("t", PARAMS)
    head, tail = 300, 820  # a replay after some online steps, then online again
    online = [fast.update(t, row, warm_up=True) for t, row in rows[:head]]
    replayed = online + list(fast.replay(rows[head:tail], live_last=False))
    # the detectors were left as the step path leaves them: the next steps agree too
    replayed += [fast.update(t, row, warm_up=True) for t, row in rows[tail:]]
    assert [_key(s) for s in replayed] == [_key(s) for s in stepped]
    # what makes it a test of the hard parts: seasonal expectations in use, alerts, relearning
    assert len(fast.scored["error_ratio"]._recent["seasonal"]) == PARAMS.spread_points
    assert sum(s.started for s in stepped) >= 2
    assert any(r.active for s in stepped[500:580] for r in s.readings.values())


@pytest.mark.parametrize("end", [560, 900])  # inside the long incident, and after it
def test_catch_up_gives_the_last_state_and_the_same_detectors(end: int) -> None:
    rows = [(3600.0 * k, row) for k, row in enumerate(messy_rows()[:end])]
    step = TargetDetector("t", PARAMS)
    for t, row in rows[:-1]:
        step.update(t, row, warm_up=True)
    last = step.update(*rows[-1])
    fast = TargetDetector("t", PARAMS)
    caught = fast.catch_up(rows)
    assert caught is not None and _key(caught) == _key(last)
    assert len(fast.multivariate._training) == len(step.multivariate._training)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in
               zip(fast.multivariate._training, step.multivariate._training))
    more = [(3600.0 * (end + k), row) for k, row in enumerate(messy_rows(3)[:40])]
    assert ([_key(fast.update(t, row)) for t, row in more]
            == [_key(step.update(t, row)) for t, row in more])
    if end == 560:
        assert caught.level is not None  # the incident is still on: its run was rebuilt


def test_ties_in_the_load_pick_the_most_recent() -> None:
    """A load repeated exactly (a fixed request rate): the nearest neighbours are the most
    recent of the tied points, in the step path and the compiled replay alike."""
    params = dataclasses.replace(PARAMS, load_min_neighbours=5, load_curve_points=40)
    values = np.array([1.0] * 20 + [1.02] * 30)  # within the noise floor: never excluded
    loads = np.full(len(values), 8.0)
    step = RobustDetector(params, Direction.UP, 0.001, load_aware=True)
    stepped = [step.update(float(v), 8.0) for v in values]
    fast = RobustDetector(params, Direction.UP, 0.001, load_aware=True)
    replayed = fast.replay(values, loads)
    assert np.array_equal([r.expected for r in stepped], replayed.expected, equal_nan=True)
    # the five nearest (all at distance 0) are the last five: their median turns to the
    # second level on its third point
    assert stepped[22].expected == 1.0 and stepped[23].expected == 1.02
    assert not any(r.active for r in stepped)


@pytest.mark.parametrize("direction", list(Direction))
def test_series_replay_equals_the_step_path(direction: Direction) -> None:
    """`inferwatch anomaly score` (vectorized deviations) and the calibrated detector point by
    point give the same scores and alerts, gaps and messy rows included."""
    values = np.array([row["ttft_p99_seconds"] for row in messy_rows(11)])
    times = 3600.0 * np.arange(STEPS)
    detector = CalibratedDetector(PARAMS, direction, expected_points=STEPS)
    points = [detector.update(v) for v in values.tolist()]
    scored = score_timeline(build(times, values, 3600.0), PARAMS, direction)
    assert scored.scores.tolist() == [score for score, _, _ in points]
    active = np.array([a for _, a, _ in points])
    started = active & ~np.concatenate(([False], active[:-1]))
    assert scored.starts.tolist() == started.tolist()
    assert scored.starts.any() or direction is Direction.DOWN


@pytest.mark.parametrize("first", [0, 5, 400])
def test_seasonal_predictions_equal_the_streaming_ones(first: int) -> None:
    rng = np.random.default_rng(first)
    x = np.round(np.sin(np.arange(STEPS) / 4) + 0.1 * rng.standard_normal(STEPS), 1)
    x[rng.random(STEPS) < 0.4] = math.nan  # windows with too few points too
    baseline = SeriesBaseline(PARAMS)
    streamed = []
    for value in x:
        baseline.expect()
        streamed.append(baseline._next_prediction)
        baseline.push(float(value))
    vectorised = seasonal_predictions(x, first, baseline.season, PARAMS.season_lags,
                                      PARAMS.season_halfwidth_points)
    assert np.array_equal(vectorised, np.array(streamed[first:]), equal_nan=True)
    assert np.isfinite(vectorised).sum() > 100


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replay_with_repeated_loads_equals_the_step_path(seed: int) -> None:
    """Loads from a handful of exact values (many ties at the k-th distance), gaps, spikes
    and a slowdown: the compiled load curve picks what the step path picks, step for step."""
    rng = np.random.default_rng(seed)
    params = dataclasses.replace(PARAMS, load_min_neighbours=7, load_curve_points=60,
                                 relearn_points=15)
    n = 700
    loads = rng.choice([4.0, 5.0, 6.0, 8.0, 8.5], size=n)
    loads[rng.random(n) < 0.05] = math.nan
    values = 0.1 * loads + 0.01 * rng.standard_normal(n)
    values[rng.random(n) < 0.03] = math.nan
    values[rng.random(n) < 0.02] *= 5
    values[400:430] *= 1.8
    step = RobustDetector(params, Direction.UP, 0.001, load_aware=True)
    stepped = [step.update(float(v), float(x)) for v, x in zip(values, loads)]
    fast = RobustDetector(params, Direction.UP, 0.001, load_aware=True)
    for v, x in zip(values[:100], loads[:100]):
        fast.update(float(v), float(x))
    replayed = fast.replay(values[100:], loads[100:])
    got = [replayed.reading(k) for k in range(n - 100)]
    assert [_reading_key(r) for r in got] == [_reading_key(r) for r in stepped[100:]]
    assert sum(r.load_aware for r in got) > 400 and sum(r.started for r in got) >= 2


def _reading_key(reading: object) -> tuple[object, ...]:
    return tuple(-1.2345 if isinstance(v, float) and math.isnan(v) else v
                 for v in dataclasses.astuple(reading))  # type: ignore[call-overload]


def test_without_numba_the_replay_steps_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numba is not installed the replay falls back to ``update`` point by point: the
    same states."""
    from monitor.anomaly import compiled

    rows = [(3600.0 * k, row) for k, row in enumerate(messy_rows()[:600])]
    fast = [_key(s) for s in TargetDetector("t", PARAMS).replay(rows, live_last=False)]
    monkeypatch.setattr(compiled, "AVAILABLE", False)
    slow = [_key(s) for s in TargetDetector("t", PARAMS).replay(rows, live_last=False)]
    assert slow == fast and sum(s[1] for s in slow) >= 1


def test_the_replay_is_compiled_where_numba_installs() -> None:
    """The equality tests above compare the compiled replay with the step path only where
    numba is importable; it is a dependency up to Python 3.14, so there it must be."""
    import sys

    from monitor.anomaly import compiled

    if sys.version_info < (3, 15):
        assert compiled.AVAILABLE, "numba is not importable: the replay is not compiled"
