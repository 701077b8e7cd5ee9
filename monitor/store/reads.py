"""Reading stored intervals back: which resolution covers which part of a time range, and
whole snapshots (for rollups and tests).

Time ranges select intervals by their end: a range (lo, hi] holds the intervals whose
``end_time`` lies in it. A rollup row ending at ``b + r`` holds the raw intervals ending in
(b, b + r], so a range whose edges are multiples of r reads the same data at either level.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, select

from monitor.collect.snapshot import GaugeStats, HistogramDelta, SeriesKey, Snapshot, TargetState
from monitor.store.histograms import decode_counts
from monitor.store.ids import IdCache, load_bounds
from monitor.store.models import (
    RAW_RESOLUTION,
    CounterValue,
    GaugeValue,
    HistogramValue,
    Interval,
    RollupWatermark,
    Series,
    SeriesKind,
    Target,
    ValueTable,
)


@dataclass(frozen=True, slots=True)
class Piece:
    """Read rows at ``resolution`` whose end lies in (lo, hi]."""

    resolution: int
    lo: float
    hi: float


def plan(lo: float, hi: float, resolutions: Sequence[int],
         watermarks: Mapping[int, float]) -> list[Piece]:
    """Cover (lo, hi] with the coarsest rows that exist, finer ones at the edges.

    ``resolutions`` coarsest first, raw last. A rollup level is used only for whole buckets
    inside the range and only up to its watermark (buckets after it are not rolled up yet, or
    are being redone after a late write); what it leaves is covered by the next finer level.
    Past a finer level's retention an edge may find no rows: the result then starts at the
    first whole coarse bucket.
    """
    if lo >= hi:
        return []
    resolution, finer = resolutions[0], resolutions[1:]
    if resolution == RAW_RESOLUTION or not finer:
        return [Piece(resolution, lo, hi)]
    first = math.ceil(lo / resolution) * resolution
    last = min(math.floor(hi / resolution) * resolution, watermarks.get(resolution, -math.inf))
    if first >= last:
        return plan(lo, hi, finer, watermarks)
    return [*plan(lo, first, finer, watermarks), Piece(resolution, float(first), float(last)),
            *plan(last, hi, finer, watermarks)]


def load_watermarks(conn: Connection, *, for_update: bool = False) -> dict[int, float]:
    stmt = select(RollupWatermark.resolution, RollupWatermark.watermark)
    rows = conn.execute(stmt.with_for_update() if for_update else stmt)
    return {resolution: watermark for resolution, watermark in rows}


def all_targets(conn: Connection) -> dict[int, str]:
    return {target_id: name for target_id, name in conn.execute(select(Target.id, Target.name))}


def all_series(conn: Connection) -> dict[int, tuple[SeriesKey, SeriesKind]]:
    rows = conn.execute(select(Series.id, Series.key, Series.kind))
    return {series_id: (key, SeriesKind(kind)) for series_id, key, kind in rows}


def nan_if_null(value: float | None) -> float:
    """SQLite stores NaN as NULL."""
    return math.nan if value is None else value


def value_range(table: ValueTable, piece: Piece, target_ids: Collection[int],
                series_ids: Collection[int]) -> list[ColumnElement[bool]]:
    """WHERE clauses for value rows of these targets and series in a piece: with both id
    lists given, every database seeks one key range per (target, series)."""
    return [table.target_id.in_(list(target_ids)), table.resolution == piece.resolution,
            table.series_id.in_(list(series_ids)), table.end_time > piece.lo,
            table.end_time <= piece.hi]


def interval_range(piece: Piece, target_ids: Collection[int]) -> list[ColumnElement[bool]]:
    return [Interval.target_id.in_(list(target_ids)), Interval.resolution == piece.resolution,
            Interval.end_time > piece.lo, Interval.end_time <= piece.hi]


def load_snapshots(conn: Connection, ids: IdCache, piece: Piece) -> list[Snapshot]:
    """Every target's stored snapshots at one resolution with end in (lo, hi]."""
    targets, series = all_targets(conn), all_series(conn)
    if not targets:
        return []
    intervals = conn.execute(
        select(Interval.target_id, Interval.end_time, Interval.start_time, Interval.state,
               Interval.error).where(*interval_range(piece, targets))).all()
    counters: dict[tuple[int, float], dict[SeriesKey, float]] = {}
    gauges: dict[tuple[int, float], dict[SeriesKey, GaugeStats]] = {}
    histograms: dict[tuple[int, float], dict[SeriesKey, HistogramDelta]] = {}
    c, g, h = CounterValue, GaugeValue, HistogramValue
    for target_id, series_id, end_time, increase in conn.execute(
            select(c.target_id, c.series_id, c.end_time, c.increase)
            .where(*value_range(c, piece, targets, series))):
        counters.setdefault((target_id, end_time), {})[series[series_id][0]] = (
            nan_if_null(increase))
    for target_id, series_id, end_time, last, total, num_readings, minimum, maximum in (
            conn.execute(select(g.target_id, g.series_id, g.end_time, g.last, g.total,
                                g.num_readings, g.minimum, g.maximum)
                         .where(*value_range(g, piece, targets, series)))):
        gauges.setdefault((target_id, end_time), {})[series[series_id][0]] = GaugeStats(
            nan_if_null(last), nan_if_null(total), num_readings, nan_if_null(minimum),
            nan_if_null(maximum))
    rows = conn.execute(
        select(h.target_id, h.series_id, h.end_time, h.bounds_id, h.sum, h.count,
               h.first_bucket, h.counts).where(*value_range(h, piece, targets, series))).all()
    load_bounds(conn, ids, {row.bounds_id for row in rows})
    for target_id, series_id, end_time, bounds_id, total, count, first_bucket, blob in rows:
        bounds = ids.bounds_by_id[bounds_id]
        counts = decode_counts(first_bucket, blob, len(bounds) + 1)
        histograms.setdefault((target_id, end_time), {})[series[series_id][0]] = (
            HistogramDelta(bounds, counts, nan_if_null(total), nan_if_null(count)))
    return [Snapshot(targets[target_id], start_time, end_time, TargetState(state), error,
                     counters.get((target_id, end_time), {}),
                     gauges.get((target_id, end_time), {}),
                     histograms.get((target_id, end_time), {}))
            for target_id, end_time, start_time, state, error in intervals]
