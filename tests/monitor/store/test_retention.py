from __future__ import annotations

import pytest
from sqlalchemy import func, select

from monitor.store import RetentionPolicy, Store
from monitor.store.alert_events import AlertEventRow, EventFilter, insert_events, read_events
from monitor.store.models import CounterValue, HistogramValue, Interval
from tests.monitor.store.builders import T0, up

DAY = 86_400.0


def _ends(store: Store, resolution: int) -> list[float]:
    with store.engine.connect() as conn:
        return list(conn.scalars(select(Interval.end_time)
                                 .where(Interval.resolution == resolution)
                                 .order_by(Interval.end_time)))


def _values(store: Store, resolution: int) -> int:
    with store.engine.connect() as conn:
        return sum(conn.scalar(select(func.count()).select_from(table)
                               .where(table.resolution == resolution)) or 0
                   for table in (CounterValue, HistogramValue))


def test_retention_deletes_exactly_what_is_past_each_resolutions_age(store: Store) -> None:
    store.write([up("a", T0 + day * DAY + 60) for day in range(5)])
    now = T0 + 4 * DAY + 120
    store.rollup(now, lateness_seconds=0)
    policy = RetentionPolicy(raw_seconds=2 * DAY, minute_seconds=3 * DAY,
                             hour_seconds=3.5 * DAY)
    deleted = store.apply_retention(now, policy)
    # Intervals end 60 s into days 0..4 and now is 120 s into day 4: raw of days 0-2 is more
    # than 2 days old, minutes of days 0-1 more than 3 days, the hour of day 0 more than 3.5.
    assert deleted == {0: 3, 60: 2, 3600: 1}
    assert _ends(store, 0) == [T0 + 3 * DAY + 60, T0 + 4 * DAY + 60]
    assert _ends(store, 60) == [T0 + d * DAY + 60 for d in (2, 3, 4)]
    assert _ends(store, 3600) == [T0 + d * DAY + 3600 for d in (1, 2, 3)]
    assert _values(store, 0) == 2 * 3  # requests, errors, TTFT of each remaining interval
    assert store.apply_retention(now, policy) == {0: 0, 60: 0, 3600: 0}


def test_raw_intervals_not_yet_rolled_up_are_kept_whatever_their_age(store: Store) -> None:
    store.write([up("a", T0 + 60), up("a", T0 + 120)])
    assert store.apply_retention(T0 + 10 * DAY) == {0: 0, 60: 0, 3600: 0}
    store.rollup(T0 + 90, lateness_seconds=0)  # only the first minute is closed
    assert store.apply_retention(T0 + 10 * DAY)[0] == 1
    assert _ends(store, 0) == [T0 + 120]


@pytest.mark.parametrize("policy", [
    {"raw_seconds": 0},
    {"raw_seconds": 40 * DAY},  # longer than the minute rollups
], ids=["zero", "raw-outlives-minutes"])
def test_a_policy_that_would_lose_data_is_refused(policy: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="retention must be positive|at least as long"):
        RetentionPolicy(**policy)


def test_alert_history_is_kept_as_long_as_the_hour_rollups(store: Store) -> None:
    def event(at: float) -> AlertEventRow:
        return AlertEventRow(at, "fp", "InferwatchSLOBurnRate", "firing", None, at, 1.0,
                             {"slo": "chat"}, {})

    with store.engine.begin() as conn:
        insert_events(conn, [event(T0 + d * DAY) for d in range(5)])
    now = T0 + 4 * DAY + 120
    store.apply_retention(now, RetentionPolicy(raw_seconds=DAY, minute_seconds=DAY,
                                               hour_seconds=2 * DAY))
    rows, total = read_events(store.engine, EventFilter())
    assert total == 2 and [e.at for e in rows] == [T0 + 4 * DAY, T0 + 3 * DAY]
