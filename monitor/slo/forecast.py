"""Where an SLO's error budget is heading: time to exhaustion, the budget left at the end of
the period, and a state a release gate can read.

- Time to exhaustion: the budget left, spent at the *current* burn rate (the shortest alert
  window's long window, as the alerts' annotations say).
- Budget at period end: at the *sustained* burn rate (the longest alert window: 3 days for a
  30-day SLO), so one bad hour does not swing it. A calendar period ends at its boundary:
  left - sustained x (time left / period). A rolling period never ends; its "end" is one period
  from now, when the window holds only events still to come: 1 - sustained.
- State: ``exhausted`` when nothing is left; ``at_risk`` when the budget would be gone before
  the period ends (at the current burn) or would end the period overspent (at the sustained
  one); ``healthy`` otherwise; ``unknown`` without events to judge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from monitor.slo.spec import Slo


class BudgetState(StrEnum):
    HEALTHY = "healthy"
    AT_RISK = "at_risk"
    EXHAUSTED = "exhausted"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Forecast:
    state: BudgetState
    time_to_exhaustion_seconds: float  # inf when not burning; 0 when exhausted; NaN unknown
    budget_at_period_end: float        # may be below 0 (overspent); NaN unknown
    period_end: float                  # Unix seconds
    sustained_burn_rate: float         # NaN without events in the longest alert window


def period_end(slo: Slo, now: float) -> float:
    """When the current period ends: the next calendar boundary, or one period from now."""
    if slo.window.duration_seconds is not None:
        return now + slo.window.duration_seconds
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if slo.window.calendar == "month":
        first = day.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        return following.timestamp()
    return (day - timedelta(days=day.weekday()) + timedelta(days=7)).timestamp()


def forecast(slo: Slo, now: float, remaining: float, current_burn: float,
             sustained_burn: float) -> Forecast:
    """The forecast from the budget left and the current and sustained burn rates."""
    end = period_end(slo, now)
    period = slo.window.nominal_seconds
    tte = time_to_exhaustion(remaining, current_burn, period)
    if math.isnan(remaining):
        return Forecast(BudgetState.UNKNOWN, tte, math.nan, end, sustained_burn)
    burn = 0.0 if math.isnan(sustained_burn) else sustained_burn
    if slo.window.is_rolling:
        at_end = 1.0 - burn
    else:
        at_end = remaining - burn * (end - now) / period
    if remaining <= 0:
        state = BudgetState.EXHAUSTED
    elif tte < end - now or at_end < 0:
        state = BudgetState.AT_RISK
    else:
        state = BudgetState.HEALTHY
    return Forecast(state, tte, at_end, end, sustained_burn)


def time_to_exhaustion(remaining: float, burn_rate: float, period_seconds: float) -> float:
    """Seconds until the budget left is gone at ``burn_rate`` (a budget per period)."""
    if math.isnan(remaining):
        return math.nan
    if remaining <= 0:
        return 0.0
    if math.isnan(burn_rate) or burn_rate <= 0:
        return math.inf
    return remaining * period_seconds / burn_rate
