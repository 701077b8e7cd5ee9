"""The monitor's target-down alert (``InferwatchTargetDown``): a ticket, by default, for a
configured target whose every scrape failed for ``alerting.target_down.for_seconds``, as
Prometheus' ``up == 0`` with a ``for:``; the generated rules carry the same alert
(monitor/slo/target_down_rules.py).

Each round reads the scrapes the store received since the previous one, per target of the
config in force (a target the config does not name never alerts, whatever the store holds):

- its latest scrape failed: the condition holds, and the alert book takes it from pending to
  firing after ``for_seconds`` of rounds;
- unless a scrape answered since the previous round saw it down: then it does not hold this
  round, so the alert resolves (or a pending one is dropped) even when the target failed
  again just after, and a new outage starts over.

The annotations say since when (the outage's first failed scrape, found in the store, so a
restarted monitor says the same) and the latest scrape's error. The condition's value is 0,
the value of Prometheus' ``up`` when its alert fires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import Connection

from monitor.collect.config import MonitorConfig, TargetConfig
from monitor.collect.target_down_config import TARGET_DOWN_ALERT, TargetDownConfig
from monitor.slo.evaluator import AlertCondition
from monitor.store import Store
from monitor.store.scrape_state import latest_scrape, outage_start, scrapes_after, target_ids

_MAX_ERROR_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class TargetOutage:
    """A target that answers no scrape: since its first failed scrape, and why the latest
    failed."""

    target: str
    since: float
    last_attempt: float
    error: str


@dataclass(frozen=True, slots=True)
class _Followed:
    read_until: float              # the latest scrape read from the store
    outage: TargetOutage | None    # None while it answers


class TargetDownMonitor:
    def __init__(self, store: Store, config: Callable[[], MonitorConfig]) -> None:
        self.store = store
        self.config = config
        self.outages: dict[str, TargetOutage] = {}  # the targets down at the latest round
        self._followed: dict[str, _Followed] = {}
        self._ids: dict[str, int] = {}

    def tick(self, now: float) -> list[AlertCondition]:
        """The condition of every configured target the store has scrapes of, by ``now``."""
        config = self.config()
        settings = config.alerting.target_down
        if not settings.enabled:
            self._followed, self.outages = {}, {}
            return []
        targets = {t.name: t for t in config.targets}
        with self.store.engine.connect() as conn:
            self._ids.update(target_ids(conn, targets.keys() - self._ids.keys()))
            steps = {name: self._step(conn, name, now) for name in targets
                     if name in self._ids}
        self._followed = {name: f for name, (f, _) in steps.items() if f is not None}
        self.outages = {name: f.outage for name, f in self._followed.items()
                        if f.outage is not None}
        return [condition(targets[name], followed.outage, answered, settings)
                for name, (followed, answered) in steps.items() if followed is not None]

    def _step(self, conn: Connection, name: str, now: float) -> tuple[_Followed | None, bool]:
        """What the store says of the target by ``now``, and whether a scrape answered
        since the previous round saw it down."""
        target_id = self._ids[name]
        old = self._followed.get(name)
        if old is None:  # first round (or first scrape): the latest scrape, and the outage's
            latest = latest_scrape(conn, target_id, now)  # start if it failed
            if latest is None:
                return None, False
            outage = None if latest.up else TargetOutage(
                name, outage_start(conn, target_id, latest.at), latest.at, latest.error or "")
            return _Followed(latest.at, outage), False
        outage, answered, read_until = old.outage, False, old.read_until
        for scrape in scrapes_after(conn, target_id, old.read_until, now):
            read_until = scrape.at
            if scrape.up:
                answered = answered or old.outage is not None  # it ended the outage seen
                outage = None
            else:
                since = scrape.at if outage is None else outage.since
                outage = TargetOutage(name, since, scrape.at, scrape.error or "")
        return _Followed(read_until, outage), answered


def condition(target: TargetConfig, outage: TargetOutage | None, answered: bool,
              settings: TargetDownConfig) -> AlertCondition:
    labels = {"alertname": TARGET_DOWN_ALERT, "target": target.name,
              "severity": settings.severity}
    active = outage is not None and not answered
    annotations = annotate(target, outage, settings) if outage is not None and active else {}
    return AlertCondition(labels, annotations, active, settings.for_seconds, 0.0)


def annotate(target: TargetConfig, outage: TargetOutage,
             settings: TargetDownConfig) -> dict[str, str]:
    """Text that stays the same while the outage lasts (only the error may change): the book
    stores an alert again whenever its annotations move."""
    since = _utc(outage.since)
    error = outage.error or "no reason given"
    if len(error) > _MAX_ERROR_CHARS:
        error = error[:_MAX_ERROR_CHARS] + "..."
    return {
        "summary": f"Target {target.name} is down since {since}: {error}",
        "description": (f"Every scrape of {target.name} ({target.url}) since {since} failed; "
                        f"the latest: {error}. While it is down its requests are missing from "
                        "every SLO it counts in."),
        "down_since": since,
        "last_error": error,
        **settings.links(target.name),
    }


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
