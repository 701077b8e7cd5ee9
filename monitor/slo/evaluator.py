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
- a split SLO (``grouping: [tenant]`` over a ratio or goodput SLI) is judged per group
  (``monitor.slo.groups``), each group from its own events with the same windows and gate:
  its burn alerts are the groups' (labelled ``tenant``), its own status and its no-data
  alert the SLO's as a whole, as the generated rules' ``sum by (tenant)`` has them.
- Timeslices: each closed slice is one event, good when its ratio reaches
  ``timeslice_target`` (throughput: its rate reaches ``min_per_second``); RatioTimeslices:
  each slice adds its ratio as good events of one. Slices without events are not events.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from monitor.slo.durations import format_duration
from monitor.slo.forecast import Forecast, forecast
from monitor.slo.groups import Group, GroupSource, group_of, group_slo, group_text, splits
from monitor.slo.history import Counts, EventHistory
from monitor.slo.steps import (
    Prefetched,
    Read,
    SliSource,
    Step,
    StepArrays,
    WarningSource,
    read_arrays,
)
from monitor.slo.spec import Budgeting, LatencySli, Slo, ThroughputSli
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
# SLOs whose reads are fetched ahead together: bounds what a first tick holds at once (a
# month of hours and days of minutes each) while a thousand SLOs still read in few queries.
READ_AHEAD_SLOS = 1000
# How often a split SLO's groups are listed anew (a new tenant's history is loaded whole when
# it is found, so this delays its first page by at most this much, and never loses events).
GROUPS_REFRESH_SECONDS = 60.0
# How often an SLO's thresholds are checked against the stored bucket edges (a period read),
# and the growth of the period's events that has them read again sooner.
WARNINGS_REFRESH_GROWTH = 1.1
WARNINGS_REFRESH_SECONDS = 3600.0


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
    # Fraction of the error budget of the period's events so far left (may go < 0):
    # 1 - bad / (error budget x events). Over ``observed_seconds`` of history when that is
    # shorter than the period so far (``partial_period``): a young SLO's budget is that of the
    # events seen, never a whole period's budget nor a share of one.
    budget_remaining: float
    time_to_exhaustion_seconds: float  # at the shortest window's burn rate; inf if not burning
    burn_rates: tuple[WindowBurn, ...]
    conditions: tuple[AlertCondition, ...]
    error: str | None = None
    forecast: Forecast | None = None  # None when the SLI could not be read
    # Why the SLI is only a bound (a latency threshold between a target's stored bucket
    # edges: monitor.slo.thresholds); empty when it is exact.
    warnings: tuple[str, ...] = ()
    # A split SLO's group this status is of (its ``name`` is the SLO's): (("tenant", "a"),)
    group: Group = ()
    # A split SLO's status per group, sorted; its ``conditions`` hold their burn alerts.
    groups: tuple[SloStatus, ...] = ()
    # Seconds of the period so far that the stored history covers: from the first step in
    # which a selected target answered (no earlier than the period's start) to now; NaN
    # before any answered.
    observed_seconds: float = math.nan
    # The history began after the period did (a young SLO, or a store holding less than the
    # period): the SLI and budget are those of ``observed_seconds``, not of the period.
    partial_period: bool = False


