"""All detectors of one target, fed one feature row per step, giving its anomaly state.

Fresh state per series: every feature has its own baseline and hysteresis; nothing is
shared between targets.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.anomaly.detectors import Level, RatioDetector, Reading, Replayed, RobustDetector
from monitor.anomaly.diagnosis import Diagnosis, diagnose
from monitor.anomaly.load_curve import Neighbours
from monitor.anomaly.features import OFFERED_LOAD, SCORED, THROUGHPUT, VECTOR, Feature, vector
from monitor.anomaly.multivariate import IDLE as _IDLE, MultivariateDetector
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
        ``live_last`` False). The detectors run compiled over the stretch
        (``monitor.anomaly.compiled``); the states are built from their columns as they are
        iterated. ``catch_up`` gives only the last, without building the others."""
        history = rows[:-1] if live_last and rows else rows
        columns = self._replay_columns(history)
        for k, (t, row) in enumerate(history):
            readings = {name: c.reading(k) for name, c in columns.items()}
            readings[MULTIVARIATE] = _IDLE
            yield self._state(t, row, readings)
        if live_last and rows:
            yield self.update(*rows[-1])

    def catch_up(self, rows: Sequence[tuple[float, Mapping[str, float]]]
                 ) -> TargetState | None:
        """``replay``'s last state (None without rows), the others not built: what a restart
        needs to resume a target."""
        if not rows:
            return None
        history = rows[:-1]
        columns = self._replay_columns(history)
        if history:  # the anomaly in progress at the end of the history, if any
            masks = {name: c.active for name, c in columns.items()}
            active = np.zeros(len(history), dtype=bool)
            for mask in masks.values():
                active |= mask
            quiet = np.flatnonzero(~active)
            first = 0  # all active: the anomaly goes on from before the history
            if len(quiet):  # a quiet step ends any anomaly: it starts afresh after the last
                first = int(quiet[-1]) + 1
                self._was_active, self._diagnosis, self._steps_active = False, None, 0
            for k in range(first, len(history)):
                readings = {name: c.reading(k) for name, c in columns.items()
                            if masks[name][k]}
                self._state(history[k][0], history[k][1], readings)
        return self.update(*rows[-1])

    def _replay_columns(self, rows: Sequence[tuple[float, Mapping[str, float]]]
                        ) -> dict[str, Replayed]:
        """Every detector over ``rows`` (as ``update(warm_up=True)`` row by row), compiled;
        the multivariate detector collects its training vectors."""
        def column(name: str) -> npt.NDArray[np.float64]:
            return np.array([row.get(name, math.nan) for _, row in rows], dtype=np.float64)

        if not rows:
            return {}
        load = column(OFFERED_LOAD)
        # The detectors are independent and their kernels release the GIL: one per core.
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            jobs = {THROUGHPUT: pool.submit(self.throughput.replay, column(THROUGHPUT), load)}
            for name, detector in self.scored.items():
                jobs[name] = pool.submit(detector.replay, column(name), load)
            columns = {name: job.result() for name, job in jobs.items()}
        flagged = np.zeros(len(rows), dtype=bool)
        for c in columns.values():
            flagged |= c.active
        self.multivariate.collect(
            np.array([vector(dict(row)) for _, row in rows], dtype=np.float64), flagged)
        self.last_time = rows[-1][0]
        return columns

    def _state(self, time: float, row: Mapping[str, float], readings: dict[str, Reading]
               ) -> TargetState:
        """The target's state from its detectors' readings of one step (the anomaly's start,
        level and diagnosis carried from step to step)."""
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
        return self._state(time, row, readings)


_WORKERS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_WEAK = frozenset({"unclassified", "unusual_combination"})
