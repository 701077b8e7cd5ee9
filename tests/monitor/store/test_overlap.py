"""No interval stored twice: a snapshot overlapping a stored one of its target is refused (the
stored one wins), counted; the normal run of scrapes reads nothing to check."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, select

from monitor.store import Selector, Store, window
from monitor.store.models import RAW_RESOLUTION, Interval
from tests.monitor.store.builders import REQUESTS, T0, up
from tests.monitor.store.databases import Database


def _ends(store: Store) -> list[tuple[float, float]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(Interval.start_time, Interval.end_time)
                            .where(Interval.resolution == RAW_RESOLUTION)
                            .order_by(Interval.end_time))
        return [(s, e) for s, e in rows]


def test_a_snapshot_overlapping_a_stored_one_is_not_written_and_is_counted(
        store: Store) -> None:
    refused: list[tuple[str, int]] = []
    store.overlaps.on_reject = lambda reason, n: refused.append((reason, n))
    store.write([up("a", T0 + 15, requests=1.0), up("a", T0 + 30, requests=1.0)])
    # Another replica's scrapes of the same moments: ending between and after the stored ones.
    store.write([up("a", T0 + 22, requests=50.0), up("a", T0 + 37, requests=50.0)])
    assert _ends(store) == [(T0, T0 + 15), (T0 + 15, T0 + 30)]
    assert window(store, Selector("a"), T0, T0 + 30).counters[REQUESTS] == 2.0
    assert store.overlaps.num_rejected == 1 + 1 and refused == [("overlap", 2)]


def test_the_same_snapshot_again_a_gap_filled_and_the_next_one_are_written(
        store: Store) -> None:
    store.write([up("a", T0 + 15), up("a", T0 + 45)])
    store.write([up("a", T0 + 15, requests=3.0)])  # a retry: its own key, replaced
    store.write([up("a", T0 + 30)])                # the gap between them
    store.write([up("a", T0 + 60)])                # the next scrape
    assert _ends(store) == [(T0 + 15 * k, T0 + 15 * (k + 1)) for k in range(4)]
    assert store.overlaps.num_rejected == 0


def test_a_replica_that_takes_over_reads_what_the_other_stored(store: Store,
                                                                database: Database) -> None:
    other = database.open()  # the previous active, on its own connection pool and cache
    try:
        store.write([up("a", T0 + 15)])
        other.write([up("a", T0 + 30)])  # written behind this store's cache
        store.overlaps.forget()          # what a replica does as it becomes active
        store.write([up("a", T0 + 25, duration=5)])
        assert store.overlaps.num_rejected == 1
        assert _ends(store) == [(T0, T0 + 15), (T0 + 15, T0 + 30)]
    finally:
        other.close()


def test_scrapes_in_order_are_checked_without_reading_the_store(store: Store) -> None:
    store.write([up("a", T0 + 15)])  # the cold cache reads the latest end once
    selects: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "max(" in statement.lower() or "intervals.end_time !=" in statement.lower():
            selects.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        for k in range(2, 12):
            store.write([up("a", T0 + 15 * k)])
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert selects == []
    assert store.overlaps.num_rejected == 0
