"""Where an SLO's charts start (issue 30): at its first event in the period, found with an
hour read and a minute read; at the period's start without a search once the evaluator says
the history covers the period."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.report_span import first_event_at
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from monitor.slo.steps import Step
from monitor.ui.views import slo_chart_span

NOW = 1_800_000_000.0  # a whole hour
DAY = 86400.0
SLO = Slo.model_validate({"name": "a", "objective": 0.99, "window": "30d",
                          "sli": {"kind": "availability"}})


def minutes(num_days: int, events_from: int, answered_from: int | None = None
            ) -> MinuteArraySource:
    """``num_days`` of minutes up to NOW: targets answer from minute ``answered_from`` (the
    first events' by default), 10 events a minute from ``events_from``."""
    k = np.arange(num_days * 1440)
    total = np.where(k >= events_from, 10.0, 0.0)
    answered = k >= (events_from if answered_from is None else answered_from)
    return MinuteArraySource(NOW - num_days * DAY, {"a": (total, total, answered)})


class Unread(MinuteArraySource):
    """A source that must not be read."""

    def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
        raise AssertionError(f"read {start}..{end}")


@pytest.mark.parametrize(("events_from", "expected"), [
    (2 * 1440 - 10, NOW - 600), (2 * 1440 - 61, NOW - 61 * 60), (0, NOW - 2 * DAY)],
    ids=["ten minutes ago", "an hour and a minute ago", "before the range"])
def test_the_first_event_is_found_to_the_minute(events_from: int, expected: float) -> None:
    source = minutes(2, events_from)
    assert first_event_at(SLO, source, NOW - 2 * DAY + 30, NOW) == \
        max(expected, NOW - 2 * DAY)


def test_no_event_is_none() -> None:
    assert first_event_at(SLO, minutes(1, 1440), NOW - DAY, NOW) is None


def test_a_young_slos_charts_start_at_its_first_event_after_its_first_answer() -> None:
    """Targets answered 30 minutes ago, the first requests came 10 minutes ago."""
    source = minutes(2, 2 * 1440 - 10, answered_from=2 * 1440 - 30)
    status = SloEvaluator([SLO], source, settle_seconds=0).tick(NOW)[0]
    span = slo_chart_span(SLO, source, status, NOW, NOW)
    assert span is not None and span.partial
    assert (span.start, span.end, span.period_start) == (NOW - 600, NOW, NOW - 30 * DAY)


def test_a_history_covering_the_period_draws_the_period_without_a_search() -> None:
    one_day = Slo.model_validate({**SLO.model_dump(), "window": "1d"})
    source = minutes(3, 0)
    status = SloEvaluator([one_day], source, settle_seconds=0).tick(NOW)[0]
    assert not status.partial_period
    span = slo_chart_span(one_day, Unread(source.start, {}), status, NOW, NOW)
    assert span is not None and not span.partial
    assert (span.start, span.end) == (NOW - DAY, NOW)
