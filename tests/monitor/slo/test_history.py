"""EventHistory: O(1) window sums equal brute-force sums over what was appended."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.slo.history import Counts, EventHistory

RING_MINUTES, HOURS = 120, 10
FIRST = 50_000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 200), st.integers(0, 5), st.integers(0, 9),
                          st.booleans()), min_size=1, max_size=300),
       st.integers(0, RING_MINUTES), st.integers(0, HOURS * 60 - 60))
def test_window_sums_equal_brute_force(rows: list[tuple[int, int, int, bool]], k: int,
                                       back: int) -> None:
    history = EventHistory(RING_MINUTES, HOURS)
    data: dict[int, tuple[int, int, bool]] = {}
    minute = FIRST
    for gap, good, extra, has_data in rows:
        minute += 1 if gap > 150 else gap if gap < 10 else 1
        data[minute] = (good, good + extra, has_data)
        history.append(minute, good, good + extra, has_data)

    def brute(lo: int) -> Counts:
        picked = [v for m, v in data.items() if lo < m <= minute]
        return Counts(sum(v[0] for v in picked), sum(v[1] for v in picked),
                      sum(1 for v in picked if v[2]))

    assert history.last(k) == brute(minute - k)
    start = (minute - back) * 60 - 17
    start_minute = math.ceil(start / 60)
    if minute - start_minute <= RING_MINUTES or start_minute < FIRST:
        assert history.since(start) == brute(start_minute)
    else:  # beyond the minute ring: from the first hour boundary inside the range
        assert history.since(start) == brute(math.ceil(start_minute / 60) * 60)


def test_an_empty_history_sums_to_nothing() -> None:
    history = EventHistory(10, 2)
    assert history.last(5) == Counts()
    assert math.isnan(history.last(5).error_ratio)


def test_minutes_must_move_forward_and_windows_fit_the_ring() -> None:
    history = EventHistory(10, 2)
    history.append(100, 1, 1, True)
    try:
        history.append(100, 1, 1, True)
    except ValueError as exc:
        assert "not after" in str(exc)
    else:
        raise AssertionError("a repeated minute was accepted")
    try:
        history.last(11)
    except ValueError as exc:
        assert "longer than the 10" in str(exc)
    else:
        raise AssertionError("a window longer than the ring was answered")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1500), st.floats(0, 1e6), st.floats(0, 1e6),
                          st.booleans()), min_size=1, max_size=400),
       st.lists(st.integers(0, 400), max_size=6), st.booleans())
def test_extend_leaves_exactly_the_state_of_one_append_per_minute(
        rows: list[tuple[int, float, float, bool]], cuts: list[int], start_fresh: bool) -> None:
    one_by_one, bulk = EventHistory(RING_MINUTES, HOURS), EventHistory(RING_MINUTES, HOURS)
    minute = FIRST
    if not start_fresh:  # extend after appends, as the first tick's minutes follow its hours
        for history in (one_by_one, bulk):
            history.append(minute, 3.0, 4.0, True)
    minutes, goods, totals, flags = [], [], [], []
    for gap, good, extra, has_data in rows:
        minute += gap
        minutes.append(minute)
        goods.append(good)
        totals.append(good + extra)
        flags.append(has_data)
        one_by_one.append(minute, good, good + extra, has_data)
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    for lo, hi in zip(bounds, bounds[1:]):
        bulk.extend(np.array(minutes[lo:hi], dtype=np.int64), np.array(goods[lo:hi]),
                    np.array(totals[lo:hi]), np.array(flags[lo:hi]))
    assert (bulk.last_minute, bulk._first_minute) == (one_by_one.last_minute,
                                                      one_by_one._first_minute)
    for mine, theirs in ((bulk._running, one_by_one._running),
                         (bulk._minutes, one_by_one._minutes),
                         (bulk._hours, one_by_one._hours)):
        assert np.array_equal(mine, theirs)  # bit for bit, not approximately


def test_extend_refuses_minutes_that_do_not_move_forward() -> None:
    history = EventHistory(10, 2)
    history.append(100, 1, 1, True)
    ones = np.ones(2)
    for minutes in ([100, 101], [102, 102]):
        with pytest.raises(ValueError, match="do not move forward"):
            history.extend(np.array(minutes), ones, ones, np.ones(2, dtype=bool))
