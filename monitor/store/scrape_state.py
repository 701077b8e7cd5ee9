"""Each target's scrapes as the store holds them: its raw intervals' states and errors, read
for the target-down alert (monitor/alerting/target_down.py).

Every read is a range of the intervals' clustered key (target, resolution, end): the scrapes
after a time (the new ones since the previous round), the latest one, and the start of an
outage, found by walking back from its latest scrape to the last one that answered (once per
outage and monitor start: the caller keeps it).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Connection, select

from monitor.collect.snapshot import TargetState
from monitor.store.models import RAW_RESOLUTION, Interval, Target

_DOWN = TargetState.DOWN.value


@dataclass(frozen=True, slots=True)
class Scrape:
    """One scrape's outcome: when it was made (its interval's end), and why it failed."""

    at: float
    up: bool
    error: str | None = None


def target_ids(conn: Connection, names: Collection[str]) -> dict[str, int]:
    """The stored ids of those ``names`` that have a row (a target never scraped has none)."""
    if not names:
        return {}
    rows = conn.execute(select(Target.name, Target.id).where(Target.name.in_(sorted(names))))
    return {name: target_id for name, target_id in rows}


def scrapes_after(conn: Connection, target_id: int, after: float, until: float
                  ) -> list[Scrape]:
    """The target's scrapes made after ``after`` and by ``until``, oldest first."""
    rows = conn.execute(
        select(Interval.end_time, Interval.state, Interval.error)
        .where(Interval.target_id == target_id, Interval.resolution == RAW_RESOLUTION,
               Interval.end_time > after, Interval.end_time <= until)
        .order_by(Interval.end_time))
    return [Scrape(at, state != _DOWN, error) for at, state, error in rows]


def latest_scrape(conn: Connection, target_id: int, until: float) -> Scrape | None:
    """The target's last scrape stored by ``until``; None before its first."""
    row = conn.execute(
        select(Interval.end_time, Interval.state, Interval.error)
        .where(Interval.target_id == target_id, Interval.resolution == RAW_RESOLUTION,
               Interval.end_time <= until)
        .order_by(Interval.end_time.desc()).limit(1)).first()
    return None if row is None else Scrape(row[0], row[1] != _DOWN, row[2])


def outage_start(conn: Connection, target_id: int, failed_at: float) -> float:
    """When the outage that includes the failed scrape at ``failed_at`` began: the time of
    its first failed scrape, the one after the last scrape that answered (or the first one
    stored, when none answered since retention began)."""
    last_up = conn.execute(
        select(Interval.end_time)
        .where(Interval.target_id == target_id, Interval.resolution == RAW_RESOLUTION,
               Interval.end_time < failed_at, Interval.state != _DOWN)
        .order_by(Interval.end_time.desc()).limit(1)).scalar()
    after = [] if last_up is None else [Interval.end_time > last_up]
    first_down = conn.execute(
        select(Interval.end_time)
        .where(Interval.target_id == target_id, Interval.resolution == RAW_RESOLUTION, *after)
        .order_by(Interval.end_time).limit(1)).scalar()
    return failed_at if first_down is None else float(first_down)
