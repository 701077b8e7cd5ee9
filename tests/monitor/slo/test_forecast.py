"""The budget's outlook, worked out by hand: time to exhaustion at the current burn, the
budget left at the period's end at the sustained burn, and the state a release gate reads."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.forecast import BudgetState, forecast, period_end
from monitor.slo.report import build_report
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo

DAY = 86400.0
JAN_16 = datetime(2026, 1, 16, tzinfo=UTC).timestamp()


def slo(window: object = "30d") -> Slo:
    return Slo.model_validate({"name": "a", "objective": 0.999, "window": window,
                               "sli": {"kind": "availability"}})


def test_a_calendar_month_ends_at_the_next_first_of_the_month() -> None:
    assert period_end(slo({"calendar": "month"}), JAN_16) == \
        datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    assert period_end(slo({"calendar": "week"}), JAN_16) == \
        datetime(2026, 1, 19, tzinfo=UTC).timestamp()  # the 16th is a Friday
    assert period_end(slo("7d"), JAN_16) == JAN_16 + 7 * DAY


def test_calendar_budget_at_period_end_spends_the_sustained_burn_over_the_time_left() -> None:
    # Half the budget left, 16 days to go, sustained 1x: 0.5 - 1 x 16/30 = -0.0333.
    f = forecast(slo({"calendar": "month"}), JAN_16, 0.5, 0.9, 1.0)
    assert f.budget_at_period_end == pytest.approx(0.5 - 16 / 30)
    assert f.state is BudgetState.AT_RISK
    # At 0.9x it lasts: 0.5 x 30 d / 0.9 = 16.7 days > 16 days; 0.5 - 0.9 x 16/30 = 0.02.
    f = forecast(slo({"calendar": "month"}), JAN_16, 0.5, 0.9, 0.9)
    assert f.time_to_exhaustion_seconds == pytest.approx(0.5 * 30 * DAY / 0.9)
    assert f.budget_at_period_end == pytest.approx(0.02)
    assert f.state is BudgetState.HEALTHY


def test_rolling_states() -> None:
    spec = slo("30d")
    healthy = forecast(spec, JAN_16, 0.8, 0.5, 0.5)    # lasts 48 days; ends the period at 50%
    assert (healthy.state, healthy.budget_at_period_end) == (BudgetState.HEALTHY, 0.5)
    burning = forecast(spec, JAN_16, 0.9, 14.4, 0.5)   # a page's rate: gone in 1.875 days
    assert burning.time_to_exhaustion_seconds == pytest.approx(0.9 * 30 * DAY / 14.4)
    assert burning.state is BudgetState.AT_RISK
    overspending = forecast(spec, JAN_16, 0.9, 0.0, 1.2)  # quiet now, 1.2x over 3 days
    assert overspending.budget_at_period_end == pytest.approx(-0.2)
    assert overspending.state is BudgetState.AT_RISK
    assert forecast(spec, JAN_16, -0.1, 0.0, 0.0).state is BudgetState.EXHAUSTED
    unknown = forecast(spec, JAN_16, math.nan, math.nan, math.nan)
    assert unknown.state is BudgetState.UNKNOWN and math.isnan(unknown.budget_at_period_end)


def steady(minutes: int, bad_from: int) -> MinuteArraySource:
    total = np.full(minutes, 100.0)
    good = total.copy()
    good[bad_from:] = 99.8  # 0.2% bad: 2x the 0.1% budget
    return MinuteArraySource(0, {"a": (good, total, np.ones(minutes, dtype=bool))})


def test_the_evaluator_and_the_report_give_the_same_outlook() -> None:
    """Ten days clean, then two days at 2x: 2 x 2/30 = 13.3% spent, the 3-day window burns
    at 2 x 2/3 = 1.33x, so a period at that rate would overspend: at risk."""
    minutes = 12 * 1440
    source = steady(minutes, 10 * 1440)
    now = minutes * 60.0
    status = SloEvaluator([slo()], source, settle_seconds=0).tick(now)[0]
    assert status.forecast is not None
    assert status.budget_remaining == pytest.approx(1 - 2 * 2 / 12)  # 12 days of the 30
    assert status.forecast.sustained_burn_rate == pytest.approx(2 * 2 / 3)
    assert status.forecast.budget_at_period_end == pytest.approx(1 - 4 / 3)
    assert status.forecast.state is BudgetState.AT_RISK
    report = build_report(slo(), source, 0.0, now, now=now)
    assert report.forecast.state is BudgetState.AT_RISK
    assert report.forecast.sustained_burn_rate == pytest.approx(4 / 3)
    assert report.to_dict()["forecast"]["state"] == "at_risk"
