"""Rollups: closed raw intervals into 1-minute buckets, closed minutes into 1-hour buckets.

A bucket is the merge (``monitor.collect.snapshot.merge_snapshots``) of the finer intervals
whose end lies in (b, b + r]: counters and bucket counts summed, gauge statistics merged. Only
additive primitives are kept, so a ratio or a percentile over a month read from hour rows is
exactly the one read from raw rows. Stored with the nominal bounds [b, b + r) of the bucket.

Incremental and idempotent: a watermark per level says up to where buckets are complete; each
chunk of buckets is written and the watermark advanced in one transaction, and a raw write
that lands behind the watermark moves it back (``writes.rewind_watermarks``) so the next run
redoes those buckets, replacing the rows it wrote before.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, Engine, func, select

from monitor.collect.snapshot import Snapshot, TargetState, merge_snapshots
from monitor.store.ids import IdCache, dialect_insert
from monitor.store.models import RAW_RESOLUTION, Interval, RollupWatermark
from monitor.store.reads import Piece, all_targets, load_snapshots, load_watermarks
from monitor.store.writes import bucket_start, write_snapshots, write_transaction

# (source resolution, rollup resolution, seconds of buckets rolled up per transaction):
# a chunk's snapshots are all held in memory at once.
LEVELS = ((RAW_RESOLUTION, 60, 900), (60, 3600, 3600))


def rollup(engine: Engine, ids: IdCache, now: float, lateness_seconds: float,
           levels: Sequence[tuple[int, int, int]] = LEVELS) -> dict[int, int]:
    """Roll up every bucket that ended ``lateness_seconds`` before ``now``; returns the number
    of buckets written per resolution. ``ids`` is updated as each transaction commits."""
    written: dict[int, int] = {}
    for source, resolution, chunk_seconds in levels:
        written[resolution] = 0
        while True:
            staged = ids.copy()
            with write_transaction(engine) as conn:
                num_buckets = _rollup_chunk(conn, staged, source, resolution, chunk_seconds,
                                            now - lateness_seconds)
            ids.adopt(staged)
            if num_buckets is None:
                break
            written[resolution] += num_buckets
    return written


def _rollup_chunk(conn: Connection, ids: IdCache, source: int, resolution: int,
                  chunk_seconds: int, closed_before: float) -> int | None:
    """Roll up the next chunk of closed buckets; None when there is nothing left to do."""
    # Locked (PostgreSQL) so a concurrent late write's rewind waits for this chunk's commit
    # and then applies, rather than being overwritten by it.
    watermarks = load_watermarks(conn, for_update=True)
    complete = closed_before
    if source != RAW_RESOLUTION:  # only buckets whose finer rows are all rolled up
        complete = min(complete, watermarks.get(source, -math.inf))
    if math.isinf(complete):
        return None
    # Whole buckets only: a bucket written from part of its minutes would later be
    # overwritten from the other part alone.
    limit = math.floor(complete / resolution) * resolution
    next_end = _next_end(conn, source, watermarks.get(resolution, -math.inf))
    if next_end is None or next_end > limit:
        if resolution in watermarks and watermarks[resolution] < limit:
            _set_watermark(conn, resolution, limit)
        return None
    lo = max(watermarks.get(resolution, -math.inf), bucket_start(next_end, resolution))
    hi = min(lo + chunk_seconds, limit)
    parts = load_snapshots(conn, ids, Piece(source, lo, hi))
    buckets = rollup_buckets(parts, resolution)
    write_snapshots(conn, ids, buckets, resolution)
    _set_watermark(conn, resolution, hi)
    return len(buckets)


def rollup_buckets(parts: Iterable[Snapshot], resolution: int) -> list[Snapshot]:
    """One merged snapshot per (target, bucket)."""
    groups: dict[tuple[str, float], list[Snapshot]] = {}
    for part in parts:
        groups.setdefault((part.target, bucket_start(part.end, resolution)), []).append(part)
    return [_merge_bucket(target, start, resolution, members)
            for (target, start), members in sorted(groups.items())]


def _merge_bucket(target: str, start: float, resolution: int,
                  parts: Sequence[Snapshot]) -> Snapshot:
    # merge_snapshots reduces a histogram whose bucket layout changed inside the bucket (an
    # engine upgrade) to the bounds all its layouts share.
    merged = merge_snapshots(target, parts)
    down = [p for p in parts if p.state is TargetState.DOWN]
    # A bucket that was down throughout keeps the last reason; an up one carries no error.
    error = max(down, key=lambda p: p.end).error if len(down) == len(parts) else None
    return dataclasses.replace(merged, start=start, end=start + resolution, error=error)


def _next_end(conn: Connection, resolution: int, after: float) -> float | None:
    """End of the first stored interval at ``resolution`` after ``after`` (skips gaps)."""
    targets = all_targets(conn)
    return conn.scalar(select(func.min(Interval.end_time)).where(
        Interval.target_id.in_(list(targets)), Interval.resolution == resolution,
        Interval.end_time > after))


def _set_watermark(conn: Connection, resolution: int, watermark: float) -> None:
    stmt = dialect_insert(conn, RollupWatermark).values(resolution=resolution,
                                                        watermark=watermark)
    conn.execute(stmt.on_conflict_do_update(index_elements=["resolution"],
                                            set_={"watermark": watermark}))
