"""Where an SLO's history begins inside a range: the span its charts draw (issue 30).

A chart over a whole period at the period's default step (3 hours for 30 days) holds one point
for a young SLO's first hours: "no data in the range" beside thousands of events. The SLO page
draws the span from the first minute with events (no earlier than the period's start) to now
instead, at the report's default step for that span (``monitor.slo.report``: whole minutes at
least, the store's resolution and the evaluator's, up to ~300 points), and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from monitor.slo.steps import SliSource, read_arrays
from monitor.slo.spec import Slo

__all__ = ["ChartSpan", "chart_span", "first_event_at"]

MINUTE: Final = 60.0
HOUR: Final = 3600.0


@dataclass(frozen=True, slots=True)
class ChartSpan:
    start: float          # the first minute with events, or the period's start
    end: float
    period_start: float

    @property
    def partial(self) -> bool:
        """The span begins after the period does: the history is younger than the period."""
        return self.start > self.period_start + MINUTE

    @property
    def seconds(self) -> float:
        return self.end - self.start


def first_event_at(slo: Slo, source: SliSource, start: float, end: float) -> float | None:
    """The start of the first minute in (start, end] with events, never before ``start``;
    None without any. Two small reads: hours over the range, then the minutes of the first
    hour with events."""
    hour_start = math.floor(start / HOUR) * HOUR
    if end <= start:
        return None
    hours = read_arrays(source, slo, hour_start, end, HOUR)
    found = np.flatnonzero(hours.total > 0)
    if not len(found):
        return None
    k = int(found[0])
    lo = float(hours.end[k - 1]) if k else hour_start
    minutes = read_arrays(source, slo, lo, float(hours.end[k]), MINUTE)
    inside = np.flatnonzero(minutes.total > 0)
    first = float(minutes.end[int(inside[0])]) - MINUTE if len(inside) else lo
    return max(first, math.floor(start / MINUTE) * MINUTE)


def chart_span(slo: Slo, source: SliSource, search_from: float, end: float,
               period_start: float | None = None) -> ChartSpan | None:
    """What the SLO's charts draw: from its first event after ``search_from`` (the period's
    start, unless said apart: where its history is known to begin) to ``end``; None when
    there are no events yet."""
    first = first_event_at(slo, source, search_from, end)
    period_start = search_from if period_start is None else period_start
    return None if first is None else ChartSpan(first, end, period_start)
