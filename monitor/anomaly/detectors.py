"""Streaming detectors with hysteresis, one instance per series, no look-ahead.

- ``RobustDetector``: z-score of a value against its baseline (``SeriesBaseline``), in the
  direction that is bad for the metric (latency up, throughput down, or both); for a
  load-dependent metric, against what it read at a similar load (``LoadCurve``) where the
  target has been seen at that load. It also watches the spread: the MAD of the last
  ``spread_points`` z-scores around their own median (about 0.6 for the usual noise), past
  ``spread_alert`` is a jump in variance (a level shift alone, or a ramp the expectation
  follows, does not move it). Noise that grows with the level (counts, tokens/s) is allowed
  for: where the recent level is above the expected one, the spread is scaled down by their
  ratio.
- ``RatioDetector``: throughput over its baseline, which follows the load offered (a quiet
  night is not an anomaly; more load than a saturated server can serve does not raise the
  bar). Warning below 70%, critical below 50%, each held for ``for_points``.
- ``Hysteresis``: an alert starts once ``required`` of the last ``for_points`` points breach
  (all of them for the ratio rule, "below 70% for 5 minutes"; 4 of 5 for robust scores, so
  one point of a noisy p99 dipping under the threshold does not restart the count), or at
  once on an extreme one (on ``extreme_points`` in a row: two for a step's p99, which one
  slow request makes extreme), and ends after ``clear_points`` points in a row under a lower
  level, so it does not flap. Gaps (NaN) neither breach nor clear.
- ``TailCalibration``: thresholds for a series whose deviations are heavier-tailed than a
  normal's (tweet counts, bursty traffic), so it alerts a handful of times a week, not dozens.
- ``Exclusion``: which points the baselines must not learn (those of an active alert still
  past the clear level, and extreme ones), until ``relearn_points`` in a row say the change
  is lasting.

Scores are in [0, 1]: 0.5 at the alert threshold, s = d^2 / (d^2 + t^2) for a deviation d
past normal against a threshold t.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist


import numpy as np
import numpy.typing as npt

from monitor.anomaly.baseline import Ring, SeriesBaseline, quantile, sorted_median
from monitor.anomaly.load_curve import LoadCurve, Neighbours
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
    def __init__(self, for_points: int, clear_points: int, required: int | None = None,
                 extreme_points: int = 1) -> None:
        self.for_points = for_points
        self.clear_points = clear_points
        self.required = for_points if required is None else required
        self.extreme_points = extreme_points
        self._extremes = 0  # extreme points in a row
        if not 1 <= self.required <= for_points:
            raise ValueError(f"need 1 <= required <= for_points, got {self.required} of "
                             f"{for_points}")
        self.active = False
        self._recent: deque[bool] = deque(maxlen=for_points)  # breach of the last points
        self._clears = 0

    def update(self, breach: bool, clear: bool, extreme: bool = False) -> bool:
        """One point; returns True on the point where an alert starts."""
        self._recent.append(breach)
        self._clears = self._clears + 1 if clear else 0
        self._extremes = self._extremes + 1 if extreme else 0
        if not self.active:
            if (self._extremes >= self.extreme_points
                    or (breach and sum(self._recent) >= self.required)):
                self.active, self._clears = True, 0
                return True
        elif self._clears >= self.clear_points:
            self.active = False
            self._recent.clear()
        return False


class Exclusion:
    """Whether a point goes into its baseline: not while it belongs to an anomaly, unless the
    anomaly has lasted ``relearn_points`` (then it is the new normal, learned point by point
    as the trailing baseline would any change)."""

    def __init__(self, relearn_points: int) -> None:
        self.relearn_points = relearn_points
        self.run = 0  # excluded points in a row

    def accept(self, anomalous: bool) -> bool:
        if not anomalous:
            self.run = 0
            return True
        self.run += 1
        return self.run > self.relearn_points


class TailCalibration:
    """The robust z thresholds assume a normal-like spread: for a normal series, 1% of points
    deviate past 2.33 sigma (one-sided; 2.58 both ways), and z 6 is rare. A heavy-tailed series
    crosses 6 and 18 every few hours. So the thresholds are scaled by how much heavier the
    series' own tail is: its ``tail_quantile`` (99%) deviation over the last ``tail_days``,
    against a normal's, never below 1 (a calm series keeps the defaults). The 99% quantile is
    set by the series' everyday behaviour, not by incidents (under 1% of points). Refreshed
    every ``tail_refresh_points``; no scaling before a day of scored points. One per kind of
    expectation (trailing, seasonal, at the load): their residuals differ (a trailing median
    misses the daily cycle that the seasonal prediction follows). The spread rule has its own,
    against the 99% local MAD of normal noise (``reference``)."""

    def __init__(self, params: AnomalyParams, direction: Direction,
                 reference: float | None = None) -> None:
        day = 86400.0 / params.step_seconds
        self.params = params
        self.factor = 1.0
        two_sided = direction is Direction.BOTH
        q = params.tail_quantile
        self.reference = (NormalDist().inv_cdf((1 + q) / 2 if two_sided else q)
                          if reference is None else reference)
        self.min_points = max(1, round(day))
        self._deviations = Ring(max(1, round(params.tail_days * day)))
        self._since = 0

    def push(self, bad: float) -> None:
        self._deviations.push(max(bad, 0.0))
        self._since += 1
        if self._since >= self.params.tail_refresh_points and (
                self._deviations.count >= self.min_points):
            self._since = 0
            recent = self._deviations.last(self._deviations.capacity)
            tail = quantile(recent, self.params.tail_quantile)
            self.factor = max(1.0, tail / self.reference)


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
    load_aware: bool = False  # judged against the values seen at a similar load


_SPREAD_NORMAL = 0.62  # the mean local MAD of 10 points of normal noise, in sigmas
_SPREAD_Q99 = 1.22     # and its 99% quantile


class RobustDetector:
    def __init__(self, params: AnomalyParams, direction: Direction = Direction.BOTH,
                 absolute_floor: float | None = None, load_aware: bool = False,
                 extreme_points: int = 1, neighbours: Neighbours | None = None) -> None:
        self.params = params
        self.direction = direction
        self.baseline = SeriesBaseline(params, absolute_floor)
        self.curve = (LoadCurve(params, self.baseline.absolute_floor, neighbours) if load_aware
                      else None)
        self.hysteresis = Hysteresis(params.for_points, params.clear_points, params.for_breaches,
                                     extreme_points)
        self.exclusion = Exclusion(params.relearn_points)
        self.tails = {kind: TailCalibration(params, direction)
                      for kind in ("trailing", "seasonal", "load")}
        self.spread = Hysteresis(params.for_points, params.clear_points, params.for_breaches)
        self.spread_tail = TailCalibration(params, direction, _SPREAD_Q99)
        self._recent: deque[tuple[float, float]] = deque(maxlen=params.spread_points)
        self._was_active = False
        self._kind = ""  # of the last expectation

    def plan(self, values: npt.NDArray[np.float64]) -> None:
        """A replay: ``values`` are the next points ``update`` will get
        (``SeriesBaseline.plan``)."""
        self.baseline.plan(values)

    def update(self, value: float, load: float = math.nan) -> Reading:
        """One point; ``load``: the offered load at it (used by a load-aware detector)."""
        p = self.params
        at_load = self.curve.expect(load) if self.curve is not None else None
        expectation = at_load or self.baseline.expect()

        def learn(accepted: bool = True) -> None:
            self.baseline.push(value, accepted)
            if self.curve is not None:
                self.curve.push(load, value, accepted)

        if expectation is None or math.isnan(value):
            learn()
            return Reading(value, expectation.expected if expectation else math.nan, math.nan,
                           0.0, self._was_active, False)
        z = (value - expectation.expected) / expectation.scale
        bad = self._bad(z)
        kind = ("load" if at_load is not None
                else "seasonal" if expectation.seasonal else "trailing")
        tail = self.tails[kind]
        tail.push(bad)
        if kind != self._kind:  # z-scores against another expectation: a new spread window
            self._recent.clear()
            self._kind = kind
        f = tail.factor
        z_alert, z_clear, z_extreme = f * p.z_alert, f * p.z_clear, f * p.z_extreme
        self.hysteresis.update(bad >= z_alert, bad < z_clear, bad >= z_extreme)
        spread = self._spread(z, value, expectation.expected)
        anomalous = (bad >= z_extreme or (self.hysteresis.active and bad >= z_clear)
                     or self.spread.active)
        learn(self.exclusion.accept(anomalous))
        active = self.hysteresis.active or self.spread.active
        started, self._was_active = active and not self._was_active, active
        level = Level.WARNING if active else None
        score = squash(bad, z_alert)
        if self.spread.active:  # a wide spread ranks only once it is an anomaly: bursty
            # series have many wide windows, which would outrank the real deviations
            spread_alert = self.spread_tail.factor * p.spread_alert
            score = max(score, squash(spread - _SPREAD_NORMAL, spread_alert - _SPREAD_NORMAL))
        return Reading(value, expectation.expected, z, score, active, started, level,
                       load_aware=at_load is not None)

    def _spread(self, z: float, value: float, expected: float) -> float:
        """The local MAD of the last ``spread_points`` z-scores (NaN until that many), for a
        level above the expected one scaled down by their ratio, judged."""
        p = self.params
        self._recent.append((z, value))
        if len(self._recent) < p.spread_points:
            return math.nan
        recent = self._recent
        level = abs(sorted_median(sorted([v for _, v in recent])))
        center = sorted_median(sorted([z for z, _ in recent]))
        spread = sorted_median(sorted([abs(z - center) for z, _ in recent]))
        if level > abs(expected):
            spread *= abs(expected) / level
        self.spread_tail.push(spread)
        f = self.spread_tail.factor
        self.spread.update(spread >= f * p.spread_alert, spread < f * p.spread_clear)
        return spread

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
        self.baseline = SeriesBaseline(params, quantile_points=params.efficiency_trailing_points)
        self.efficiency = SeriesBaseline(params, trailing_points=params.efficiency_trailing_points)
        self.warning = Hysteresis(params.for_points, params.clear_points)
        self.critical = Hysteresis(params.for_points, params.clear_points)
        self.exclusion = Exclusion(params.relearn_points)

    def plan(self, values: npt.NDArray[np.float64], loads: npt.NDArray[np.float64]) -> None:
        """A replay: the next points ``update`` will get, with their loads
        (``SeriesBaseline.plan``)."""
        values = np.asarray(values, dtype=np.float64)
        loads = np.asarray(loads, dtype=np.float64)
        has_load = np.isfinite(loads) & (loads > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_load = np.where(has_load, values / np.where(has_load, loads, 1.0), np.nan)
        self.baseline.plan(values)
        self.efficiency.plan(per_load)

    def update(self, value: float, load: float = math.nan) -> Reading:
        p = self.params
        self.baseline.predict()  # its expectation is needed only without a load
        has_load = math.isfinite(load) and load > 0
        per_request = self.efficiency.expect()
        per_load = value / load if has_load else math.nan

        def learn(accepted: bool = True) -> None:
            self.baseline.push(value, accepted)
            self.efficiency.push(per_load, accepted)

        if has_load and per_request is not None and per_request.expected > 0:
            expected = per_request.expected * load
            capacity = self.baseline.quantile(p.capacity_quantile, p.efficiency_trailing_points)
            if math.isfinite(capacity) and capacity > 0:
                expected = min(expected, capacity)
            scale = per_request.scale * load
        elif (own := self.baseline.current()) is not None and own.expected > 0:
            expected, scale = own.expected, own.scale
        else:
            learn()
            return Reading(value, math.nan, math.nan, 0.0, self.warning.active, False,
                           self._level())
        if math.isnan(value):
            learn()
            return Reading(value, expected, math.nan, 0.0, self.warning.active, False,
                           self._level())
        ratio = value / expected
        margin = p.ratio_clear_margin
        started = self.warning.update(ratio < p.ratio_warning, ratio >= p.ratio_warning + margin)
        self.critical.update(ratio < p.ratio_critical, ratio >= p.ratio_critical + margin)
        learn(self.exclusion.accept(self.warning.active
                                    and ratio < p.ratio_warning + margin))
        score = squash(1.0 - ratio, 1.0 - p.ratio_warning)
        return Reading(value, expected, (value - expected) / scale, score, self.warning.active,
                       started, self._level(), ratio)

    def _level(self) -> Level | None:
        if self.critical.active:
            return Level.CRITICAL
        return Level.WARNING if self.warning.active else None
