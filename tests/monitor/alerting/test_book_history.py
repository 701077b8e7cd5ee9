"""AlertBook's history: each change of state is stored once, when it happens, with the state
it left; a restarted book continues without repeating one; a failed save loses none."""

from __future__ import annotations

import math

import pytest

from monitor.alerting.book import AlertBook
from monitor.store import Store
from monitor.store.alert_events import AlertEventRow, EventFilter, read_events
from tests.monitor.alerting.test_book import LABELS, cond
from tests.monitor.store.databases import Database

OTHER = {**LABELS, "slo": "other", "severity": "ticket"}


def history(store: Store, **where: object) -> list[AlertEventRow]:
    """Every stored event, oldest first."""
    rows, total = read_events(store.engine, EventFilter(**where), 1000)  # type: ignore[arg-type]
    assert len(rows) == total
    return rows[::-1]


def changes(store: Store) -> list[tuple[float, str, str, str | None, float | None]]:
    return [(e.at, e.labels["slo"], e.state, e.previous_state, e.fired_at)
            for e in history(store)]


def test_each_change_of_state_is_recorded_once_when_it_happens(
        store: Store) -> None:
    book = AlertBook(store, resend_seconds=60, resolved_retention_seconds=900)
    book.update(0, [cond(True, for_seconds=60), cond(True, labels=OTHER, for_seconds=300)])
    book.update(30, [cond(True, for_seconds=60), cond(True, labels=OTHER, for_seconds=300)])
    book.update(60, [cond(True, for_seconds=60), cond(False, labels=OTHER, for_seconds=300)])
    book.due(61)  # a send changes no state: no event
    book.update(90, [cond(False, for_seconds=60)])
    book.update(120, [cond(True, value=30.0)])  # back while its resolve is announced
    book.update(2000, [])                       # resolves, then expires: no event for that
    assert changes(store) == [
        (0, "chat", "pending", None, None),
        (0, "other", "pending", None, None),
        (60, "chat", "firing", "pending", 60),
        (60, "other", "inactive", "pending", None),
        (90, "chat", "resolved", "firing", 60),
        (120, "chat", "firing", "resolved", 120),  # a new episode, startsAt 120
        (2000, "chat", "resolved", "firing", 120),
    ]
    events = history(store)
    assert events[0].alertname == "InferwatchSLOBurnRate" and events[0].labels == LABELS
    assert events[5].value == 30.0 and events[5].annotations == {"summary": "burn 30.0"}
    assert [e.id for e in events] == sorted(e.id for e in events if e.id is not None)


def test_a_restarted_book_continues_the_history_without_repeating_it(store: Store) -> None:
    book = AlertBook(store, resend_seconds=60)
    book.update(0, [cond(True), cond(True, labels=OTHER, for_seconds=120)])
    book.due(0)

    restarted = AlertBook(store, resend_seconds=60)
    restarted.update(15, [cond(True), cond(True, labels=OTHER, for_seconds=120)])
    assert changes(store) == [(0, "chat", "firing", None, 0),
                              (0, "other", "pending", None, None)]
    restarted.update(120, [cond(False), cond(True, labels=OTHER, for_seconds=120)])

    again = AlertBook(store, resend_seconds=60)
    again.update(135, [cond(False), cond(True, labels=OTHER, for_seconds=120)])
    assert changes(store) == [(0, "chat", "firing", None, 0),
                              (0, "other", "pending", None, None),
                              (120, "chat", "resolved", "firing", 0),
                              (120, "other", "firing", "pending", 120)]


def test_a_failed_save_keeps_its_events_for_the_next_one(database: Database,
                                                         store: Store) -> None:
    book = AlertBook(store, resend_seconds=60)
    book.update(0, [cond(True)])
    with database.outage(), pytest.raises(Exception):  # noqa: B017 (either driver's error)
        book.update(30, [cond(False)])
    book.update(45, [cond(False)])
    assert changes(store) == [(0, "chat", "firing", None, 0),
                              (30, "chat", "resolved", "firing", 0)]


def test_a_nan_value_is_stored_as_null_and_read_back_as_nan(store: Store) -> None:
    book = AlertBook(store)
    book.update(0, [cond(True, value=math.nan)])
    (event,) = history(store)
    assert math.isnan(event.value)


def test_the_history_is_filtered_by_slo_alertname_and_time(store: Store) -> None:
    book = AlertBook(store)
    book.update(0, [cond(True)])
    book.update(10, [cond(True), cond(True, labels={**OTHER, "alertname": "Other"})])
    book.update(20, [])
    assert [e.at for e in history(store, slo="chat")] == [0, 20]
    assert [e.at for e in history(store, alertname="Other")] == [10, 20]
    assert [e.at for e in history(store, start=10, end=20)] == [10]
    rows, total = read_events(store.engine, EventFilter(), limit=2, offset=1)
    assert total == 4 and [(e.at, e.labels["slo"]) for e in rows] == [(20, "chat"), (10, "other")]
