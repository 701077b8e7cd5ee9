"""What a load-dependent metric should read at the load offered now, learned from the
target's own history.

Latency, queue depth and KV-cache usage rise with load; a trailing baseline learned at a
quiet hour then reads the next busy hour as an anomaly, and one learned across a busy day
misses a slowdown at a quiet one. The load curve conditions on the load instead: the
expectation at load L is the median (spread: the MAD) of the values this target had at
offered loads nearest L: the ``load_min_neighbours`` nearest within ``load_band`` of L, over
its last ``load_curve_points`` accepted points (the nearest, not all in the band, because
latency climbs steeply near saturation: a band's median would blur a 1.5x slowdown).
So latency rising with load the target has already served is normal, and latency rising at a
load the target has served faster is an anomaly. At a load the target has not been seen at
(fewer than ``load_min_neighbours`` such points) there is no curve to read: the detector
falls back to its time baseline, and says so (``Reading.load_aware`` False).
"""

from __future__ import annotations

import math

import numpy as np

from monitor.anomaly.baseline import MAD_TO_SIGMA, Expectation, Ring, sorted_median
from monitor.anomaly.params import AnomalyParams


class LoadCurve:
    def __init__(self, params: AnomalyParams, absolute_floor: float) -> None:
        self.params = params
        self.absolute_floor = absolute_floor
        self._log_loads = Ring(params.load_curve_points)  # log, so a distance is a subtraction
        self._values = Ring(params.load_curve_points)
        self._band = math.log1p(params.load_band)

    def expect(self, load: float) -> Expectation | None:
        """The expectation at ``load``; None without enough points seen at a similar load."""
        if not (math.isfinite(load) and load > 0):
            return None
        n = min(self._log_loads.count, self.params.load_curve_points)
        distance = np.abs(self._log_loads.last(n) - math.log(load))
        near = distance <= self._band
        k = self.params.load_min_neighbours
        count = np.count_nonzero(near)
        if count < k:
            return None
        values = self._values.last(n)
        if count == k:  # the k nearest are those in the band (their order does not matter)
            seen = values[near]
        else:
            distance[~near] = np.inf
            seen = values[np.argpartition(distance, k - 1)[:k]]
        # k is small: Python's sort beats numpy's per-call cost (the same medians)
        level = sorted_median(sorted(seen.tolist()))
        mad = sorted_median(sorted([abs(v - level) for v in seen.tolist()]))
        scale = max(MAD_TO_SIGMA * mad, self.params.relative_scale_floor * abs(level),
                    self.absolute_floor)
        return Expectation(level, scale, False)

    def push(self, load: float, value: float, accepted: bool = True) -> None:
        """Learn the point (not an anomalous one, nor one without a load or a value)."""
        if accepted and math.isfinite(load) and load > 0 and not math.isnan(value):
            self._log_loads.push(math.log(load))
            self._values.push(value)
