"""One univariate series scored as a stream.

``score_timeline`` is what `inferwatch anomaly score` runs: the calibrated detector
(``monitor.anomaly.calibrated``: thresholds set per series for a false-alert budget), over a
file's timeline. ``SeriesScorer`` is the monitor's own detectors on one series, with an
offered load where there is one (``bench.anomaly_eval`` evaluates them this way):

The series gets the robust detector (seasonal or trailing baseline, both directions unless
told), with the same parameters as the monitor's. Given the load offered with each point (for
a throughput: requests/s), the value is judged per unit of load, so a traffic surge or a
quiet night is not an anomaly, and the baseline-ratio detector (a drop below 70% of the
load-adjusted baseline) joins it; give a load only for series that scale with it. Without a
load the ratio rule is not applied: on its own trailing baseline it reads every daily trough
of a cyclic series as a drop (NAB's traffic series: a false alert a day in the first week),
and the robust detector already judges drops against the seasonal baseline. The score is the
larger of the two; an alert is active while either is, and ``started`` marks its start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.anomaly.calibrated import CalibratedDetector, CalibratedParams
from monitor.anomaly.detectors import Direction, RatioDetector, RobustDetector
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.timeline import Timeline
from monitor.progress import ProgressBar


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    timestamp: float
    value: float
    expected: float
    score: float
    active: bool
    started: bool


class SeriesScorer:
    def __init__(self, params: AnomalyParams, direction: Direction = Direction.BOTH) -> None:
        self.robust = RobustDetector(params, direction)
        self.ratio = RatioDetector(params) if direction is not Direction.UP else None
        self._active = False

    def update(self, timestamp: float, value: float, load: float = math.nan) -> ScoredPoint:
        per_load = math.isfinite(load) and load > 0
        robust = self.robust.update(value / load if per_load else value)
        expected = robust.expected * load if per_load else robust.expected
        ratio = (self.ratio.update(value, load) if self.ratio is not None and per_load
                 else None)
        active = robust.active or (ratio is not None and ratio.active)
        started = active and not self._active
        self._active = active
        score = max(robust.score, ratio.score if ratio is not None else 0.0)
        return ScoredPoint(timestamp, value, expected, score, active, started)


def score_series(points: Iterable[tuple[float, float]], params: AnomalyParams,
                 direction: Direction = Direction.BOTH) -> Iterator[ScoredPoint]:
    scorer = SeriesScorer(params, direction)
    for timestamp, value in points:
        yield scorer.update(timestamp, value)


@dataclass(frozen=True, slots=True)
class RowScores:
    """Per input row of a timeline: its step's score, and whether an alert starts on it (only
    on the first row, in input order, of the step where it starts)."""

    scores: npt.NDArray[np.float64]
    starts: npt.NDArray[np.bool_]


def score_timeline(line: Timeline, params: AnomalyParams,
                   direction: Direction = Direction.BOTH,
                   progress: ProgressBar | None = None,
                   calibration: CalibratedParams | None = None) -> RowScores:
    """Feed the timeline's steps in time order to the calibrated detector
    (``monitor.anomaly.calibrated``); the scores and alert starts of its rows."""
    detector = CalibratedDetector(params, direction, calibration,
                                  expected_points=len(line.values))
    replayed = detector.replay(line.values)  # equal to ``update`` point by point
    if progress is not None:
        progress.advance(len(line.values))
    scores = replayed.score
    active = replayed.active
    started = active & ~np.concatenate(([False], active[:-1]))
    rows = line.point_of_row
    first = line.first_row[rows] == np.arange(len(rows))
    return RowScores(scores[rows], started[rows] & first)
