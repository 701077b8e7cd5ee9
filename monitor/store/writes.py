"""Idempotent writes of snapshots at one resolution.

A snapshot is keyed (target, resolution, end). Writing it again replaces what was stored under
that key: the interval row is upserted (INSERT .. ON CONFLICT DO UPDATE), its value rows are
deleted and inserted anew, all in the caller's transaction. A retried or replayed write
therefore never duplicates anything, and a changed snapshot never leaves stale series behind.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, delete, insert, select, update

from monitor.collect.snapshot import Snapshot
from monitor.store.fence import check_fence
from monitor.store.histograms import encode_counts
from monitor.store.ids import IdCache, dialect_insert, ensure_bounds, ensure_series, ensure_targets
from monitor.store.models import (
    RAW_RESOLUTION,
    ROLLUP_RESOLUTIONS,
    CounterValue,
    GaugeValue,
    HistogramValue,
    Interval,
    RollupWatermark,
    Series,
    SeriesKind,
    ValueTable,
)

# Read by the SQLite "begin" hook in db.py: writers take the write lock up front (BEGIN
# IMMEDIATE) so the busy timeout applies, instead of failing on a read-to-write upgrade.
IMMEDIATE = "inferwatch_sqlite_immediate"

VALUE_TABLES: dict[SeriesKind, ValueTable] = {
    SeriesKind.COUNTER: CounterValue,
    SeriesKind.GAUGE: GaugeValue,
    SeriesKind.HISTOGRAM: HistogramValue,
}


@contextmanager
def write_transaction(engine: Engine, *, fenced: bool = False) -> Iterator[Connection]:
    """A write transaction; ``fenced``: one only the active replica may make (checked
    inside the transaction, monitor/store/fence.py: FencedOut if this replica lost the
    lock)."""
    with engine.connect() as conn:
        conn.execution_options(**{IMMEDIATE: True})
        with conn.begin():
            if fenced:
                check_fence(conn)
            yield conn


def bucket_start(end_time: float, resolution: int) -> float:
    """Start of the rollup bucket (start, start + resolution] that holds an interval's end."""
    return float(math.ceil(end_time / resolution) * resolution - resolution)


def write_snapshots(conn: Connection, ids: IdCache, snapshots: Sequence[Snapshot],
                    resolution: int) -> None:
    # The same key twice in one batch (a resubmitted snapshot): the later one replaces it.
    snapshots = list({(s.target, s.end): s for s in snapshots}.values())
    if not snapshots:
        return
    _ensure_ids(conn, ids, snapshots)
    keys = [{"t": ids.targets[s.target], "e": s.end} for s in snapshots]
    _upsert_intervals(conn, ids, snapshots, resolution)
    for kind, table in VALUE_TABLES.items():
        # One range seek per series of this kind (the key has series before end_time).
        conn.execute(delete(table).where(
            table.target_id == bindparam("t"), table.resolution == resolution,
            table.series_id.in_(select(Series.id).where(Series.kind == kind.value)),
            table.end_time == bindparam("e")), keys)
    for table, rows in _value_rows(ids, snapshots, resolution):
        if rows:
            conn.execute(insert(table), rows)
    if resolution == RAW_RESOLUTION:
        rewind_watermarks(conn, min(s.end for s in snapshots))


def rewind_watermarks(conn: Connection, end_time: float) -> None:
    """A raw interval arrived for a bucket already rolled up: have the next rollup redo it."""
    for resolution in ROLLUP_RESOLUTIONS:
        start = bucket_start(end_time, resolution)
        conn.execute(update(RollupWatermark)
                     .where(RollupWatermark.resolution == resolution,
                            RollupWatermark.watermark > start)
                     .values(watermark=start))


def _ensure_ids(conn: Connection, ids: IdCache, snapshots: Sequence[Snapshot]) -> None:
    ensure_targets(conn, ids, {s.target for s in snapshots})
    kinds: dict[str, SeriesKind] = {}
    for s in snapshots:
        for key in s.counters:
            kinds[key] = SeriesKind.COUNTER
        for key in s.gauges:
            kinds[key] = SeriesKind.GAUGE
        for key in s.histograms:
            kinds[key] = SeriesKind.HISTOGRAM
    ensure_series(conn, ids, kinds)
    ensure_bounds(conn, ids, {h.bounds for s in snapshots for h in s.histograms.values()})


def _upsert_intervals(conn: Connection, ids: IdCache, snapshots: Sequence[Snapshot],
                      resolution: int) -> None:
    stmt = dialect_insert(conn, Interval)
    stmt = stmt.on_conflict_do_update(
        index_elements=["target_id", "resolution", "end_time"],
        set_={"start_time": stmt.excluded.start_time, "state": stmt.excluded.state,
              "error": stmt.excluded.error})
    conn.execute(stmt, [
        {"target_id": ids.targets[s.target], "resolution": resolution, "end_time": s.end,
         "start_time": s.start, "state": s.state.value, "error": s.error}
        for s in snapshots])


def _value_rows(ids: IdCache, snapshots: Sequence[Snapshot], resolution: int
                ) -> list[tuple[ValueTable, list[dict[str, Any]]]]:
    counters, gauges, histograms = [], [], []
    for s in snapshots:
        key = {"target_id": ids.targets[s.target], "resolution": resolution, "end_time": s.end}
        for series, increase in s.counters.items():
            counters.append({**key, "series_id": ids.series[series][0], "increase": increase})
        for series, g in s.gauges.items():
            gauges.append({**key, "series_id": ids.series[series][0], "last": g.last,
                           "total": g.total, "num_readings": g.num_readings,
                           "minimum": g.minimum, "maximum": g.maximum})
        for series, h in s.histograms.items():
            first_bucket, blob = encode_counts(h.counts)
            histograms.append({**key, "series_id": ids.series[series][0],
                               "bounds_id": ids.bounds[h.bounds], "sum": h.sum,
                               "count": h.count, "first_bucket": first_bucket, "counts": blob})
    return [(CounterValue, counters), (GaugeValue, gauges), (HistogramValue, histograms)]
