"""The alert history on the pages: an SLO's firing episodes over its period (a timeline strip
and a table) and the latest events of every alert, read from the store as the history route
reads it and converted by the API's own ``alert_event_out``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote

from monitor.api.convert import alert_event_out, alert_out
from monitor.api.schemas import AlertEventOut, AlertOut
from monitor.api.state import ServiceState
from monitor.store.alert_events import EventFilter, read_events
from monitor.ui import fmt, svg

RECENT_EVENTS: Final = 100      # the alerts page's "Recent history"
MAX_PERIOD_EVENTS: Final = 5000  # an SLO page reads at most this many (the newest)


@dataclass(frozen=True)
class Episode:
    """One firing of one alert: from its firing event (or its startsAt) to its resolve."""

    fingerprint: str
    alertname: str
    severity: str
    window: str
    fired_at: float
    resolved_at: float | None     # None: still firing
    duration_seconds: float       # to the resolve, or to now
    dashboard_url: str | None
    alertmanager_filter: str      # the URL-encoded matchers of Alertmanager's alert list

    @property
    def key(self) -> str:
        return f"{self.fingerprint}@{self.fired_at!r}"

    @property
    def duration(self) -> str:
        return fmt.duration(self.duration_seconds)


@dataclass
class SloHistory:
    start: float
    end: float
    events: list[AlertEventOut] = field(default_factory=list)  # newest first
    total: int = 0                                             # events in the period
    episodes: list[Episode] = field(default_factory=list)      # newest first
    timeline: str = ""


def recent(state: ServiceState, limit: int = RECENT_EVENTS) -> list[AlertEventOut]:
    """The latest ``limit`` events of every alert, newest first."""
    rows, _ = read_events(state.store.engine, EventFilter(), limit, 0)
    return [alert_event_out(r) for r in rows]


def slo_history(state: ServiceState, name: str, period_seconds: float, now: float
                ) -> SloHistory:
    """The SLO's alert events since ``now - period_seconds`` and the episodes they make,
    with those firing now (from the book) that began before it."""
    start = now - period_seconds
    rows, total = read_events(state.store.engine, EventFilter(slo=name, start=start),
                              MAX_PERIOD_EVENTS, 0)
    events = [alert_event_out(r) for r in rows]
    book = state.alerting.book.alerts() if state.alerting is not None else []
    firing = [alert_out(a) for a in book
              if a.labels.get("slo") == name and a.state.value == "firing"]
    found = episodes(events, firing, now)
    return SloHistory(start, now, events, total, found, svg.timeline(
        lanes(found), start, now, "alert history"))


def episodes(events: list[AlertEventOut], firing: list[AlertOut], now: float
             ) -> list[Episode]:
    """Pair each firing event with its resolve (by fingerprint and startsAt); a resolve whose
    firing is older than the events, or an alert firing now without a firing event among
    them, makes an episode too. Newest first."""
    spans: dict[tuple[str, float], tuple[AlertEventOut | AlertOut, float | None]] = {}
    for event in sorted(events, key=lambda e: (e.at, e.id)):
        if event.fired_at is None:
            continue  # pending or dropped: never fired
        key = (event.fingerprint, event.fired_at)
        if event.state == "firing":
            spans.setdefault(key, (event, None))
        elif event.state == "resolved":
            spans[key] = (spans.get(key, (event, None))[0], event.at)
    for alert in firing:
        if alert.fired_at is not None:
            spans.setdefault((alert.fingerprint, alert.fired_at), (alert, None))
    found = [_episode(source, fired_at, resolved_at, now)
             for (_, fired_at), (source, resolved_at) in spans.items()]
    return sorted(found, key=lambda e: (e.fired_at, e.fingerprint), reverse=True)


def _episode(source: AlertEventOut | AlertOut, fired_at: float, resolved_at: float | None,
             now: float) -> Episode:
    labels = source.labels
    matchers = ",".join(f'{k}="{labels[k]}"' for k in ("alertname", "slo", "window")
                        if k in labels)
    return Episode(source.fingerprint, source.alertname, labels.get("severity", ""),
                   labels.get("window", ""), fired_at, resolved_at,
                   max((resolved_at if resolved_at is not None else now) - fired_at, 0.0),
                   source.annotations.get("dashboard_url"),
                   quote("{" + matchers + "}", safe=""))


def lanes(found: list[Episode]) -> list[tuple[str, str, list[tuple[float, float | None]]]]:
    """One timeline lane per alert (name, severity, window): its label, its severity (the
    lane's class) and its firing intervals (end None: still firing)."""
    grouped: dict[tuple[str, str, str], list[tuple[float, float | None]]] = {}
    for e in sorted(found, key=lambda e: e.fired_at):
        grouped.setdefault((e.severity, e.window, e.alertname), []).append(
            (e.fired_at, e.resolved_at))
    return [(f"{window} {severity}".strip() or alertname, severity, spans)
            for (severity, window, alertname), spans in sorted(grouped.items())]
