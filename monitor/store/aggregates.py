"""Totals of stored values over planned pieces: scalar sums in the database (GROUP BY), bucket
counts streamed and summed with numpy. Shared by the window and step queries.

Scalar totals are keyed by a tuple: (target id, series id) for a window, (end time,) for a
step query (which then bins interval ends into steps).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, select, tuple_
from sqlalchemy.orm import InstrumentedAttribute

from monitor.collect.snapshot import GaugeStats, TargetState
from monitor.store.histograms import BucketAccumulator, BucketRows
from monitor.store.ids import IdCache, load_bounds
from monitor.store.models import CounterValue, GaugeValue, HistogramValue, Interval
from monitor.store.reads import Piece, interval_range, nan_if_null, value_range

# Histogram rows fetched per round trip: bounds memory, keeps numpy batches large.
_ROWS_PER_BATCH = 20_000

Key = tuple[float, ...]


@contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """One consistent view for all the statements of a query (pieces read at two
    resolutions must not straddle a concurrent rollup or retention run)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def _group(table: type[CounterValue] | type[GaugeValue], by_end: bool
           ) -> list[InstrumentedAttribute[Any]]:
    if by_end:
        return [table.end_time]
    return [table.target_id, table.series_id]


def counter_totals(conn: Connection, pieces: Sequence[Piece], target_ids: Collection[int],
                   series_ids: Collection[int], by_end: bool) -> dict[Key, float]:
    group = _group(CounterValue, by_end)
    totals: dict[Key, float] = {}
    for piece in pieces:
        rows = conn.execute(
            select(*group, func.sum(CounterValue.increase))
            .where(*value_range(CounterValue, piece, target_ids, series_ids)).group_by(*group))
        for *key_columns, total in rows:
            key = tuple(key_columns)
            totals[key] = totals.get(key, 0.0) + nan_if_null(total)
    return totals


@dataclass(frozen=True, slots=True)
class GaugeTotal:
    """Pooled gauge statistics; ``last`` is the largest reading at the latest end."""

    total: float
    num_readings: int
    minimum: float
    maximum: float
    last_end: float
    last: float

    def merge(self, other: GaugeTotal) -> GaugeTotal:
        later = max(self, other, key=lambda g: (g.last_end, g.last))
        return GaugeTotal(self.total + other.total, self.num_readings + other.num_readings,
                          min(self.minimum, other.minimum), max(self.maximum, other.maximum),
                          later.last_end, later.last)

    def stats(self) -> GaugeStats:
        return GaugeStats(self.last, self.total, self.num_readings, self.minimum, self.maximum)


def gauge_totals(conn: Connection, pieces: Sequence[Piece], target_ids: Collection[int],
                 series_ids: Collection[int], by_end: bool) -> dict[Key, GaugeTotal]:
    group = _group(GaugeValue, by_end)
    # Grouped by end, MAX(last) is the reading at that end; grouped by (target, series), the
    # reading at each latest end is looked up afterwards.
    last = func.max(GaugeValue.last) if by_end else func.max(GaugeValue.end_time)
    totals: dict[Key, GaugeTotal] = {}
    latest: dict[Key, Piece] = {}
    for piece in pieces:
        rows = conn.execute(
            select(*group, func.sum(GaugeValue.total), func.sum(GaugeValue.num_readings),
                   func.min(GaugeValue.minimum), func.max(GaugeValue.maximum),
                   func.max(GaugeValue.end_time), last)
            .where(*value_range(GaugeValue, piece, target_ids, series_ids)).group_by(*group))
        for *key_columns, total, num, low, high, last_end, last_value in rows:
            key = tuple(key_columns)
            found = GaugeTotal(nan_if_null(total), int(num), nan_if_null(low),
                               nan_if_null(high), last_end, nan_if_null(last_value))
            if key not in totals or last_end > totals[key].last_end:
                latest[key] = piece  # pieces do not overlap: no ties between them
            totals[key] = totals[key].merge(found) if key in totals else found
    if not by_end:
        _fill_last_readings(conn, totals, latest)
    return totals


