"""The monitor's own SLO evaluation: error budget, burn rates and alert conditions per tick.

Each SLO keeps an ``EventHistory`` of its events per minute, so a tick costs the same for a
30-day SLO as for a 1-day one: it reads the minutes closed since the last tick, plus the
minute still open (read afresh every tick, so a page does not wait for the minute to close),
and every window's sum is a difference of running totals.

A minute counts as closed ``settle_seconds`` after its end, when the scrapes that end in it
have reached the store. The first tick loads history: hours of the budget period, then the
minutes of the longest alert window.

Semantics (the generated Prometheus rules in ``monitor.slo.rules`` follow the same):
- error ratio over a window = bad events summed / all events summed, never a mean of ratios;
  burn rate = error ratio / (1 - objective);
- a burn condition holds when the long window has at least ``min_events`` events and both
  windows burn faster than the factor;
- a window without data is no data: not met, not violated; no data for
  ``no_data_after_seconds`` is its own condition.
- Timeslices: each closed slice is one event, good when its ratio reaches
  ``timeslice_target`` (throughput: its rate reaches ``min_per_second``); RatioTimeslices:
  each slice adds its ratio as good events of one. Slices without events are not events.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from monitor.slo.durations import format_duration
from monitor.slo.forecast import Forecast, forecast
from monitor.slo.history import Counts, EventHistory
from monitor.slo.source import SliSource, Step
from monitor.slo.spec import Budgeting, Slo, ThroughputSli
from monitor.slo.windows import (
    NO_DATA_ALERT,
    BurnWindow,
    Severity,
    alert_labels,
    burn_alert,
    burn_windows,
    no_data_labels,
)

logger = logging.getLogger(__name__)

_MINUTE = 60
_HOUR = 3600
DEFAULT_SETTLE_SECONDS = 30.0


class SloState(StrEnum):
    OK = "ok"                # burning no faster than any alert factor
    BURNING = "burning"      # some alert condition holds
    NO_DATA = "no_data"      # no target answered for no_data_after_seconds
    ERROR = "error"          # the SLI could not be read (say why in ``error``)


@dataclass(frozen=True, slots=True)
class AlertCondition:
    """One alert the evaluator asks for, active or not; the alert book tracks its life."""

    labels: dict[str, str]
    annotations: dict[str, str]
    active: bool
    for_seconds: float
    value: float


@dataclass(frozen=True, slots=True)
class WindowBurn:
    window: str                # "1h"
    seconds: float
    events: float
    error_ratio: float         # NaN without events
    burn_rate: float           # NaN without events


@dataclass(frozen=True, slots=True)
class SloStatus:
    name: str
    service: str
    objective: float
    period: str
    evaluated_at: float
    state: SloState
    sli: float                 # good / all over the period so far (NaN without events)
    events: float              # events (requests, or slices) in the period so far
    budget_remaining: float    # fraction of the period's error budget left (may go < 0)
    time_to_exhaustion_seconds: float  # at the shortest window's burn rate; inf if not burning
    burn_rates: tuple[WindowBurn, ...]
    conditions: tuple[AlertCondition, ...]
    error: str | None = None
    forecast: Forecast | None = None  # None when the SLI could not be read


@dataclass
class _Tracked:
    slo: Slo
    windows: tuple[BurnWindow, ...]
    events: EventHistory
    raw: EventHistory | None       # timeslice SLOs: the raw SLI per minute
    closed_through: float | None = None
    window_seconds: tuple[float, ...] = field(default_factory=tuple)
    watching_since: float | None = None  # the first tick


@dataclass(frozen=True, slots=True)
class SloChanges:
    """SLO names by what a reload did to them."""

    added: tuple[str, ...]
    changed: tuple[str, ...]     # spec edited: state built afresh
    removed: tuple[str, ...]     # their alerts resolve through the alert book
    kept: tuple[str, ...]        # spec unchanged: state carried over


@dataclass(frozen=True, slots=True)
class SloPlan:
    tracked: dict[str, _Tracked]
    changes: SloChanges
    base: dict[str, _Tracked]    # the evaluator's SLOs it was planned against


class SloEvaluator:
    """Evaluates many SLOs against one source; ``tick(now)`` returns each SLO's status."""

    def __init__(self, slos: Sequence[Slo], source: SliSource, *,
                 settle_seconds: float = DEFAULT_SETTLE_SECONDS,
                 include_open_minute: bool = True) -> None:
        self.source = source
        self.settle_seconds = settle_seconds
        self.include_open_minute = include_open_minute
        self._tracked = {slo.name: _track(slo) for slo in slos}

    @property
    def slos(self) -> list[Slo]:
        return [t.slo for t in self._tracked.values()]

    def plan_slos(self, slos: Sequence[Slo]) -> SloPlan:
        """What ``apply_slos`` would do to take ``slos`` (a reload), without doing it: an SLO
        whose parsed spec is unchanged keeps its state (history, first tick), a new or
        changed one starts afresh (its first tick loads history from the source), one no
        longer listed is dropped. Raises ValueError (nothing changed) if an SLO is unusable."""
        names = [slo.name for slo in slos]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"SLO names used twice: {duplicates}")
        tracked: dict[str, _Tracked] = {}
        added: list[str] = []
        changed: list[str] = []
        kept: list[str] = []
        for slo in slos:
            old = self._tracked.get(slo.name)
            if old is not None and old.slo == slo:
                tracked[slo.name] = old
                kept.append(slo.name)
            else:
                tracked[slo.name] = _track(slo)
                (added if old is None else changed).append(slo.name)
        removed = [name for name in self._tracked if name not in tracked]
        return SloPlan(tracked, SloChanges(tuple(added), tuple(changed), tuple(removed),
                                           tuple(kept)), self._tracked)

    def apply_slos(self, plan: SloPlan) -> SloChanges:
        """Swap in a plan of ``plan_slos`` at once: a tick in flight finishes on the old set
        (the kept states are the same objects), the next tick reads the new one."""
        if plan.base is not self._tracked:
            raise RuntimeError("the SLO plan was made against another set of SLOs")
        self._tracked = plan.tracked
        return plan.changes

    def replace_slos(self, slos: Sequence[Slo]) -> SloChanges:
        """``plan_slos`` and ``apply_slos`` in one step."""
        return self.apply_slos(self.plan_slos(slos))

    def tick(self, now: float | None = None) -> list[SloStatus]:
        now = time.time() if now is None else now
        statuses = []
        for tracked in self._tracked.values():
            try:
                statuses.append(self._evaluate(tracked, now))
            except Exception as exc:  # one bad SLO must not stop the others
                logger.warning("SLO %s: %s", tracked.slo.name, exc)
                statuses.append(_error_status(tracked, now, f"{type(exc).__name__}: {exc}"))
        return statuses

    def _evaluate(self, tracked: _Tracked, now: float) -> SloStatus:
        slo = tracked.slo
        if tracked.watching_since is None:
            tracked.watching_since = now
        closed_end = math.floor((now - self.settle_seconds) / _MINUTE) * _MINUTE
        self._catch_up(tracked, closed_end, now)
        open_part = Counts()
        sliced = slo.budgeting is not Budgeting.OCCURRENCES
        if self.include_open_minute and not sliced and now > closed_end:
            open_part = _counts(self.source.read(slo, closed_end, now, now - closed_end))
        period_start = _period_start(slo, now)
        period = tracked.events.since(period_start) + open_part
        exact = self.include_open_minute and not sliced
        burns = {seconds: _burn(slo, seconds, _window(tracked.events, seconds,
                                                      now - closed_end if exact else 0.0)
                                + open_part)
                 for seconds in tracked.window_seconds}
        return _status(tracked, now, period, burns, open_part)

    def _catch_up(self, tracked: _Tracked, closed_end: float, now: float) -> None:
        if tracked.closed_through is None:
            self._load_history(tracked, closed_end, now)
        elif closed_end > tracked.closed_through:
            self._append(tracked, self.source.read(tracked.slo, tracked.closed_through,
                                                   closed_end, _MINUTE))
        tracked.closed_through = max(tracked.closed_through or closed_end, closed_end)

    def _load_history(self, tracked: _Tracked, closed_end: float, now: float) -> None:
        """First tick: the budget period in hours, then the alert windows in minutes (timeslice
        SLOs read minutes throughout: each slice is judged on its own)."""
        slo = tracked.slo
        period_start = _period_start(slo, now)
        ring_start = closed_end - tracked.events.minute_capacity * _MINUTE
        minutes_from = ring_start
        if slo.budgeting is Budgeting.OCCURRENCES:
            hours_from = math.floor(period_start / _HOUR) * _HOUR
            hours_to = math.floor(ring_start / _HOUR) * _HOUR
            if hours_to > hours_from:
                for step in self.source.read(slo, hours_from, hours_to, _HOUR):
                    tracked.events.append(round(step.end / _MINUTE), step.good, step.total,
                                          step.has_data)
                minutes_from = hours_to
        else:
            minutes_from = min(ring_start, math.floor(period_start / _HOUR) * _HOUR)
        if closed_end > minutes_from:
            self._append(tracked, self.source.read(slo, minutes_from, closed_end, _MINUTE))

    def _append(self, tracked: _Tracked, steps: Sequence[Step]) -> None:
        slo = tracked.slo
        for step in steps:
            minute = round(step.end / _MINUTE)
            if tracked.events.last_minute is not None and minute <= tracked.events.last_minute:
                continue
            if tracked.raw is None:
                tracked.events.append(minute, step.good, step.total, step.has_data)
                continue
            tracked.raw.append(minute, step.good, step.total, step.has_data)
            assert slo.timeslice_seconds is not None
            slice_minutes = round(slo.timeslice_seconds / _MINUTE)
            good = total = 0.0
            if minute % slice_minutes == 0:
                good, total = _judge_slice(slo, tracked.raw.last(slice_minutes))
            tracked.events.append(minute, good, total, step.has_data)


