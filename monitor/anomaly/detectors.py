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

from monitor.anomaly import compiled
from monitor.anomaly.baseline import (Ring, SeriesBaseline, kernel_state, planned_predictions,
                                      quantile, restore_kernel_state, sorted_median)
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

    def kernel_state(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """The window and counters as ``monitor.anomaly.compiled`` keeps them."""
        recent = np.zeros(self.for_points, dtype=np.uint8)
        recent[:len(self._recent)] = list(self._recent)
        return recent, np.array([len(self._recent), self._clears, self._extremes,
                                 int(self.active)], dtype=np.int64)

    def restore_kernel_state(self, recent: npt.NDArray[np.uint8],
                             ints: npt.NDArray[np.int64]) -> None:
        n, self._clears, self._extremes, active = ints.tolist()
        self.active = bool(active)
        self._recent = deque((bool(b) for b in recent[:n].tolist()), maxlen=self.for_points)


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


@dataclass(frozen=True, slots=True)
class Replayed:
    """A detector's readings over a replayed stretch, as columns (``Reading`` k is
    ``reading(k)``); ``flags``: ``compiled``'s bits (1 active, 2 started, 4 warning,
    8 judged at the load, 16 critical)."""

    values: npt.NDArray[np.float64]
    expected: npt.NDArray[np.float64]
    z: npt.NDArray[np.float64]
    score: npt.NDArray[np.float64]
    flags: npt.NDArray[np.uint8]
    ratio: npt.NDArray[np.float64] | None = None

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        return (self.flags & 1).astype(bool)

    def reading(self, k: int) -> Reading:
        f = int(self.flags[k])
        level = Level.CRITICAL if f & 16 else Level.WARNING if f & 4 else None
        return Reading(float(self.values[k]), float(self.expected[k]), float(self.z[k]),
                       float(self.score[k]), bool(f & 1), bool(f & 2), level,
                       math.nan if self.ratio is None else float(self.ratio[k]),
                       bool(f & 8))


_KINDS = ("trailing", "seasonal", "load")  # of expectation; their order is compiled's codes
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
        self.tails = {kind: TailCalibration(params, direction) for kind in _KINDS}
        self.spread = Hysteresis(params.for_points, params.clear_points, params.for_breaches)
        self.spread_tail = TailCalibration(params, direction, _SPREAD_Q99)
        # The spread windows, one per kind of expectation: z-scores against one kind are
        # comparable with each other, not with another kind's (a load-aware detector may
        # switch between its load curve and its time baseline every few steps).
        self._recent: dict[str, deque[tuple[float, float]]] = {
            kind: deque(maxlen=params.spread_points) for kind in _KINDS}
        self._was_active = False

    def replay(self, values: npt.NDArray[np.float64],
               loads: npt.NDArray[np.float64] | None = None) -> Replayed:
        """``update`` for every point (with its load), compiled: the same readings, and this
        detector left in the same state (``monitor.anomaly.compiled``)."""
        p = self.params
        values = np.ascontiguousarray(values, dtype=np.float64)
        if not compiled.AVAILABLE:
            return _stepwise(self, values, loads)
        t = len(values)
        log_loads = np.full(t, math.nan)
        if loads is not None and self.curve is not None:
            log_loads = np.array([math.log(x) if math.isfinite(x) and x > 0 else math.nan
                                  for x in np.asarray(loads, dtype=np.float64).tolist()])
        predictions = planned_predictions(self.baseline, values)
        sb, sb_ints = kernel_state(self.baseline)
        curve = self.curve
        if curve is not None:
            rings = (curve._log_loads._data, curve._values._data)
            curve_ints = np.array([curve._log_loads.count, curve._values.count], np.int64)
        else:
            rings = (np.full(2, math.nan), np.full(2, math.nan))
            curve_ints = np.zeros(2, np.int64)
        level_recent, level_ints = self.hysteresis.kernel_state()
        spread_recent, spread_ints = self.spread.kernel_state()
        tails = [self.tails["trailing"], self.tails["seasonal"], self.tails["load"],
                 self.spread_tail]
        tail_ints = np.array([x for tail in tails for x in (tail._deviations.count,
                                                           tail._since)], np.int64)
        factors = np.array([tail.factor for tail in tails])
        spread_z = np.zeros((len(_KINDS), p.spread_points))
        spread_v = np.zeros((len(_KINDS), p.spread_points))
        for k, kind in enumerate(_KINDS):
            for i, (recent_z, recent_value) in enumerate(self._recent[kind]):
                spread_z[k, i], spread_v[k, i] = recent_z, recent_value
        state = np.array([*(len(self._recent[kind]) for kind in _KINDS), int(self._was_active),
                          self.exclusion.run], np.int64)
        tail = tails[0]
        fp = (p.z_alert, p.z_clear, p.z_extreme, p.spread_alert, p.spread_clear,
              p.relative_scale_floor, self.baseline.absolute_floor, p.tail_quantile,
              curve._band if curve is not None else 0.0, tail.reference,
              self.spread_tail.reference)
        ip = (compiled.DIRECTIONS[self.direction], p.min_points, p.min_seasonal_points,
              p.trend_points, p.for_points, p.for_breaches, p.clear_points,
              self.hysteresis.extreme_points, p.relearn_points, p.spread_points,
              p.tail_refresh_points, tail.min_points, p.load_curve_points,
              p.load_min_neighbours, int(curve is not None))
        expected, z, score = np.empty(t), np.empty(t), np.empty(t)
        flags = np.zeros(t, np.uint8)
        compiled.robust_replay(values, log_loads, predictions, sb, sb_ints, rings, curve_ints,
                               (level_recent, spread_recent), (level_ints, spread_ints),
                               tuple(x._deviations._data for x in tails), tail_ints, factors,
                               spread_z, spread_v, state, fp, ip, expected, z, score, flags)
        restore_kernel_state(self.baseline, sb, sb_ints)
        if curve is not None:
            curve._log_loads.count, curve._values.count = curve_ints.tolist()
        self.hysteresis.restore_kernel_state(level_recent, level_ints)
        self.spread.restore_kernel_state(spread_recent, spread_ints)
        counts = tail_ints.tolist()
        for i, x in enumerate(tails):
            x._deviations.count, x._since, x.factor = counts[2 * i], counts[2 * i + 1], float(
                factors[i])
        *lengths, was_active, run = state.tolist()
        for k, (kind, n) in enumerate(zip(_KINDS, lengths)):
            self._recent[kind] = deque(zip(spread_z[k, :n].tolist(), spread_v[k, :n].tolist()),
                                       maxlen=p.spread_points)
        self._was_active = bool(was_active)
        self.exclusion.run = run
        return Replayed(values, expected, z, score, flags)

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
        f = tail.factor
        z_alert, z_clear, z_extreme = f * p.z_alert, f * p.z_clear, f * p.z_extreme
        self.hysteresis.update(bad >= z_alert, bad < z_clear, bad >= z_extreme)
        spread = self._spread(z, value, expectation.expected, kind)
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

    def _spread(self, z: float, value: float, expected: float, kind: str) -> float:
        """The local MAD of the last ``spread_points`` z-scores against this ``kind`` of
        expectation (NaN until that many), for a level above the expected one scaled down by
        their ratio, judged."""
        p = self.params
        recent = self._recent[kind]
        recent.append((z, value))
        if len(recent) < p.spread_points:
            return math.nan
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

    def replay(self, values: npt.NDArray[np.float64], loads: npt.NDArray[np.float64]
               ) -> Replayed:
        """``update`` for every point with its load, compiled: the same readings, and this
        detector left in the same state (``monitor.anomaly.compiled``)."""
        p = self.params
        values = np.ascontiguousarray(values, dtype=np.float64)
        loads = np.ascontiguousarray(loads, dtype=np.float64)
        if not compiled.AVAILABLE:
            return _stepwise(self, values, loads)
        t = len(values)
        has_load = np.isfinite(loads) & (loads > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_load = np.where(has_load, values / np.where(has_load, loads, 1.0), np.nan)
        predictions = planned_predictions(self.baseline, values)
        efficiency_predictions = planned_predictions(self.efficiency, per_load)
        sb, sb_ints = kernel_state(self.baseline)
        eff, eff_ints = kernel_state(self.efficiency)
        warning_recent, warning_ints = self.warning.kernel_state()
        critical_recent, critical_ints = self.critical.kernel_state()
        state = np.array([self.exclusion.run], np.int64)
        fp = (p.relative_scale_floor, self.baseline.absolute_floor, p.capacity_quantile,
              p.ratio_warning, p.ratio_critical, p.ratio_clear_margin)
        ip = (p.min_points, p.min_seasonal_points, p.trend_points, p.for_points,
              p.clear_points, p.relearn_points, self.baseline._quantile_points)
        expected, z, score, ratio = np.empty(t), np.empty(t), np.empty(t), np.empty(t)
        flags = np.zeros(t, np.uint8)
        compiled.ratio_replay(values, loads, predictions, efficiency_predictions, sb, sb_ints,
                              eff, eff_ints, (warning_recent, critical_recent),
                              (warning_ints, critical_ints), state, fp, ip, expected, z, score,
                              ratio, flags)
        restore_kernel_state(self.baseline, sb, sb_ints)
        restore_kernel_state(self.efficiency, eff, eff_ints)
        self.warning.restore_kernel_state(warning_recent, warning_ints)
        self.critical.restore_kernel_state(critical_recent, critical_ints)
        self.exclusion.run = int(state[0])
        return Replayed(values, expected, z, score, flags, ratio)

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


def _stepwise(detector: RobustDetector | RatioDetector, values: npt.NDArray[np.float64],
              loads: npt.NDArray[np.float64] | None) -> Replayed:
    """``replay`` without numba: ``update`` point by point, into the same columns."""
    t = len(values)
    expected, z, score, ratio = np.empty(t), np.empty(t), np.empty(t), np.empty(t)
    flags = np.zeros(t, np.uint8)
    load_list = [math.nan] * t if loads is None else np.asarray(loads, np.float64).tolist()
    for k, (value, load) in enumerate(zip(values.tolist(), load_list)):
        r = detector.update(value, load)
        expected[k], z[k], score[k], ratio[k] = r.expected, r.z, r.score, r.ratio
        flags[k] = (r.active | r.started << 1 | (r.level is Level.WARNING) << 2
                    | r.load_aware << 3 | (r.level is Level.CRITICAL) << 4)
    return Replayed(values, expected, z, score, flags,
                    ratio if isinstance(detector, RatioDetector) else None)
