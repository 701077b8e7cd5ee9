"""All detectors of one target, fed one feature row per step, giving its anomaly state.

Fresh state per series: every feature has its own baseline and hysteresis; nothing is
shared between targets.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.anomaly.detectors import Level, RatioDetector, Reading, RobustDetector
from monitor.anomaly.diagnosis import Diagnosis, diagnose
from monitor.anomaly.load_curve import Neighbours
from monitor.anomaly.features import OFFERED_LOAD, SCORED, THROUGHPUT, VECTOR, Feature, vector
from monitor.anomaly.multivariate import MultivariateDetector
from monitor.anomaly.params import AnomalyParams

MULTIVARIATE = "multivariate"


@dataclass(frozen=True, slots=True)
class TargetState:
    target: str
    time: float
    readings: dict[str, Reading]            # every detector's reading this step
    level: Level | None                     # None: nothing anomalous
    diagnosis: Diagnosis | None = None
    started: bool = False                   # an anomaly starts on this step
    values: dict[str, float] = field(default_factory=dict)

    @property
    def active(self) -> dict[str, Reading]:
        return {name: r for name, r in self.readings.items() if r.active}

    @property
    def score(self) -> float:
        return max((r.score for r in self.readings.values()), default=0.0)


class TargetDetector:
    def __init__(self, target: str, params: AnomalyParams,
                 features: tuple[Feature, ...] = SCORED) -> None:
        self.target = target
        self.params = params
        self.throughput = RatioDetector(params)
        self._neighbours = Neighbours()  # the step's nearest-load searches, shared
        self.scored = {f.name: RobustDetector(params, f.direction, f.absolute_floor,
                                              f.load_aware, f.extreme_points, self._neighbours)
                       for f in features}
        self.multivariate = MultivariateDetector(params, VECTOR)
        self._was_active = False
        self._diagnosis: Diagnosis | None = None  # of the current anomaly
        self._steps_active = 0
        self.last_time = -math.inf

    def replay(self, rows: Sequence[tuple[float, Mapping[str, float]]], live_last: bool = True
               ) -> Iterator[TargetState]:
        """A stretch of history at once (a restart's replay): the states ``update`` gives row
        by row, equal to them, with ``warm_up`` on every row but the last (on every row:
        ``live_last`` False). What is a function of the values alone (the seasonal
        predictions) is computed for the whole stretch first, vectorised."""
        self.plan([row for _, row in rows])
        last = len(rows) - 1
        for k, (t, row) in enumerate(rows):
            yield self.update(t, row, warm_up=not (live_last and k == last))

    def plan(self, rows: Sequence[Mapping[str, float]]) -> None:
        """The next rows ``update`` will get, in order: their seasonal predictions, at once."""
        def column(name: str) -> npt.NDArray[np.float64]:
            return np.array([row.get(name, math.nan) for row in rows], dtype=np.float64)

        self.throughput.plan(column(THROUGHPUT), column(OFFERED_LOAD))
        for name, detector in self.scored.items():
            detector.plan(column(name))

    def update(self, time: float, row: Mapping[str, float], warm_up: bool = False
               ) -> TargetState:
        """One step. ``warm_up``: replaying history, the forest only collects its training
        data (it is fitted once, on the first live step, instead of every refit interval)."""
        self._neighbours.clear()
        readings = {THROUGHPUT: self.throughput.update(row.get(THROUGHPUT, math.nan),
                                                       row.get(OFFERED_LOAD, math.nan))}
        load = row.get(OFFERED_LOAD, math.nan)
        for name, detector in self.scored.items():
            readings[name] = detector.update(row.get(name, math.nan), load)
        flagged = any(r.active for r in readings.values())
        readings[MULTIVARIATE] = self.multivariate.update(vector(dict(row)), flagged,
                                                          score=not warm_up)
        self.last_time = time
        active = {name: r for name, r in readings.items() if r.active}
        if not active:
            self._was_active, self._diagnosis, self._steps_active = False, None, 0
            return TargetState(self.target, time, readings, None, values=dict(row))
        level = (Level.CRITICAL if any(r.level is Level.CRITICAL for r in active.values())
                 else Level.WARNING)
        started = not self._was_active
        self._was_active = True
        self._steps_active += 1
        # Settled over the anomaly's first steps (the signals of one cause arrive within a few
        # steps of each other), then kept: later signals are more often its consequences.
        settling = self._steps_active <= self.params.for_points
        if settling or self._diagnosis is None or self._diagnosis.limit in _WEAK:
            self._diagnosis = diagnose(active, row)
        return TargetState(self.target, time, readings, level, self._diagnosis, started,
                           dict(row))


_WEAK = frozenset({"unclassified", "unusual_combination"})
