"""One univariate series scored as a stream: what `inferwatch anomaly score` and the
evaluation run on any labelled ``timestamp,value`` series.

The series gets the robust detector (seasonal or trailing baseline, both directions unless
told) and the baseline-ratio detector (a drop below 70% of the baseline), with the same
parameters as the monitor's. Its score is the larger of the two; an alert is active while
either is, and ``started`` marks the point where it starts.

Given the load offered with each point (for a throughput: requests/s), both judge the value
per unit of load, so a traffic surge or a quiet night is not an anomaly; give it only for
series that scale with the load.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from monitor.anomaly.detectors import Direction, RatioDetector, RobustDetector
from monitor.anomaly.params import AnomalyParams


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
        ratio = self.ratio.update(value, load) if self.ratio is not None else None
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