@dataclass
class _Tracked:
    slo: Slo
    windows: tuple[BurnWindow, ...]
    events: EventHistory
    raw: EventHistory | None       # timeslice SLOs: the raw SLI per minute
    closed_through: float | None = None
    window_seconds: tuple[float, ...] = field(default_factory=tuple)
    watching_since: float | None = None  # the first tick
    warnings: tuple[str, ...] = ()
    warnings_at: float | None = None     # when ``warnings`` were last read
    warnings_events: float = 0.0         # the period's events when they were read
    first_data_at: float | None = None   # start of the first step read where a target answered
    name: str = ""                       # the SLO's name on alerts (a group's: its SLO's)
    group: Group = ()                    # a split SLO's group this tracks
    groups: dict[Group, _Tracked] = field(default_factory=dict)  # a split SLO's, sorted
    groups_at: float | None = None       # when ``groups`` were last listed


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
        self._reader = Prefetched(source)  # the tick's reads, fetched ahead in bulk
        self.settle_seconds = settle_seconds
        self.include_open_minute = include_open_minute
        self._tracked = {slo.name: _track(slo) for slo in slos}
        self._logged_warnings: set[tuple[str, str]] = set()  # see _warnings

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
        statuses: list[SloStatus] = []
        every = list(self._tracked.values())
        for first in range(0, len(every), READ_AHEAD_SLOS):
            chunk = every[first:first + READ_AHEAD_SLOS]
            self._refresh_groups(chunk, now)
            # a split SLO's groups are read with it: one bulk read per range for all of them
            self._prefetch([t for tracked in chunk
                            for t in (tracked, *tracked.groups.values())], now)
            statuses.extend(self._judge(tracked, now) for tracked in chunk)
            self._reader.clear()
        return statuses

    def _judge(self, tracked: _Tracked, now: float) -> SloStatus:
        """The SLO's status; a split SLO's with its groups' and their burn alerts."""
        try:
            status = self._evaluate(tracked, now)
        except Exception as exc:  # one bad SLO must not stop the others
            logger.warning("SLO %s: %s", tracked.slo.name, exc)
            return _error_status(tracked, now, f"{type(exc).__name__}: {exc}")
        if not self._split(tracked):
            return status
        groups = tuple(self._judge(group, now) for group in tracked.groups.values())
        conditions = (*[c for c in status.conditions
                        if c.labels.get("alertname") == NO_DATA_ALERT],
                      *[c for g in groups for c in g.conditions])
        state = (status.state if status.state is SloState.NO_DATA
                 else SloState.BURNING if any(c.active for c in conditions) else SloState.OK)
        return replace(status, state=state, conditions=conditions, groups=groups)

    def _split(self, tracked: _Tracked) -> bool:
        """Whether the SLO is judged per group: split, and its source lists groups."""
        return splits(tracked.slo) and isinstance(self.source, GroupSource)

    def _refresh_groups(self, chunk: Sequence[_Tracked], now: float) -> None:
        """List the groups of the split SLOs among ``chunk`` (each GROUPS_REFRESH_SECONDS):
        a group found for the first time is tracked from then on (its first tick loads its
        history); one no longer found keeps being judged (its windows empty out)."""
        for tracked in chunk:
            if not self._split(tracked) or (tracked.groups_at is not None and
                                            now - tracked.groups_at < GROUPS_REFRESH_SECONDS):
                continue
            assert isinstance(self.source, GroupSource)
            slo = tracked.slo
            tracked.groups_at = now
            try:
                found = self.source.group_values(slo, slo_period_start(slo, now), now)
            except Exception as exc:  # keep the groups known; list them again next tick
                logger.warning("SLO %s: listing its groups failed: %s", slo.name, exc)
                tracked.groups_at = None
                continue
            groups = dict(tracked.groups)
            for values in found:
                group = group_of(slo, values)
                if group not in groups:
                    groups[group] = _track(group_slo(slo, group), slo.name, group)
            tracked.groups = dict(sorted(groups.items()))

    def _prefetch(self, chunk: Sequence[_Tracked], now: float) -> None:
        """Every read these SLOs make this tick, asked of the source at once (a store reads
        each metric once for all of them); a failure leaves each SLO to read, and fail, on its
        own."""
        closed_end = self._closed_end(now)
        reads: list[Read] = []
        for tracked in chunk:
            if tracked.closed_through is None:
                reads.extend(self._history_reads(tracked, closed_end, now))
            elif (catch_up := self._catch_up_read(tracked, closed_end)) is not None:
                reads.append(catch_up)
            if (open_read := self._open_read(tracked, closed_end, now)) is not None:
                reads.append(open_read)
        try:
            self._reader.prefetch(reads)
        except Exception as exc:
            logger.warning("reading %d SLOs ahead failed, reading each: %s", len(reads), exc)
            self._reader.clear()

    def _closed_end(self, now: float) -> float:
        return math.floor((now - self.settle_seconds) / _MINUTE) * _MINUTE

    def _open_read(self, tracked: _Tracked, closed_end: float, now: float) -> Read | None:
        """The minute still open, read afresh every tick (not for timeslice SLOs)."""
        sliced = tracked.slo.budgeting is not Budgeting.OCCURRENCES
        if self.include_open_minute and not sliced and now > closed_end:
            return tracked.slo, closed_end, now, now - closed_end
        return None

    def _evaluate(self, tracked: _Tracked, now: float) -> SloStatus:
        slo = tracked.slo
        if tracked.watching_since is None:
            tracked.watching_since = now
        closed_end = self._closed_end(now)
        self._catch_up(tracked, closed_end, now)
        open_part = Counts()
        if (open_read := self._open_read(tracked, closed_end, now)) is not None:
            open_part = _counts(self._reader.read(*open_read))
            if tracked.first_data_at is None and open_part.data_minutes > 0:
                tracked.first_data_at = closed_end
        period_start = slo_period_start(slo, now)
        period = tracked.events.since(period_start) + open_part
        open_seconds = now - closed_end if open_read is not None else 0.0
        burns = {seconds: _burn(slo, seconds, _window(tracked.events, seconds, open_seconds)
                                + open_part)
                 for seconds in tracked.window_seconds}
        status = _status(tracked, now, period, burns, open_part)
        warnings = self._warnings(tracked, period_start, now, period.total)
        return replace(status, warnings=warnings) if warnings else status

    def _warnings(self, tracked: _Tracked, period_start: float, now: float,
                  events: float) -> tuple[str, ...]:
        """The source's warnings about this SLO, read on the first tick, again at the first
        tick with events if it had none (the buckets are stored with the first events: a
        monitor started before its engines' traffic would otherwise claim an exact SLI for an
        hour), whenever the period's events have grown by a tenth since (the bounds they state
        must be those of the SLI shown beside them: a warning read on the first minutes said
        100% while the SLI read 34%, issue 30), and at least every WARNINGS_REFRESH_SECONDS
        (they read the whole period, so not every tick); each logged once."""
        if not isinstance(tracked.slo.sli, LatencySli) or not isinstance(self.source,
                                                                         WarningSource):
            return ()
        if (tracked.warnings_at is None or now - tracked.warnings_at >= WARNINGS_REFRESH_SECONDS
                or events > tracked.warnings_events * WARNINGS_REFRESH_GROWTH):
            tracked.warnings_at, tracked.warnings_events = now, events
            try:
                tracked.warnings = tuple(self.source.threshold_warnings(
                    tracked.slo, period_start, now))
            except Exception as exc:  # a warning is advice: never fail the SLO for it
                logger.warning("SLO %s: checking its thresholds failed: %s",
                               tracked.slo.name, exc)
            for warning in tracked.warnings:
                # Logged once per SLO and message up to its numbers (the period's SLIs).
                key = (tracked.slo.name, warning.partition(" the true SLI")[0])
                if key not in self._logged_warnings:
                    self._logged_warnings.add(key)
                    logger.warning("%s", warning)
        return tracked.warnings

    def _catch_up(self, tracked: _Tracked, closed_end: float, now: float) -> None:
        if tracked.closed_through is None:
            self._load_history(tracked, closed_end, now)
        elif (catch_up := self._catch_up_read(tracked, closed_end)) is not None:
            steps = read_arrays(self._reader, *catch_up)
            _note_first_data(tracked, steps, _MINUTE)
            self._append(tracked, steps)
        tracked.closed_through = max(tracked.closed_through or closed_end, closed_end)

    @staticmethod
    def _catch_up_read(tracked: _Tracked, closed_end: float) -> Read | None:
        """The minutes closed since the last tick."""
        if tracked.closed_through is None or closed_end <= tracked.closed_through:
            return None
        return tracked.slo, tracked.closed_through, closed_end, _MINUTE

    def _history_reads(self, tracked: _Tracked, closed_end: float, now: float) -> list[Read]:
        """First tick: the budget period in hours, then the alert windows in minutes (timeslice
        SLOs read minutes throughout: each slice is judged on its own)."""
        slo = tracked.slo
        period_start = slo_period_start(slo, now)
        ring_start = closed_end - tracked.events.minute_capacity * _MINUTE
        minutes_from = ring_start
        reads: list[Read] = []
        if slo.budgeting is Budgeting.OCCURRENCES:
            hours_from = math.floor(period_start / _HOUR) * _HOUR
            hours_to = math.floor(ring_start / _HOUR) * _HOUR
            if hours_to > hours_from:
                reads.append((slo, hours_from, hours_to, _HOUR))
                minutes_from = hours_to
        else:
            minutes_from = min(ring_start, math.floor(period_start / _HOUR) * _HOUR)
        if closed_end > minutes_from:
            reads.append((slo, minutes_from, closed_end, _MINUTE))
        return reads

    def _load_history(self, tracked: _Tracked, closed_end: float, now: float) -> None:
        """Reads and appends the history as columns: a month of hours and days of minutes
        per SLO, no object per step."""
        for read in self._history_reads(tracked, closed_end, now):
            steps = read_arrays(self._reader, *read)
            _note_first_data(tracked, steps, read[3])
            if read[3] == _HOUR:
                tracked.events.extend(_minutes_of(steps), steps.good, steps.total,
                                      steps.has_data)
            else:
                self._append(tracked, steps)

    def _append(self, tracked: _Tracked, steps: StepArrays) -> None:
        minutes = _minutes_of(steps)
        # A minute not after the latest one appended (read before) is not appended twice.
        latest = -1 if tracked.events.last_minute is None else tracked.events.last_minute
        before = np.maximum.accumulate(np.concatenate(([latest], minutes[:-1])))
        new = minutes > before
        if not new.all():
            minutes, steps = minutes[new], StepArrays(steps.end[new], steps.good[new],
                                                      steps.total[new], steps.has_data[new])
        if tracked.raw is None:
            tracked.events.extend(minutes, steps.good, steps.total, steps.has_data)
            return
        slo = tracked.slo
        assert slo.timeslice_seconds is not None
        slice_minutes = round(slo.timeslice_seconds / _MINUTE)
        for minute, step in zip(minutes.tolist(), steps.steps(), strict=True):
            tracked.raw.append(minute, step.good, step.total, step.has_data)
            good = total = 0.0
            if minute % slice_minutes == 0:
                good, total = _judge_slice(slo, tracked.raw.last(slice_minutes))
            tracked.events.append(minute, good, total, step.has_data)