def _track(slo: Slo) -> _Tracked:
    windows = burn_windows(slo)
    seconds = sorted({s for w in windows for s in (w.long_seconds, w.short_seconds)}
                     | {slo.alerting.no_data_after_seconds})
    for s in seconds:
        if s % _MINUTE:
            raise ValueError(f"SLO {slo.name}: window {s:g}s is not whole minutes")
    ring_minutes = round(max(seconds) / _MINUTE) + 1
    period_hours = math.ceil(slo.window.nominal_seconds / _HOUR) + 26  # a calendar month
    raw = None
    if slo.budgeting is not Budgeting.OCCURRENCES:
        assert slo.timeslice_seconds is not None
        raw = EventHistory(round(slo.timeslice_seconds / _MINUTE) + 1, 1)
    return _Tracked(slo, windows, EventHistory(ring_minutes, period_hours), raw,
                    window_seconds=tuple(seconds))


def _window(events: EventHistory, seconds: float, open_seconds: float) -> Counts:
    """The closed minutes of a window of ``seconds`` whose newest ``open_seconds`` are read
    apart (the open minute): whole minutes, and the share of the oldest minute that falls
    inside, so the window spans exactly ``seconds`` as Prometheus' ``increase()[w]`` does
    (whole minutes plus the open part would span up to a minute and a half more, and resolve
    that much later than Prometheus on the same rules)."""
    span = max(seconds - open_seconds, 0.0) / _MINUTE
    whole = math.floor(span)
    counts = events.last(whole)
    if span > whole:
        counts = counts + (events.last(whole + 1) - counts).scaled(span - whole)
    return counts


