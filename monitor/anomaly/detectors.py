"""Streaming detectors with hysteresis, one instance per series, no look-ahead.

- ``RobustDetector``: z-score of a value against its baseline (``SeriesBaseline``), in the
  direction that is bad for the metric (latency up, throughput down, or both).
- ``RatioDetector``: throughput over its baseline, which follows the load offered (a quiet
  night is not an anomaly; more load than a saturated server can serve does not raise the
  bar). Warning below 70%, critical below 50%, each held for ``for_points``.
- ``Hysteresis``: an alert starts after ``for_points`` breaching points in a row (or at once
  on an extreme one) and ends after ``clear_points`` points in a row under a lower level, so
  it does not flap. Gaps (NaN) neither breach nor clear.

Scores are in [0, 1]: 0.5 at the alert threshold, s = d^2 / (d^2 + t^2) for a deviation d
past normal against a threshold t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from monitor.anomaly.baseline import SeriesBaseline
from monitor.anomaly.params import AnomalyParams


class Direction(StrEnum):
    UP = "up"        # higher is worse (latency, queue, KV usage, errors, memory)
    DOWN = "down"    # lower is worse (throughput)
    BOTH = "both"


class Level(StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"


def squash(deviation: float, threshold: float) -> float:
    """A non-negative deviation as a score in [0, 1), 0.5 at ``threshold``."""
    if not deviation > 0:
        return 0.0
    return deviation * deviation / (deviation * deviation + threshold * threshold)


class Hysteresis:
    def __init__(self, for_points: int, clear_points: int) -> None:
        self.for_points = for_points
        self.clear_points = clear_points
        self.active = False
        self._breaches = 0
        self._clears = 0

    def update(self, breach: bool, clear: bool, extreme: bool = False) -> bool:
        """One point; returns True on the point where an alert starts."""
        self._breaches = self._breaches + 1 if breach else 0
        self._clears = self._clears + 1 if clear else 0
        if not self.active:
            if extreme or self._breaches >= self.for_points:
                self.active, self._clears = True, 0
                return True
        elif self._clears >= self.clear_points:
            self.active, self._breaches = False, 0
        return False


@dataclass(frozen=True, slots=True)
class Reading:
    """One point as a detector saw it."""

    value: float
    expected: float       # NaN before the baseline has enough points
    z: float              # signed deviation in robust standard deviations (NaN unscored)
    score: float          # [0, 1]
    active: bool
    started: bool         # the alert starts on this point
    level: Level | None = None
    ratio: float = math.nan  # RatioDetector: value over the load-adjusted baseline


class RobustDetector:
    def __init__(self, params: AnomalyParams, direction: Direction = Direction.BOTH,
                 absolute_floor: float | None = None) -> None:
        self.params = params
        self.direction = direction
        self.baseline = SeriesBaseline(params, absolute_floor)
        self.hysteresis = Hysteresis(params.for_points, params.clear_points)

    def update(self, value: float) -> Reading:
        p = self.params
        expectation = self.baseline.expect()
        self.baseline.push(value)
        if expectation is None or math.isnan(value):
            return Reading(value, expectation.expected if expectation else math.nan, math.nan,
                           0.0, self.hysteresis.active, False)
        z = (value - expectation.expected) / expectation.scale
        bad = self._bad(z)
        started = self.hysteresis.update(bad >= p.z_alert, bad < p.z_clear, bad >= p.z_extreme)
        level = Level.WARNING if self.hysteresis.active else None
        return Reading(value, expectation.expected, z, squash(bad, p.z_alert),
                       self.hysteresis.active, started, level)

    def _bad(self, z: float) -> float:
        if self.direction is Direction.UP:
            return z
        if self.direction is Direction.DOWN:
            return -z
        return abs(z)


class RatioDetector:
    """Throughput against its baseline, adjusted for the load offered.

    With the load: expected = baseline tokens per offered request x offered requests, capped
    at the throughput the target reached recently (its ``capacity_quantile``), so a quiet
    night lowers the bar and more load than a saturated server can serve does not raise it.
    Without it: the throughput's own baseline."""

    def __init__(self, params: AnomalyParams) -> None:
        self.params = params
        self.baseline = SeriesBaseline(params)
        self.efficiency = SeriesBaseline(params, trailing_points=params.efficiency_trailing_points)
        self.warning = Hysteresis(params.for_points, params.clear_points)
        self.critical = Hysteresis(params.for_points, params.clear_points)

    def update(self, value: float, load: float = math.nan) -> Reading:
        p = self.params
        own = self.baseline.expect()
        has_load = math.isfinite(load) and load > 0
        per_request = self.efficiency.expect()
        capacity = self.baseline.quantile(p.capacity_quantile, p.efficiency_trailing_points)
        self.baseline.push(value)
        self.efficiency.push(value / load if has_load else math.nan)
        if has_load and per_request is not None and per_request.expected > 0:
            expected = per_request.expected * load
            if math.isfinite(capacity) and capacity > 0:
                expected = min(expected, capacity)
            scale = per_request.scale * load
        elif own is not None and own.expected > 0:
            expected, scale = own.expected, own.scale
        else:
            return Reading(value, math.nan, math.nan, 0.0, self.warning.active, False,
                           self._level())
        if math.isnan(value):
            return Reading(value, expected, math.nan, 0.0, self.warning.active, False,
                           self._level())
        ratio = value / expected
        margin = p.ratio_clear_margin
        started = self.warning.update(ratio < p.ratio_warning, ratio >= p.ratio_warning + margin)
        self.critical.update(ratio < p.ratio_critical, ratio >= p.ratio_critical + margin)
        score = squash(1.0 - ratio, 1.0 - p.ratio_warning)
        return Reading(value, expected, (value - expected) / scale, score, self.warning.active,
                       started, self._level(), ratio)

    def _level(self) -> Level | None:
        if self.critical.active:
            return Level.CRITICAL
        return Level.WARNING if self.warning.active else None
