"""What an SLO's budget is of (issue 30): the budget of the events seen, 1 - bad / (error
budget x events), over the history the store holds; a history younger than the period is said
(``partial_period``, ``observed_seconds``) and never stretched to a whole period's budget."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from monitor.api.convert import slo_out
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
FEB_1 = datetime(2026, 2, 1, tzinfo=UTC).timestamp()


def slo(window: object = "30d") -> Slo:
    return Slo.model_validate({"name": "a", "objective": 0.99, "window": window,
                               "sli": {"kind": "availability"}})


def history(start: float, num_minutes: int, answered_from: int,
            bad_share: float = 0.66) -> MinuteArraySource:
    """Minutes from ``start``: targets answer from minute ``answered_from`` on, with 100
    events a minute of which ``bad_share`` fail."""
    answered = np.arange(num_minutes) >= answered_from
    total = np.where(answered, 100.0, 0.0)
    return MinuteArraySource(start, {"a": (total * (1 - bad_share), total, answered)})


def test_ten_minutes_of_a_30_day_slo_give_the_budget_of_their_events() -> None:
    """66% of 1,000 events fail at a 1% budget: 1 - 0.66 / 0.01 = -65 of the budget of the
    events seen (the -6504% of the issue is this rule on a 33.956% SLI), and the status
    says it is ten minutes of a 30-day period."""
    start = FEB_1 - 2 * DAY
    source = history(start, 2 * 1440, answered_from=2 * 1440 - 10)
    status = SloEvaluator([slo()], source, settle_seconds=0).tick(FEB_1)[0]
    assert status.events == pytest.approx(1000)
    assert status.budget_remaining == pytest.approx(1 - 0.66 / 0.01)
    assert status.partial_period and status.observed_seconds == pytest.approx(10 * MINUTE)
    out = slo_out(slo(), status, [])
    assert (out.budget_basis, out.observed_seconds) == ("partial", pytest.approx(600))


def test_a_history_longer_than_the_period_is_the_periods_budget() -> None:
    start = FEB_1 - 3 * DAY
    source = history(start, 3 * 1440, answered_from=0, bad_share=0.005)
    status = SloEvaluator([slo("1d")], source, settle_seconds=0).tick(FEB_1)[0]
    assert not status.partial_period and status.observed_seconds == pytest.approx(DAY)
    assert status.budget_remaining == pytest.approx(0.5)  # half of 1% failed
    assert slo_out(slo("1d"), status, []).budget_basis == "period"


def test_a_calendar_month_begun_with_history_before_it_is_not_partial() -> None:
    """An hour into February with January stored: the period so far is the hour."""
    source = history(FEB_1 - 2 * DAY, 2 * 1440 + 60, answered_from=0)
    status = SloEvaluator([slo({"calendar": "month"})], source,
                          settle_seconds=0).tick(FEB_1 + HOUR)[0]
    assert not status.partial_period and status.observed_seconds == pytest.approx(HOUR)


def test_the_history_seen_is_read_from_the_store_and_grows_with_each_tick() -> None:
    """A monitor restarted over the store finds the same first minute; ticks then add to it."""
    start = FEB_1 - 2 * DAY
    source = history(start, 2 * 1440 + 30, answered_from=2 * 1440 - 20)
    evaluator = SloEvaluator([slo()], source, settle_seconds=0)
    assert evaluator.tick(FEB_1)[0].observed_seconds == pytest.approx(20 * MINUTE)
    assert evaluator.tick(FEB_1 + 10 * MINUTE)[0].observed_seconds == pytest.approx(30 * MINUTE)
    restarted = SloEvaluator([slo()], source, settle_seconds=0).tick(FEB_1 + 10 * MINUTE)[0]
    assert restarted.observed_seconds == pytest.approx(30 * MINUTE)


def test_no_answer_yet_has_no_basis() -> None:
    source = history(FEB_1 - DAY, 1440, answered_from=1440)
    status = SloEvaluator([slo()], source, settle_seconds=0).tick(FEB_1)[0]
    assert math.isnan(status.observed_seconds) and not status.partial_period
    out = slo_out(slo(), status, [])
    assert (out.budget_basis, out.observed_seconds, out.budget_remaining) == ("none", None, None)


def test_answers_without_events_are_history_seen_but_no_budget() -> None:
    source = history(FEB_1 - DAY, 1440, answered_from=1430, bad_share=0.0)
    quiet = MinuteArraySource(FEB_1 - DAY, {"a": (np.zeros(1440), np.zeros(1440),
                                                  np.arange(1440) >= 1430)})
    for src, basis in ((source, "partial"), (quiet, "none")):
        status = SloEvaluator([slo()], src, settle_seconds=0).tick(FEB_1)[0]
        assert status.observed_seconds == pytest.approx(10 * MINUTE)
        assert slo_out(slo(), status, []).budget_basis == basis