def _judge_slice(slo: Slo, raw: Counts) -> tuple[float, float]:
    """(good, total) events of one closed timeslice; (0, 0) when it had no events."""
    if raw.total <= 0:
        return 0.0, 0.0
    ratio = raw.good / raw.total
    if isinstance(slo.sli, ThroughputSli):  # tokens over seconds with data
        return (1.0 if ratio >= slo.sli.min_per_second else 0.0), 1.0
    if slo.budgeting is Budgeting.RATIO_TIMESLICES:
        return ratio, 1.0
    assert slo.timeslice_target is not None
    return (1.0 if ratio >= slo.timeslice_target else 0.0), 1.0


def _counts(steps: Sequence[Step]) -> Counts:
    total = Counts()
    for step in steps:
        minutes = 1.0 if step.has_data else 0.0
        total = total + Counts(step.good, step.total, minutes)
    return total


def _burn(slo: Slo, seconds: float, counts: Counts) -> WindowBurn:
    ratio = counts.error_ratio
    return WindowBurn(format_duration(seconds), seconds, counts.total, ratio,
                      ratio / slo.error_budget)


def _period_start(slo: Slo, now: float) -> float:
    if slo.window.duration_seconds is not None:
        return now - slo.window.duration_seconds
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if slo.window.calendar == "month":
        return day.replace(day=1).timestamp()
    return (day - timedelta(days=day.weekday())).timestamp()