def _fill_last_readings(conn: Connection, totals: dict[Key, GaugeTotal],
                        latest: dict[Key, Piece]) -> None:
    for piece in set(latest.values()):
        keys = [key for key, p in latest.items() if p == piece]
        triples = [(int(t), int(s), totals[t, s].last_end) for t, s in keys]
        rows = conn.execute(
            select(GaugeValue.target_id, GaugeValue.series_id, GaugeValue.last)
            .where(*value_range(GaugeValue, piece, {t for t, _, _ in triples},
                                {s for _, s, _ in triples}),
                   tuple_(GaugeValue.target_id, GaugeValue.series_id,
                          GaugeValue.end_time).in_(triples)))
        for target_id, series_id, last in rows:
            old = totals[target_id, series_id]
            totals[target_id, series_id] = GaugeTotal(old.total, old.num_readings, old.minimum,
                                                      old.maximum, old.last_end,
                                                      nan_if_null(last))


# Groups of a batch of rows from their (target ids, series ids, end times) columns.
Grouping = Callable[[Sequence[int], Sequence[int], Sequence[float]], Sequence[Hashable]]


def histogram_totals(conn: Connection, ids: IdCache, pieces: Sequence[Piece],
                     target_ids: Collection[int], series_ids: Collection[int],
                     grouping: Grouping) -> BucketAccumulator:
    """Bucket counts summed per group, as ``grouping`` assigns rows to groups."""
    load_bounds(conn, ids)
    accumulator = BucketAccumulator(ids.bounds_by_id)
    h = HistogramValue
    for piece in pieces:
        result = conn.execute(
            select(h.target_id, h.series_id, h.end_time, h.bounds_id, h.sum, h.count,
                   h.first_bucket, h.counts)
            .where(*value_range(h, piece, target_ids, series_ids))
            .execution_options(yield_per=_ROWS_PER_BATCH))
        for batch in result.partitions():
            targets, series, ends, bounds_ids, sums, counts, firsts, blobs = zip(*batch)
            accumulator.add(BucketRows(grouping(targets, series, ends), bounds_ids, sums,
                                       counts, firsts, blobs))
    return accumulator


@dataclass(frozen=True, slots=True)
class IntervalSummary:
    start: float
    end: float
    any_up: bool
    last_down: tuple[float, str | None] | None  # end and error of the latest down interval

    def merge(self, other: IntervalSummary) -> IntervalSummary:
        downs = [d for d in (self.last_down, other.last_down) if d is not None]
        return IntervalSummary(min(self.start, other.start), max(self.end, other.end),
                               self.any_up or other.any_up,
                               max(downs, key=lambda d: d[0]) if downs else None)


def interval_summaries(conn: Connection, pieces: Sequence[Piece],
                       target_ids: Collection[int]) -> dict[int, IntervalSummary]:
    """Span and state of each target's stored intervals (targets with none are absent)."""
    summaries: dict[int, IntervalSummary] = {}
    for piece in pieces:
        rows = conn.execute(
            select(Interval.target_id, Interval.state, func.min(Interval.start_time),
                   func.max(Interval.end_time))
            .where(*interval_range(piece, target_ids))
            .group_by(Interval.target_id, Interval.state))
        for target_id, state, first_start, last_end in rows:
            last_down = None
            if state == TargetState.DOWN:
                last_down = (last_end, conn.scalar(select(Interval.error).where(
                    *interval_range(piece, [target_id]), Interval.end_time == last_end)))
            found = IntervalSummary(first_start, last_end, state != TargetState.DOWN,
                                    last_down)
            old = summaries.get(target_id)
            summaries[target_id] = old.merge(found) if old else found
    return summaries


def up_ends(conn: Connection, pieces: Sequence[Piece], target_ids: Collection[int]
            ) -> list[float]:
    """Ends of the intervals in which some selected target answered."""
    ends: list[float] = []
    for piece in pieces:
        ends.extend(conn.scalars(select(Interval.end_time).distinct().where(
            *interval_range(piece, target_ids), Interval.state != TargetState.DOWN.value)))
    return ends