def _note_first_data(tracked: _Tracked, steps: StepArrays, step: float) -> None:
    """Keep the start of the first step with data (an hour's start for the hours read: the
    history is then taken as no shorter than it is)."""
    if tracked.first_data_at is None and steps.has_data.any():
        tracked.first_data_at = float(steps.end[int(np.argmax(steps.has_data))]) - step


def _observed(tracked: _Tracked, now: float) -> tuple[float, bool]:
    """(seconds of the period so far the history covers, whether it began after the
    period did): the basis of the SLI and budget reported (issue 30)."""
    if tracked.first_data_at is None:
        return math.nan, False
    period_start = slo_period_start(tracked.slo, now)
    return (max(now - max(period_start, tracked.first_data_at), 0.0),
            tracked.first_data_at > period_start + _MINUTE)


def _minutes_of(steps: StepArrays) -> npt.NDArray[np.int64]:
    """The minute each step ends in (``round``: to the nearest, ties to even)."""
    return np.rint(steps.end / _MINUTE).astype(np.int64)


def _track(slo: Slo, name: str | None = None, group: Group = ()) -> _Tracked:
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
                    window_seconds=tuple(seconds), name=slo.name if name is None else name,
                    group=group)


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


def slo_period_start(slo: Slo, now: float) -> float:
    """Where the SLO's current period began: now - duration, or the calendar month's or
    week's first midnight (UTC)."""
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
                                  remaining, tte, no_data, tracked.name, tracked.group)
                  for w in tracked.windows]
    if not tracked.group:  # a split SLO's no-data alert is the SLO's, as a whole
        conditions.append(_no_data_condition(slo, no_data and watched))
    state = (SloState.NO_DATA if no_data
             else SloState.BURNING if any(c.active for c in conditions) else SloState.OK)
    observed, partial = _observed(tracked, now)
    return SloStatus(
        tracked.name, slo.service, slo.objective, str(slo.window), now, state,
        1.0 - period.error_ratio, period.total, remaining, tte,
        tuple(sorted(burns.values(), key=lambda b: b.seconds)), tuple(conditions),
        forecast=outlook, group=tracked.group, observed_seconds=observed,
        partial_period=partial)


