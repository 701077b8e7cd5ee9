"""The series detector of `inferwatch anomaly score`: deviations thresholded for a false-alert
rate per week, by extreme-value theory, so each series alerts by its own tail rather than by a
fixed z (chosen against the other candidates on three public corpora, tuned on one and reported
on the others: ``bench.anomaly_generalise``, docs/benchmarks.md).

Four deviations of each point, larger is stranger (in the bad direction only, unless both):

- ``z``: the robust detector's z-score (``detectors.RobustDetector``: the seasonal or trailing
  baseline, load-aware where given);
- ``z6``: the median of the last six of those, a deviation that holds;
- ``shift6``, ``shift36``: the median of the last 6 (36) points against the median of the day
  before them, in robust spreads (MAD) of that day: level shifts, free of any model.

Each has its own SPOT threshold (``evt.Spot``) at an equal share of ``alerts_per_week``. An
alert starts where any passes its threshold, unless one ended within ``cooldown_seconds``;
it lasts until every deviation is back under its peak level for ``clear_points``; points of
an alert are not learned. The score is the largest deviation's surprise (0.5 at its
threshold) and marks new anomalies: 0.5 and above only where an alert starts, under it inside
an alert or its cooldown.

``replay`` (whole columns, vectorized) and ``update`` (one point) give the same scores and
alerts; the deviations are medians, exact whichever way they are computed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pandas as pd

from monitor.anomaly.detectors import Direction, RobustDetector
from monitor.anomaly.evt import Spot
from monitor.anomaly.params import AnomalyParams

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
WEEK_SECONDS = 7 * 86400.0
CAPPED = 0.499                  # the score inside an alert or its cooldown
MAD_SIGMA = 1.4826              # a normal's sigma per MAD
SHIFTS = (6, 36)                # points of the recent median against the day before
Z_HOLD = 6                      # points of the held z-score
MIN_DAY_POINTS = 30
LEARN_SHARE = 0.15              # of a series of known length, learned before any alert


@dataclass(frozen=True, slots=True)
class CalibratedParams:
    # The false-alert budget per series-week: the four deviations' thresholds together are
    # crossed at most this often on a stationary series (an alert merges crossings).
    alerts_per_week: float = 2.0
    cooldown_seconds: float = 6 * 3600.0
    clear_points: int = 5
    init_points: int = 1000             # learned before any alert (fewer on short series)
    minimum_sigmas: float = 3.0         # no threshold under this many robust sigmas
    relative_floor: float = 0.05        # a spread is at least this share of the level

    def __post_init__(self) -> None:
        if not self.alerts_per_week > 0:
            raise ValueError(f"alerts_per_week must be positive, got {self.alerts_per_week}")
        if self.cooldown_seconds < 0 or self.clear_points < 1 or self.init_points < 10:
            raise ValueError("need cooldown_seconds >= 0, clear_points >= 1, init_points >= 10")


@dataclass(frozen=True, slots=True)
class Scored:
    score: Floats
    active: Bools
    expected: Floats


def day_points(step: float) -> int:
    return int(max(MIN_DAY_POINTS, min(1440, round(86400.0 / step))))


def _signed(x: Floats | float, direction: Direction) -> Floats:
    arr = np.asarray(x, dtype=np.float64)
    if direction is Direction.UP:
        return np.where(np.isnan(arr), np.nan, np.maximum(arr, 0.0))
    if direction is Direction.DOWN:
        return np.where(np.isnan(arr), np.nan, np.maximum(-arr, 0.0))
    return np.abs(arr)


def shift_columns(values: Floats, step: float, direction: Direction,
                  relative_floor: float = 0.05) -> list[Floats]:
    """``shift6`` and ``shift36`` of every point (vectorized)."""
    x = pd.Series(values)
    day = day_points(step)
    out = []
    for k in SHIFTS:
        recent = x.rolling(k, min_periods=max(1, k // 2)).median()
        before = x.shift(k)
        level = before.rolling(day, min_periods=MIN_DAY_POINTS).median()
        mad = (before - level).abs().rolling(day, min_periods=MIN_DAY_POINTS).median()
        floor = level.abs().rolling(day, min_periods=MIN_DAY_POINTS).median()
        steps = before.diff().abs()
        quantum = steps.where(steps > 0).rolling(day, min_periods=1).median()
        spread = _spread(mad.to_numpy(), floor.to_numpy(), quantum.to_numpy(), relative_floor)
        out.append(_signed((recent.to_numpy() - level.to_numpy()) / spread, direction))
    return out


def _spread(mad: Floats, floor: Floats, quantum: Floats, relative: float) -> Floats:
    """The day's robust spread, at least ``relative`` of its level and its quantum (the
    median non-zero change: a counter or a rounded gauge moves in steps, and a MAD of 0 is
    not no noise)."""
    with np.errstate(invalid="ignore"):
        spread = np.fmax(np.fmax(mad * MAD_SIGMA, relative * floor), quantum) + 1e-9
    return np.where(np.isnan(mad) | np.isnan(floor), np.nan, spread)


def held(z: Floats) -> Floats:
    held_z: Floats = pd.Series(z).rolling(Z_HOLD, min_periods=Z_HOLD // 2).median().to_numpy()
    return held_z


def _median(window: deque[float], min_count: int) -> float:
    present = [v for v in window if v == v]
    return float(np.median(present)) if len(present) >= min_count else math.nan


class _ShiftState:
    """One ``shift`` deviation point by point: the same medians as ``shift_columns``."""

    def __init__(self, k: int, day: int, direction: Direction, relative_floor: float) -> None:
        self.k, self.day, self.direction = k, day, direction
        self.relative_floor = relative_floor
        self.values: deque[float] = deque(maxlen=k + day)    # x, newest last
        self.levels: deque[float] = deque(maxlen=day)         # level of each 'before'
        self.befores: deque[float] = deque(maxlen=day)
        self.steps: deque[float] = deque(maxlen=day)          # non-zero |change| of 'before'

    def update(self, value: float) -> float:
        self.values.append(value)
        k = self.k
        before = self.values[-k - 1] if len(self.values) > k else math.nan
        previous = self.befores[-1] if self.befores else math.nan
        change = abs(before - previous)
        self.steps.append(change if change > 0 else math.nan)
        self.befores.append(before)
        level = _median(self.befores, MIN_DAY_POINTS)
        self.levels.append(level)
        recent = _median(deque(list(self.values)[-k:]), max(1, k // 2))
        deviations = deque(abs(b - lv) for b, lv in zip(self.befores, self.levels))
        mad = _median(deviations, MIN_DAY_POINTS)
        floor = _median(deque(abs(lv) for lv in self.levels), MIN_DAY_POINTS)
        quantum = _median(self.steps, 1)
        spread = float(_spread(np.array([mad]), np.array([floor]), np.array([quantum]),
                               self.relative_floor)[0])
        return float(_signed((recent - level) / spread, self.direction))


class Alerting:
    """The SPOT thresholds and the alert's state, fed one row of deviations at a time."""

    def __init__(self, params: CalibratedParams, step: float, features: int,
                 expected_points: int | None = None) -> None:
        risk = params.alerts_per_week / (WEEK_SECONDS / step) / features
        init = params.init_points
        if expected_points is not None:
            init = min(init, max(50, int(expected_points * LEARN_SHARE)))
        self.spots = [Spot(min(risk, 0.01), init_points=init, minimum=params.minimum_sigmas)
                      for _ in range(features)]
        self.clear_points = params.clear_points
        self.cooldown = int(params.cooldown_seconds / step)
        self.on = False
        self.calm = 0
        self.since = self.cooldown

    def update(self, row: list[float]) -> tuple[float, bool]:
        best, alarm, quiet = 0.0, False, True
        for spot, x in zip(self.spots, row):
            s, a = spot.update(x, learn=not self.on)
            best = max(best, s)
            alarm = alarm or a
            if spot.calibrated and x == x and x > spot.t:
                quiet = False
        if self.on:
            self.calm = self.calm + 1 if quiet else 0
            if self.calm >= self.clear_points:
                self.on, self.since = False, 0
        else:
            self.since += 1
        start = not self.on and alarm and self.since >= self.cooldown
        if start:
            self.on, self.calm = True, 0
        return (best if start else min(best, CAPPED)), self.on


