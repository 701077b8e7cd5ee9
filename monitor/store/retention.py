"""Retention: how long each resolution is kept, and deleting what is past it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, select

from monitor.store.alert_events import prune_events
from monitor.store.models import RAW_RESOLUTION, Interval, Series, Target
from monitor.store.request_events import prune_request_events
from monitor.store.reads import load_watermarks
from monitor.store.writes import VALUE_TABLES, write_transaction

DAY_SECONDS = 86_400.0


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Seconds each resolution is kept, counted back from ``now`` to an interval's end."""

    raw_seconds: float = 3 * DAY_SECONDS
    minute_seconds: float = 30 * DAY_SECONDS
    hour_seconds: float = 400 * DAY_SECONDS

    def __post_init__(self) -> None:
        kept = (self.raw_seconds, self.minute_seconds, self.hour_seconds)
        if not all(seconds > 0 for seconds in kept):
            raise ValueError(f"retention must be positive seconds, got {kept}")
        if list(kept) != sorted(kept):
            raise ValueError("coarser resolutions must be kept at least as long as finer ones, "
                             f"got raw {kept[0]}, 1m {kept[1]}, 1h {kept[2]}")

    def seconds(self, resolution: int) -> float:
        return {RAW_RESOLUTION: self.raw_seconds, 60: self.minute_seconds,
                3600: self.hour_seconds}[resolution]


# Each level may only lose rows the next coarser level already holds.
_ROLLED_INTO = {RAW_RESOLUTION: 60, 60: 3600, 3600: None}


def apply_retention(engine: Engine, now: float, policy: RetentionPolicy) -> dict[int, int]:
    """Delete intervals past the policy; returns intervals deleted per resolution.

    Rows not yet rolled up into the next level are kept whatever their age (a stalled rollup
    must not turn into data loss); they go on the first run after the rollup catches up.

    Alert history (``alert_events``) is kept as long as the hour rollups (``hour_seconds``,
    400 days by default), the longest-kept data: every range whose SLI can still be read
    has its alerts too. Events at or before ``now - hour_seconds`` are deleted here.

    Request events (``request_events``, one row per request: the bulkiest table) are kept
    as long as the 1-minute rollups (``minute_seconds``, 30 days by default).
    """
    with write_transaction(engine) as conn:
        watermarks = load_watermarks(conn)
        deleted = {resolution: _delete_before(conn, resolution,
                                              _cutoff(now, policy, resolution, coarser,
                                                      watermarks))
                   for resolution, coarser in _ROLLED_INTO.items()}
        prune_events(conn, now - policy.hour_seconds)
        prune_request_events(conn, now - policy.minute_seconds)
        return deleted


def _cutoff(now: float, policy: RetentionPolicy, resolution: int, coarser: int | None,
            watermarks: dict[int, float]) -> float:
    cutoff = now - policy.seconds(resolution)
    if coarser is not None:
        cutoff = min(cutoff, watermarks.get(coarser, -math.inf))
    return cutoff


def _delete_before(conn: Connection, resolution: int, cutoff: float) -> int:
    if math.isinf(cutoff):
        return 0
    targets = select(Target.id)
    for kind, table in VALUE_TABLES.items():
        conn.execute(delete(table).where(
            table.target_id.in_(targets), table.resolution == resolution,
            table.series_id.in_(select(Series.id).where(Series.kind == kind.value)),
            table.end_time <= cutoff))
    result = conn.execute(delete(Interval).where(
        Interval.target_id.in_(targets), Interval.resolution == resolution,
        Interval.end_time <= cutoff))
    return result.rowcount
