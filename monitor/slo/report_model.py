"""The SLO report's data: frozen dataclasses whose ``to_dict()`` is the API's JSON body.

``monitor.slo.report`` computes them (and documents what each number means); the HTML page
(``monitor.slo.report_html``) draws them. Keys are the field names, in field order, so the
JSON shape changes only when these classes do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from monitor.slo.forecast import Forecast
from monitor.json_safe import json_safe


@dataclass(frozen=True, slots=True)
class SloSummary:
    name: str
    service: str
    description: str
    objective: float
    period: str                      # "30d" or "calendar month"
    budgeting: str                   # Occurrences | Timeslices | RatioTimeslices
    timeslice_seconds: float | None
    sli: str                         # one line: what a good event is
    event_unit: str                  # "events", or "timeslices" when slices are the events


@dataclass(frozen=True, slots=True)
class Totals:
    events: float
    good: float
    bad: float
    sli: float                       # good / events; NaN without events
    objective_met: bool | None       # None without events
    allowed_bad: float               # error budget x events
    budget_consumed: float           # bad / allowed_bad; NaN without events
    budget_remaining: float          # 1 - budget_consumed (below 0 when overspent)


@dataclass(frozen=True, slots=True)
class StepSeries:
    """Columns, one value per step; step k covers (end[k-1], end[k]]."""

    end: tuple[float, ...]
    good: tuple[float, ...]
    total: tuple[float, ...]
    sli: tuple[float, ...]           # NaN where the step had no events
    budget_remaining: tuple[float, ...]  # the burn-down; NaN before the first event


@dataclass(frozen=True, slots=True)
class WindowBurnSeries:
    window: str                      # "1h/5m"
    severity: str                    # page | ticket
    long_seconds: float
    short_seconds: float
    factor: float                    # the condition: both burn rates above this
    long: tuple[float, ...]          # burn rate over the long window ending at each step end
    short: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Interval:
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class BurnInterval:
    window: str
    severity: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class SloReport:
    slo: SloSummary
    start: float
    end: float
    step_seconds: float
    resolution_seconds: float        # the bins read; burn intervals are exact to one bin
    totals: Totals
    series: StepSeries
    burn_rates: tuple[WindowBurnSeries, ...]
    burn_intervals: tuple[BurnInterval, ...]
    no_data_intervals: tuple[Interval, ...]
    forecast: Forecast               # at the report's end, from its budget and burn rates
    # Why the SLI is only a bound (a latency threshold between a target's stored bucket
    # edges: monitor.slo.thresholds); empty when it is exact.
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The API's JSON body: NaN and infinities become None, tuples lists."""
        safe = json_safe(dataclasses.asdict(self))
        assert isinstance(safe, dict)
        return safe