def _status(tracked: _Tracked, now: float, period: Counts, burns: dict[float, WindowBurn],
            open_part: Counts) -> SloStatus:
    slo = tracked.slo
    no_data_window = tracked.events.last(round(slo.alerting.no_data_after_seconds / _MINUTE))
    # "No data for X" is known once X has been watched: by this evaluator since its first
    # tick, or through stored data older than the window (a fresh monitor over an empty store
    # does not raise it at start).
    watched = (now - (tracked.watching_since or now) >= slo.alerting.no_data_after_seconds
               or period.data_minutes > 0)
    no_data = (no_data_window + open_part).data_minutes == 0
    budget_used = period.error_ratio / slo.error_budget if period.total > 0 else math.nan
    remaining = 1.0 - budget_used
    longs = [w.long_seconds for w in tracked.windows]
    outlook = forecast(slo, now, remaining,
                       burns[min(longs)].burn_rate if longs else math.nan,
                       burns[max(longs)].burn_rate if longs else math.nan)
    tte = outlook.time_to_exhaustion_seconds
    tte = math.inf if math.isnan(tte) else tte
    conditions = [_burn_condition(slo, w, burns[w.long_seconds], burns[w.short_seconds],
                                  remaining, tte, no_data)
                  for w in tracked.windows]
    conditions.append(_no_data_condition(slo, no_data and watched))
    state = (SloState.NO_DATA if no_data
             else SloState.BURNING if any(c.active for c in conditions) else SloState.OK)
    return SloStatus(
        slo.name, slo.service, slo.objective, str(slo.window), now, state,
        1.0 - period.error_ratio, period.total, remaining, tte,
        tuple(sorted(burns.values(), key=lambda b: b.seconds)), tuple(conditions),
        forecast=outlook)


def _burn_condition(slo: Slo, window: BurnWindow, long: WindowBurn, short: WindowBurn,
                    remaining: float, tte: float, no_data: bool) -> AlertCondition:
    active = (not no_data and long.events > 0 and long.events >= slo.alerting.min_events
              and long.burn_rate > window.factor and short.burn_rate > window.factor)
    author = burn_alert(slo, window)
    labels = alert_labels(slo, window.severity.value, window.name, author.labels)
    labels["alertname"] = author.name
    what = "page" if window.severity is Severity.PAGE else "ticket"
    annotations = {
        "summary": (f"SLO {slo.name} ({slo.objective:.4%} over {slo.window}) is burning its "
                    f"error budget {_num(long.burn_rate)}x too fast over {long.window} "
                    f"({what} factor {window.factor:g}x)"),
        "burn_rate": _num(long.burn_rate),
        "burn_rate_short": _num(short.burn_rate),
        "factor": f"{window.factor:g}",
        "budget_remaining": _num(remaining),
        "time_to_exhaustion": _seconds(tte),
    }
    if slo.alerting.runbook_url:
        annotations["runbook_url"] = slo.alerting.runbook_url
    if slo.alerting.dashboard_url:
        annotations["dashboard_url"] = slo.alerting.dashboard_url
    annotations.update(author.annotations)
    return AlertCondition(labels, annotations, active, window.for_seconds, long.burn_rate)


def _no_data_condition(slo: Slo, no_data: bool) -> AlertCondition:
    after = format_duration(slo.alerting.no_data_after_seconds)
    labels = alert_labels(slo, Severity.TICKET.value, after, no_data_labels(slo))
    labels["alertname"] = NO_DATA_ALERT
    annotations = {"summary": f"SLO {slo.name}: no target answered for {after}; the SLO "
                              "cannot be judged (not met, not violated)"}
    if slo.alerting.runbook_url:
        annotations["runbook_url"] = slo.alerting.runbook_url
    return AlertCondition(labels, annotations, no_data, 0.0, 1.0 if no_data else 0.0)


def _error_status(tracked: _Tracked, now: float, error: str) -> SloStatus:
    slo = tracked.slo
    return SloStatus(slo.name, slo.service, slo.objective, str(slo.window), now,
                     SloState.ERROR, math.nan, 0.0, math.nan, math.inf, (), (), error)


def _num(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.4g}"


def _seconds(value: float) -> str:
    if math.isinf(value):
        return "never at this rate"
    return format_duration(max(round(value), 1))
