"""The life of each alert: pending, firing, resolved; persisted, resent, announced once.

Evaluators hand the book the conditions they evaluated (``AlertCondition``: labels,
annotations, active or not). The book keeps, per label set:

- inactive -> pending when a condition becomes active with a ``for`` duration, or straight to
  firing without one; pending -> firing once it held for ``for``; pending -> inactive when it
  stops holding first (never sent);
- firing -> resolved when the condition stops holding (or disappears), and resolved ->
  firing again if it comes back while the resolve is still being announced.

What to send to Alertmanager is ``due(now)``: firing alerts every ``resend_seconds`` (at once
on a change) with endsAt ``hold_seconds`` ahead, so Alertmanager resolves them by itself if the
monitor dies; resolved ones with endsAt = the resolve time, announced for
``resolved_retention_seconds`` and then forgotten. Every change is written to the store, so a
restarted monitor resumes with the same startsAt: Alertmanager sees the same alert, not a new
page. Alerts of an SLO that could not be evaluated (``frozen``) keep their state.

Each change of state is also appended to the alert history (``alert_events``: pending,
firing, resolved, and ``inactive`` for a pending alert that stopped holding), in the same
transaction as the state itself: a restarted book continues from the stored state, so it
neither repeats nor loses an event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from sqlalchemy import delete, select

from monitor.alerting.alertmanager import fingerprint  # Alertmanager's own alert identity
from monitor.slo.evaluator import AlertCondition
from monitor.store.alert_events import AlertEventRow, insert_events
from monitor.store.db import Store
from monitor.store.ids import dialect_insert
from monitor.store.writes import write_transaction
from monitor.store.models import AlertRecord

logger = logging.getLogger(__name__)

DEFAULT_RESEND_SECONDS = 60.0
DEFAULT_RESOLVED_RETENTION_SECONDS = 900.0


class AlertState(StrEnum):
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Alert:
    fingerprint: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: AlertState
    active_at: float              # when the condition began to hold
    fired_at: float | None        # startsAt in Alertmanager
    resolved_at: float | None     # endsAt once resolved
    last_sent_at: float | None
    value: float

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One alert as Alertmanager should see it now."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float
    ends_at: float
    resolved: bool


class AlertBook:
    def __init__(self, store: Store | None = None, *,
                 resend_seconds: float = DEFAULT_RESEND_SECONDS,
                 hold_seconds: float | None = None,
                 resolved_retention_seconds: float = DEFAULT_RESOLVED_RETENTION_SECONDS
                 ) -> None:
        self.store = store
        self.resend_seconds = resend_seconds
        # Prometheus holds for 4 resend intervals; at least 5 minutes here, so a monitor
        # restart does not let Alertmanager resolve (and later re-page) a live alert.
        self.hold_seconds = hold_seconds or max(4 * resend_seconds, 300.0)
        self.resolved_retention_seconds = resolved_retention_seconds
        self._alerts: dict[str, Alert] = {}
        self._changed: set[str] = set()  # fingerprints to send at once and to persist
        self._events: list[AlertEventRow] = []  # history to append at the next save
        # Replicas: whether this one may still write (the active); asked at each save, so
        # that a round finishing just after a step-down does not overwrite the new active's.
        self.may_save: Callable[[], bool] = lambda: True
        if store is not None:
            self._load(store)

    def alerts(self) -> list[Alert]:
        return sorted(self._alerts.values(), key=lambda a: (a.name, sorted(a.labels.items())))

    def update(self, now: float, conditions: Iterable[AlertCondition],
               frozen: Callable[[Mapping[str, str]], bool] = lambda _labels: False
               ) -> list[Alert]:
        """Apply one evaluation round; returns the alerts whose state changed. Alerts not
        among ``conditions`` count as not active unless ``frozen(labels)``."""
        seen: set[str] = set()
        changed: list[Alert] = []
        for condition in conditions:
            fp = fingerprint(condition.labels)
            seen.add(fp)
            new = self._step(now, fp, condition)
            if new is not None:
                changed.append(new)
        for fp, alert in list(self._alerts.items()):
            if fp not in seen and not frozen(alert.labels):
                gone = AlertCondition(alert.labels, alert.annotations, False, 0.0, alert.value)
                new = self._step(now, fp, gone)
                if new is not None:
                    changed.append(new)
        self._expire(now)
        self._save()
        for alert in changed:
            logger.info("alert %s %s %s", alert.name, _brief(alert.labels), alert.state)
        return changed

    def _step(self, now: float, fp: str, condition: AlertCondition) -> Alert | None:
        old = self._alerts.get(fp)
        new = _transition(now, fp, old, condition)
        if new is None:
            if old is not None and old.state is AlertState.PENDING:
                del self._alerts[fp]  # pending that stopped holding: never announced
                self._changed.add(fp)
                self._record(now, old, "inactive", old.state)
            return None
        self._alerts[fp] = new
        if old is None or new.state is not old.state:
            self._changed.add(fp)
            self._record(now, new, new.state.value, None if old is None else old.state)
            return new
        if new != old:
            self._changed.add(fp)  # annotations or value moved: persist, send on schedule
        return None

    def _record(self, now: float, alert: Alert, state: str, previous: AlertState | None
                ) -> None:
        self._events.append(AlertEventRow(
            now, alert.fingerprint, alert.name, state,
            None if previous is None else previous.value, alert.fired_at, alert.value,
            dict(alert.labels), dict(alert.annotations)))

    def due(self, now: float) -> list[Outgoing]:
        """Alerts to send now; marks them sent (the delivery queue retries until they are)."""
        out: list[Outgoing] = []
        for fp, alert in self._alerts.items():
            if alert.state is AlertState.PENDING or alert.fired_at is None:
                continue
            changed = alert.last_sent_at is None or (
                alert.state is AlertState.RESOLVED
                and (alert.resolved_at or 0) > alert.last_sent_at)
            if not changed and now - (alert.last_sent_at or 0) < self.resend_seconds:
                continue
            resolved = alert.state is AlertState.RESOLVED
            ends_at = alert.resolved_at if resolved and alert.resolved_at else (
                now + self.hold_seconds)
            out.append(Outgoing(alert.labels, alert.annotations, alert.fired_at, ends_at,
                                resolved))
            self._alerts[fp] = replace(alert, last_sent_at=now)
            self._changed.add(fp)
        self._save()
        return out

    def _expire(self, now: float) -> None:
        for fp, alert in list(self._alerts.items()):
            if (alert.state is AlertState.RESOLVED and alert.resolved_at is not None
                    and now - alert.resolved_at > self.resolved_retention_seconds):
                del self._alerts[fp]
                self._changed.add(fp)

    def _load(self, store: Store) -> None:
        with store.engine.connect() as conn:
            for row in conn.execute(select(*AlertRecord.__table__.columns)).mappings():
                value = row["value"]
                self._alerts[row["fingerprint"]] = Alert(
                    row["fingerprint"], dict(row["labels"]), dict(row["annotations"]),
                    AlertState(row["state"]), row["active_at"], row["fired_at"],
                    row["resolved_at"], row["last_sent_at"],
                    float("nan") if value is None else value)
        if self._alerts:
            logger.info("restored %d alerts from the store", len(self._alerts))

    def _save(self) -> None:
        if self.store is None or not self._changed or not self.may_save():
            self._changed.clear()
            self._events.clear()  # no store, no history
            return
        # Fenced: a replica that lost the lock without knowing yet saves (and so sends)
        # nothing (monitor/store/fence.py).
        with write_transaction(self.store.engine, fenced=True) as conn:
            insert_events(conn, self._events)
            for fp in sorted(self._changed):
                alert = self._alerts.get(fp)
                if alert is None:
                    conn.execute(delete(AlertRecord).where(AlertRecord.fingerprint == fp))
                    continue
                values = {
                    "labels": alert.labels, "annotations": alert.annotations,
                    "state": alert.state.value, "active_at": alert.active_at,
                    "fired_at": alert.fired_at, "resolved_at": alert.resolved_at,
                    "last_sent_at": alert.last_sent_at,
                    "value": None if alert.value != alert.value else alert.value,
                }
                stmt = dialect_insert(conn, AlertRecord).values(fingerprint=fp, **values)
                conn.execute(stmt.on_conflict_do_update(index_elements=["fingerprint"],
                                                        set_=values))
        # Only once committed: a failed save keeps both for the next round's.
        self._changed.clear()
        self._events.clear()


    # --- replicas (monitor/service/leader.py): only the active saves, a standby reads ---

    def reload(self) -> None:
        """Replace the in-memory alerts with the store's: a standby follows what the active
        decided, and a replica that becomes active must not trust the copy it held."""
        if self.store is not None:
            self._alerts, self._changed = read_alerts(self.store), set()
            # History queued by a round that was never saved belongs to the state just
            # dropped: the store's history already ends where the store's alerts are.
            self._events.clear()

    def announce_all(self) -> None:
        """Have the next ``due`` send every announced alert again (a new active replica:
        Alertmanager deduplicates identical alerts, so a page the old active may not have
        delivered is not lost, and one it did deliver is not repeated)."""
        for fp, alert in self._alerts.items():
            if alert.fired_at is not None:
                self._alerts[fp] = replace(alert, last_sent_at=None)


def read_alerts(store: Store) -> dict[str, Alert]:
    """The alerts persisted in the store, by fingerprint."""
    alerts: dict[str, Alert] = {}
    with store.engine.connect() as conn:
        for row in conn.execute(select(*AlertRecord.__table__.columns)).mappings():
            value = row["value"]
            alerts[row["fingerprint"]] = Alert(
                row["fingerprint"], dict(row["labels"]), dict(row["annotations"]),
                AlertState(row["state"]), row["active_at"], row["fired_at"],
                row["resolved_at"], row["last_sent_at"],
                float("nan") if value is None else value)
    return alerts


def _transition(now: float, fp: str, old: Alert | None, c: AlertCondition) -> Alert | None:
    """The alert after this round, or None when it is (or goes back to) inactive."""
    if c.active:
        if old is None or old.state is AlertState.RESOLVED:
            if c.for_seconds > 0 and old is None:
                return Alert(fp, c.labels, c.annotations, AlertState.PENDING, now, None, None,
                             None, c.value)
            # A resolve still being announced that comes back fires again, as a new alert.
            return Alert(fp, c.labels, c.annotations, AlertState.FIRING, now, now, None,
                         None, c.value)
        if old.state is AlertState.PENDING and now - old.active_at >= c.for_seconds:
            return replace(old, state=AlertState.FIRING, fired_at=now,
                           annotations=c.annotations, value=c.value)
        return replace(old, annotations=c.annotations, value=c.value)
    if old is None or old.state is AlertState.PENDING:
        return None
    if old.state is AlertState.FIRING:
        return replace(old, state=AlertState.RESOLVED, resolved_at=now)
    return old


def _brief(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
