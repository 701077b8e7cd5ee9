"""Cumulative event counts of one SLI, kept so that any window's sum costs O(1).

The evaluator must not pay per tick for the length of its windows (a 30-day SLO ticks as
fast as a 1-day one). Each minute appends its (good, total, data) to running totals; the sum
over the last k minutes is the running total now minus the running total k minutes ago, read
from a ring. Minutes are kept for the longest alert window; beyond that (the budget period,
up to a calendar month) only the running totals at hour boundaries are kept, so a period sum
starts at the first hour boundary inside the period (at most one hour short of it).

Minute ``m`` is the interval ((m - 1) * 60, m * 60] in Unix seconds, as in the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_MINUTE = 60
_HOUR = 3600
_FIELDS = 3  # good, total, minutes with data


@dataclass(frozen=True, slots=True)
class Counts:
    """Events over some window: good ones, all of them, and how many minutes had data."""

    good: float = 0.0
    total: float = 0.0
    data_minutes: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.good + other.good, self.total + other.total,
                      self.data_minutes + other.data_minutes)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.good - other.good, self.total - other.total,
                      self.data_minutes - other.data_minutes)

    def scaled(self, fraction: float) -> Counts:
        """The share of these counts that fell in ``fraction`` of their time (spread evenly)."""
        return Counts(self.good * fraction, self.total * fraction,
                      self.data_minutes * fraction)

    @property
    def bad(self) -> float:
        return max(self.total - self.good, 0.0)

    @property
    def error_ratio(self) -> float:
        """Bad over all events; NaN without events (no ratio, which is not 0)."""
        return self.bad / self.total if self.total > 0 else math.nan


class EventHistory:
    """Running totals per minute for ``minutes`` minutes and per hour for ``hours`` hours."""

    def __init__(self, minutes: int, hours: int) -> None:
        self._minutes = np.zeros((minutes + 1, _FIELDS))
        self._hours = np.zeros((hours + 1, _FIELDS))
        self._running = np.zeros(_FIELDS)
        self.last_minute: int | None = None  # the latest minute appended
        self._first_minute: int | None = None

    @property
    def minute_capacity(self) -> int:
        return len(self._minutes) - 1

    def append(self, minute: int, good: float, total: float, has_data: bool) -> None:
        """Add the counts of ``minute``; minutes skipped since the last one had no data."""
        if self.last_minute is not None and minute <= self.last_minute:
            raise ValueError(f"minute {minute} is not after the last one, {self.last_minute}")
        if self.last_minute is None:
            self._first_minute = minute
            self._record(minute - 1)  # so that the first minute's own sum is readable
        else:  # minutes skipped in between add nothing; only the ring's length matters
            for skipped in range(max(self.last_minute + 1, minute - len(self._minutes)),
                                 minute):
                self._record(skipped)
            for hour in range(max(self.last_minute // 60 + 1,
                                  (minute - 1) // 60 + 1 - len(self._hours)),
                              (minute - 1) // 60 + 1):
                self._hours[hour % len(self._hours)] = self._running
        self._running = self._running + (good, total, 1.0 if has_data else 0.0)
        self._record(minute)
        self.last_minute = minute

    def extend(self, minutes: npt.NDArray[np.int64], good: npt.NDArray[np.float64],
               total: npt.NDArray[np.float64], has_data: npt.NDArray[np.bool_]) -> None:
        """``append`` of many minutes at once (strictly increasing, all after the last one),
        leaving exactly the state the appends one by one would: running totals are cumulated
        in the same order, and each ring slot gets the running total its last write would."""
        if len(minutes) == 0:
            return
        if np.any(np.diff(minutes) <= 0) or (self.last_minute is not None
                                             and int(minutes[0]) <= self.last_minute):
            raise ValueError(f"minutes {int(minutes[0])}..{int(minutes[-1])} do not move "
                             f"forward from the last one, {self.last_minute}")
        rows = np.empty((len(minutes) + 1, _FIELDS))
        rows[0] = self._running
        rows[1:, 0], rows[1:, 1] = good, total
        rows[1:, 2] = np.where(has_data, 1.0, 0.0)
        running = np.cumsum(rows, axis=0)  # sequential sums: as the appends add them
        first, last = int(minutes[0]), int(minutes[-1])
        # Minutes after ``written_after`` get the running total as of their end.
        written_after = first - 2 if self.last_minute is None else self.last_minute
        lo = max(written_after + 1, last - len(self._minutes) + 1)
        ring = np.arange(lo, last + 1)
        self._minutes[ring % len(self._minutes)] = running[
            np.searchsorted(minutes, ring, side="right")]
        hours = np.arange(max(written_after // 60 + 1, last // 60 - len(self._hours) + 1),
                          last // 60 + 1)
        self._hours[hours % len(self._hours)] = running[
            np.searchsorted(minutes, hours * 60, side="right")]
        if self.last_minute is None:
            self._first_minute = first
        self._running = running[-1].copy()
        self.last_minute = last

    def _record(self, minute: int) -> None:
        self._minutes[minute % len(self._minutes)] = self._running
        if minute % 60 == 0:
            self._hours[(minute // 60) % len(self._hours)] = self._running

    def last(self, minutes: int) -> Counts:
        """Sum over the ``minutes`` latest minutes (fewer if the history is shorter)."""
        if self.last_minute is None or self._first_minute is None:
            return Counts()
        if minutes > self.minute_capacity:
            raise ValueError(f"{minutes} minutes is longer than the {self.minute_capacity} "
                             "kept per minute")
        start = max(self.last_minute - minutes, self._first_minute - 1)
        return self._diff(self._running, self._minutes[start % len(self._minutes)])

    def since(self, start_seconds: float) -> Counts:
        """Sum over minutes ending after ``start_seconds``: exact while that is inside the
        minute ring, else from the first hour boundary at or after it."""
        if self.last_minute is None or self._first_minute is None:
            return Counts()
        start_minute = math.ceil(start_seconds / _MINUTE)
        if start_minute < self._first_minute:  # all there is
            return self._diff(self._running, np.zeros(_FIELDS))
        if start_minute >= self.last_minute:
            return Counts()
        if self.last_minute - start_minute <= self.minute_capacity:
            return self._diff(self._running, self._minutes[start_minute % len(self._minutes)])
        hour = math.ceil(start_minute / 60)
        if (self.last_minute // 60) - hour > len(self._hours) - 1:
            raise ValueError(f"{start_seconds} is before the {len(self._hours) - 1} hours kept")
        return self._diff(self._running, self._hours[hour % len(self._hours)])

    @staticmethod
    def _diff(now: npt.NDArray[np.float64], then: npt.NDArray[np.float64]) -> Counts:
        good, total, data = (now - then).tolist()
        return Counts(good, total, data)