def _burn_condition(slo: Slo, window: BurnWindow, long: WindowBurn, short: WindowBurn,
                    remaining: float, tte: float, no_data: bool, name: str,
                    group: Group = ()) -> AlertCondition:
    """``name`` is the SLO's (a group's copy is named apart); a group's alert carries its
    labels (``slo.labels`` has them) and says so in its summary, as the generated rules'."""
    active = (not no_data and long.events > 0 and long.events >= slo.alerting.min_events
              and long.burn_rate > window.factor and short.burn_rate > window.factor)
    author = burn_alert(slo, window)
    labels = alert_labels(slo, window.severity.value, window.name, author.labels)
    labels["slo"] = name
    labels["alertname"] = author.name
    what = "page" if window.severity is Severity.PAGE else "ticket"
    annotations = {
        "summary": (f"SLO {name}{group_text(group)} ({slo.objective:.4%} over {slo.window}) "
                    "is burning its "
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
    return SloStatus(tracked.name, slo.service, slo.objective, str(slo.window), now,
                     SloState.ERROR, math.nan, 0.0, math.nan, math.inf, (), (), error,
                     group=tracked.group)


def _num(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.4g}"


def _seconds(value: float) -> str:
    if math.isinf(value):
        return "never at this rate"
    return format_duration(max(round(value), 1))
