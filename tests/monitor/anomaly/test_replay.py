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
from monitor.anomaly.detectors import Direction
from monitor.anomaly.features import OFFERED_LOAD, THROUGHPUT
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import SeriesScorer, score_timeline
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
    head = 300  # a replay after some online steps uses the history already pushed
    online = [fast.update(t, row, warm_up=True) for t, row in rows[:head]]
    replayed = online + list(fast.replay(rows[head:], live_last=False))
    assert [_key(s) for s in replayed] == [_key(s) for s in stepped]
    # what makes it a test of the hard parts: seasonal predictions in use, alerts, relearning
    assert any(not math.isnan(x) for x in fast.scored["error_ratio"].baseline._plan)
    assert sum(s.started for s in stepped) >= 2
    assert any(r.active for s in stepped[500:580] for r in s.readings.values())


def test_series_replay_equals_the_step_path() -> None:
    values = np.array([row["ttft_p99_seconds"] for row in messy_rows(11)])
    times = 3600.0 * np.arange(STEPS)
    scorer = SeriesScorer(PARAMS, Direction.BOTH)
    points = [scorer.update(t, v) for t, v in zip(times.tolist(), values.tolist())]
    scored = score_timeline(build(times, values, 3600.0), PARAMS, Direction.BOTH)
    assert scored.scores.tolist() == [p.score for p in points]
    assert scored.starts.tolist() == [p.started for p in points]
    assert scored.starts.any()


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