class CalibratedDetector:
    """One series. ``expected_points``: the series' length when known (a file), so a short
    series learns over its first quarter rather than ``init_points``."""

    def __init__(self, params: AnomalyParams, direction: Direction = Direction.BOTH,
                 calibration: CalibratedParams | None = None,
                 expected_points: int | None = None) -> None:
        self.params = params
        self.direction = direction
        self.calibration = calibration or CalibratedParams()
        floor = self.calibration.relative_floor
        self.robust = RobustDetector(replace(params, relative_scale_floor=floor), direction)
        day = day_points(params.step_seconds)
        self.shifts = [_ShiftState(k, day, direction, floor) for k in SHIFTS]
        self._recent_z: deque[float] = deque(maxlen=Z_HOLD)
        self.alerting = Alerting(self.calibration, params.step_seconds, 2 + len(SHIFTS),
                                 expected_points)

    def update(self, value: float) -> tuple[float, bool, float]:
        """One point: its score, whether an alert is active, the robust baseline's value."""
        reading = self.robust.update(value)
        z = float(_signed(reading.z, self.direction))
        self._recent_z.append(z)
        z6 = _median(self._recent_z, Z_HOLD // 2)
        row = [z, z6, *(s.update(value) for s in self.shifts)]
        score, active = self.alerting.update(row)
        return score, active, reading.expected

    def replay(self, values: Floats) -> Scored:
        """``update`` over every point, the deviations vectorized: the same results. Only for
        a fresh detector (the point-by-point state is not carried over)."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        replayed = self.robust.replay(values)
        z = _signed(replayed.z, self.direction)
        columns = [z, held(z), *shift_columns(values, self.params.step_seconds,
                                               self.direction, self.calibration.relative_floor)]
        rows = np.column_stack(columns).tolist()
        score = np.empty(len(values))
        active = np.zeros(len(values), dtype=bool)
        for i, row in enumerate(rows):
            score[i], active[i] = self.alerting.update(row)
        return Scored(score, active, replayed.expected)
