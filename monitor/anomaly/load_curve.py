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
from typing import Final

import numpy as np
import numpy.typing as npt

from monitor.anomaly.baseline import MAD_TO_SIGMA, Expectation, Ring, sorted_median
from monitor.anomaly.params import AnomalyParams


class Neighbours:
    """The nearest-load searches of one step of one target, shared by its load-aware
    detectors: they read the same offered load, and while they have learned the same points
    (no gap or exclusion that one has and another has not) their load histories are equal,
    so the search is done once. Cleared every step; a history is matched by its exact bytes,
    so sharing never changes a result."""

    def __init__(self) -> None:
        self._found: list[tuple[float, bytes, Pick]] = []

    def clear(self) -> None:
        self._found.clear()

    def get(self, load: float, history: bytes) -> Pick | Missing:
        for seen_load, seen_history, pick in self._found:
            if seen_load == load and seen_history == history:
                return pick
        return MISSING

    def put(self, load: float, history: bytes, pick: Pick) -> None:
        self._found.append((load, history, pick))


class Missing:
    pass


MISSING: Final = Missing()
# Which of the last points are the nearest: a mask or indices; None: too few near
Pick = npt.NDArray[np.bool_] | None


class LoadCurve:
    def __init__(self, params: AnomalyParams, absolute_floor: float,
                 neighbours: Neighbours | None = None) -> None:
        self.params = params
        self.absolute_floor = absolute_floor
        self._log_loads = Ring(params.load_curve_points)  # log, so a distance is a subtraction
        self._values = Ring(params.load_curve_points)
        self._band = math.log1p(params.load_band)
        self._neighbours = neighbours

    def expect(self, load: float) -> Expectation | None:
        """The expectation at ``load``; None without enough points seen at a similar load."""
        if not (math.isfinite(load) and load > 0):
            return None
        n = min(self._log_loads.count, self.params.load_curve_points)
        log_loads = self._log_loads.last(n)
        shared = self._neighbours
        if shared is None:
            pick = self._nearest(log_loads, load)
        else:
            history = log_loads.tobytes()
            found = shared.get(load, history)
            if isinstance(found, Missing):
                pick = self._nearest(log_loads, load)
                shared.put(load, history, pick)
            else:
                pick = found
        if pick is None:
            return None
        seen = self._values.last(n)[pick]
        level = sorted_median(sorted(seen.tolist()))
        mad = sorted_median(sorted([abs(v - level) for v in seen.tolist()]))
        scale = max(MAD_TO_SIGMA * mad, self.params.relative_scale_floor * abs(level),
                    self.absolute_floor)
        return Expectation(level, scale, False)

    def _nearest(self, log_loads: npt.NDArray[np.float64], load: float) -> Pick:
        """The ``load_min_neighbours`` nearest within the band (None: fewer in it)."""
        distance = np.abs(log_loads - math.log(load))
        near = distance <= self._band
        k = self.params.load_min_neighbours
        count = np.count_nonzero(near)
        if count < k:
            return None
        if count == k:  # the k nearest are those in the band
            return near
        # The k nearest; where several sit at the k-th distance (a load repeated exactly),
        # the most recent of them, so the pick never depends on how a selection orders ties
        # (the compiled replay, ``monitor.anomaly.compiled``, picks the same).
        distance[~near] = np.inf
        kth = np.partition(distance, k - 1)[k - 1]
        pick: npt.NDArray[np.bool_] = distance < kth
        tied = np.flatnonzero(distance == kth)
        pick[tied[len(tied) - (k - np.count_nonzero(pick)):]] = True
        return pick

    def push(self, load: float, value: float, accepted: bool = True) -> None:
        """Learn the point (not an anomalous one, nor one without a load or a value)."""
        if accepted and math.isfinite(load) and load > 0 and not math.isnan(value):
            self._log_loads.push(math.log(load))
            self._values.push(value)
