"""Alert history in the store: each change of an alert's state, appended by the alert book in
the transaction that saves the new state (so a restart neither loses nor repeats one), read
newest first by the API, pruned by retention (``retention.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    RowMapping,
    delete,
    func,
    insert,
    select,
)

from monitor.store.models import AlertEvent

EVENT_STATES = ("pending", "firing", "resolved", "inactive")


@dataclass(frozen=True, slots=True)
class AlertEventRow:
    at: float
    fingerprint: str
    alertname: str
    state: str                    # the state entered; "inactive": a pending that stopped
    previous_state: str | None    # None: the alert was new
    fired_at: float | None        # the episode's startsAt
    value: float                  # NaN when unknown
    labels: dict[str, str]
    annotations: dict[str, str]
    id: int | None = None         # set once stored

    @property
    def slo(self) -> str | None:
        return self.labels.get("slo")


@dataclass(frozen=True, slots=True)
class EventFilter:
    slo: str | None = None
    alertname: str | None = None
    start: float | None = None    # at >= start
    end: float | None = None      # at < end

    def clauses(self) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = []
        if self.slo is not None:
            found.append(AlertEvent.slo == self.slo)
        if self.alertname is not None:
            found.append(AlertEvent.alertname == self.alertname)
        if self.start is not None:
            found.append(AlertEvent.at >= self.start)
        if self.end is not None:
            found.append(AlertEvent.at < self.end)
        return found


def insert_events(conn: Connection, events: Sequence[AlertEventRow]) -> None:
    """Append ``events`` (one executemany) in the caller's transaction."""
    if not events:
        return
    conn.execute(insert(AlertEvent), [
        {"at": e.at, "fingerprint": e.fingerprint, "alertname": e.alertname, "slo": e.slo,
         "state": e.state, "previous_state": e.previous_state, "fired_at": e.fired_at,
         "value": e.value if math.isfinite(e.value) else None, "labels": e.labels,
         "annotations": e.annotations} for e in events])


def read_events(engine: Engine, where: EventFilter, limit: int = 100, offset: int = 0
                ) -> tuple[list[AlertEventRow], int]:
    """One page of the events ``where`` selects, newest first (ties: the later recorded
    first), and how many it selects in all."""
    clauses = where.clauses()
    query = (select(*_COLUMNS).where(*clauses)
             .order_by(AlertEvent.at.desc(), AlertEvent.id.desc()).limit(limit).offset(offset))
    with engine.connect() as conn:
        rows = [_row(r) for r in conn.execute(query).mappings()]
        total = conn.scalar(select(func.count()).select_from(AlertEvent).where(*clauses))
    return rows, int(total or 0)


def prune_events(conn: Connection, cutoff: float) -> int:
    """Delete the events at or before ``cutoff``; returns how many."""
    return conn.execute(delete(AlertEvent).where(AlertEvent.at <= cutoff)).rowcount


_COLUMNS = (AlertEvent.id, AlertEvent.at, AlertEvent.fingerprint, AlertEvent.alertname,
            AlertEvent.state, AlertEvent.previous_state, AlertEvent.fired_at,
            AlertEvent.value, AlertEvent.labels, AlertEvent.annotations)


def _row(r: RowMapping) -> AlertEventRow:
    value = r["value"]
    return AlertEventRow(r["at"], r["fingerprint"], r["alertname"], r["state"],
                         r["previous_state"], r["fired_at"],
                         math.nan if value is None else float(value), dict(r["labels"] or {}),
                         dict(r["annotations"] or {}), r["id"])
