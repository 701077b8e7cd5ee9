"""An SLO's compliance over a chosen range: totals, a series per step, burn rates, alert periods.

``build_report(slo, source, start, end)`` reads the SLI once, in bins of ``resolution_seconds``
(minutes, as the evaluator reads them; for ranges past ~69 days the greatest common divisor of
the step, the timeslice, the range and every alert window, so each window is a whole number of
bins), from a lead-in of the longest window before ``start`` so that the first points' burn
rates see a full window. It follows the evaluator's semantics
(``monitor.slo.evaluator``): ratios are bad events summed over all events summed; burn rate =
error ratio / (1 - objective); a window or step without events has no ratio (null, never 0);
timeslice SLOs judge each closed slice with the evaluator's own ``_judge_slice``, from minutes
as the evaluator reads them, and the slice counts as one event at its end.

The range is aligned to whole minutes (whole slices for timeslice SLOs): ``start`` rounds
down, ``end`` is clipped to ``now`` and rounds down, so the report holds closed minutes only.

Choices a reader of Sloth / Pyrra dashboards should know:

- Budget: the range's own. Its allowed bad events are the error budget times the events of the
  range; ``budget_consumed`` is bad / allowed. For a range equal to the SLO's period this is
  the period's budget; for a shorter one it says how the range spent budget at its own pace.
- Burn-down (``series.budget_remaining``): at each step end, 1 - bad so far / (error budget x
  events so far), both cumulated from ``start``: what the evaluator would have reported had the
  period begun at ``start``. It ends at ``totals.budget_remaining`` and is null before the
  first event. Early points move a lot on few events; it is not forced monotone (a burn-down
  against the whole range's events would need the future), and it is not Pyrra's rolling
  period ending at each point (that reads a whole period of lead-in per report).
- Burn rates: each alert window's long and short window ending at each step end.
- Burn intervals: the condition (long window events >= ``min_events``, data within
  ``no_data_after``, long and short burn rates above the factor) evaluated at every bin start
  in [start, end); an interval runs from the first evaluation where it held to the first where
  it no longer did. ``for`` durations are not applied: these are conditions, not alerts.
- No-data intervals: bins in which no selected target answered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from monitor.slo.durations import format_duration
from monitor.slo.evaluator import _judge_slice
from monitor.slo.forecast import Forecast, forecast
from monitor.slo.history import Counts
from monitor.slo.report_model import (
    BurnInterval,
    Interval,
    SloReport,
    SloSummary,
    StepSeries,
    Totals,
    WindowBurnSeries,
)
from monitor.slo.steps import SliSource, StepArrays, WarningSource, read_arrays
from monitor.slo.spec import (
    AvailabilitySli,
    Budgeting,
    GoodputSli,
    LatencySli,
    RatioSli,
    Slo,
    ThroughputSli,
)
from monitor.slo.windows import BurnWindow, burn_windows

__all__ = ["BurnInterval", "Interval", "SloReport", "SloSummary", "StepSeries", "Totals",
           "WindowBurnSeries", "build_report", "describe_sli"]

MINUTE: Final = 60
MAX_POINTS: Final = 2000
DEFAULT_MAX_POINTS: Final = 300
# Bins read per report: minutes up to ~69 days with the lead-in, then coarser bins (30 days
# of 5-minute bins is 8,640); bounds a request's memory and time.
MAX_MINUTE_BINS: Final = 100_000
MAX_READ_BINS: Final = 300_000
_NICE_STEP_MINUTES: Final = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
_LATENCY_NAMES: Final = {"ttft": "time to first token", "itl": "inter-token latency",
                         "tpot": "time per output token", "e2e": "end-to-end latency"}

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _Grid:
    """Bins of ``resolution`` seconds from ``read_start`` (the lead-in) to ``end``; index j is
    the time read_start + j * resolution, bin k covers (time(k), time(k + 1)]."""

    read_start: float
    start: float
    end: float
    step: float
    resolution: float

    def index(self, t: float) -> int:
        return round((t - self.read_start) / self.resolution)

    def time(self, j: int) -> float:
        return self.read_start + j * self.resolution

    @property
    def num_bins(self) -> int:
        return self.index(self.end)

    def step_indices(self) -> list[int]:
        num_steps = math.ceil((self.end - self.start) / self.step)
        return [self.index(min(self.start + (k + 1) * self.step, self.end))
                for k in range(num_steps)]


@dataclass(frozen=True, slots=True)
class _Cumulative:
    """Running sums of good, total and bins with data: any window's sum is a difference."""

    good: Floats
    total: Floats
    data: Floats

    def window(self, ends: npt.NDArray[np.int64], bins: int) -> tuple[Floats, Floats, Floats]:
        starts = np.maximum(ends - bins, 0)
        return (self.good[ends] - self.good[starts], self.total[ends] - self.total[starts],
                self.data[ends] - self.data[starts])


def build_report(slo: Slo, source: SliSource, start: float, end: float,
                 step: float | None = None, *, now: float | None = None) -> SloReport:
    """The compliance report of ``slo`` over [start, end] (Unix seconds) in steps of ``step``
    seconds (default: whole minutes giving at most 300 points). Raises ValueError on a range
    or step the report cannot honour."""
    windows = burn_windows(slo)
    grid = _grid(slo, windows, start, end, step, time.time() if now is None else now)
    good, total, data = _read_bins(slo, source, grid)
    cumulative = _Cumulative(*(np.concatenate(([0.0], np.cumsum(a)))
                               for a in (good, total, data)))
    steps = np.asarray(grid.step_indices(), dtype=np.int64)
    first = grid.index(grid.start)
    totals = _totals(slo, cumulative, first, grid.num_bins)
    burns = tuple(_window_burn(slo, w, cumulative, grid, steps) for w in windows)
    return SloReport(
        _summary(slo), grid.start, grid.end, grid.step, grid.resolution, totals,
        _series(slo, cumulative, grid, first, steps), burns,
        _burn_intervals(slo, windows, cumulative, grid),
        tuple(Interval(a, b) for a, b in _runs(data[first:] == 0, grid.start, grid.resolution)),
        _forecast(slo, grid.end, totals, burns), _warnings(slo, source, grid.start, grid.end))


def _warnings(slo: Slo, source: SliSource, start: float, end: float) -> tuple[str, ...]:
    if not isinstance(source, WarningSource):
        return ()
    return tuple(source.threshold_warnings(slo, start, end))


def _forecast(slo: Slo, end: float, totals: Totals,
              burns: Sequence[WindowBurnSeries]) -> Forecast:
    """The budget's outlook at the report's end: current burn from the shortest long window,
    sustained from the longest (as the evaluator does)."""
    if not burns:
        return forecast(slo, end, totals.budget_remaining, math.nan, math.nan)
    shortest = min(burns, key=lambda b: b.long_seconds)
    longest = max(burns, key=lambda b: b.long_seconds)
    return forecast(slo, end, totals.budget_remaining, shortest.long[-1], longest.long[-1])


def _grid(slo: Slo, windows: Sequence[BurnWindow], start: float, end: float,
          step: float | None, now: float) -> _Grid:
    if not (math.isfinite(start) and math.isfinite(end) and end > start):
        raise ValueError(f"the range must have end after start, got start={start} end={end}")
    unit = float(slo.timeslice_seconds or MINUTE)
    aligned_start = math.floor(start / unit) * unit
    aligned_end = math.floor(min(end, now) / unit) * unit
    if aligned_end <= aligned_start:
        raise ValueError(f"the range [{start:g}, {end:g}] holds no whole {format_duration(unit)} "
                         f"closed before now ({now:g})")
    span = aligned_end - aligned_start
    step = _default_step(span, unit) if step is None else _checked_step(step, unit, span)
    lead_seconds = max([w.long_seconds for w in windows] + [slo.alerting.no_data_after_seconds])
    lead_seconds = math.ceil(lead_seconds / unit) * unit
    resolution = _resolution(slo, windows, (step, span), lead_seconds)
    grid = _Grid(aligned_start - lead_seconds, aligned_start, aligned_end, step, resolution)
    if grid.num_bins > MAX_READ_BINS:
        raise ValueError(f"the range with its {format_duration(lead_seconds)} lead-in is "
                         f"{grid.num_bins} bins of {format_duration(resolution)}, more than "
                         f"{MAX_READ_BINS}; report a shorter range")
    return grid


def _resolution(slo: Slo, windows: Sequence[BurnWindow], step_and_span: tuple[float, float],
                lead_seconds: float) -> float:
    """Minutes while the read stays short; beyond, the longest bin that divides the step,
    the timeslice, the range and every window (burn intervals are then exact to that bin)."""
    slices = [] if slo.timeslice_seconds is None else [slo.timeslice_seconds]
    lengths = [*step_and_span, slo.alerting.no_data_after_seconds, *slices]
    lengths += [s for w in windows for s in (w.long_seconds, w.short_seconds)]
    minutes = [_whole_minutes(slo, s) for s in lengths]  # checks every window
    if (step_and_span[1] + lead_seconds) / MINUTE <= MAX_MINUTE_BINS:
        return float(MINUTE)
    return float(MINUTE * math.gcd(*minutes))


def _whole_minutes(slo: Slo, seconds: float) -> int:
    if seconds % MINUTE:
        raise ValueError(f"SLO {slo.name}: window {seconds:g}s is not whole minutes")
    return round(seconds / MINUTE)


def _default_step(span: float, unit: float) -> float:
    """The shortest round step giving at most DEFAULT_MAX_POINTS points, a multiple of the
    timeslice (whole days beyond one day)."""
    for minutes in _NICE_STEP_MINUTES:
        step = minutes * MINUTE
        if step % unit == 0 and math.ceil(span / step) <= DEFAULT_MAX_POINTS:
            return float(step)
    days = math.ceil(span / DEFAULT_MAX_POINTS / 86400)
    return float(math.ceil(days * 86400 / unit) * unit)


def _checked_step(step: float, unit: float, span: float) -> float:
    if not (math.isfinite(step) and step >= MINUTE):
        raise ValueError(f"step must be at least {MINUTE} seconds, got {step}")
    if step % MINUTE:
        raise ValueError(f"step must be whole minutes, got {step:g} seconds")
    if step % unit:
        raise ValueError(f"step must be a multiple of the {format_duration(unit)} timeslice, "
                         f"got {format_duration(step)}")
    if math.ceil(span / step) > MAX_POINTS:
        raise ValueError(f"{math.ceil(span / step)} points of {format_duration(step)} is more "
                         f"than {MAX_POINTS}; choose a longer step or a shorter range")
    return float(step)


def _read_bins(slo: Slo, source: SliSource, grid: _Grid) -> tuple[Floats, Floats, Floats]:
    """(good, total, has data) per bin, the events of timeslice SLOs being judged slices."""
    if slo.budgeting is Budgeting.OCCURRENCES:
        steps = read_arrays(source, slo, grid.read_start, grid.end, grid.resolution)
        return _place(steps, grid.read_start, grid.resolution, grid.num_bins)
    assert slo.timeslice_seconds is not None  # the model requires it when sliced
    num_minutes = round((grid.end - grid.read_start) / MINUTE)
    minutes = read_arrays(source, slo, grid.read_start, grid.end, MINUTE)
    raw_good, raw_total, raw_data = _place(minutes, grid.read_start, MINUTE, num_minutes)
    per_slice = round(slo.timeslice_seconds / MINUTE)
    per_bin = round(grid.resolution / MINUTE)
    good, total = np.zeros(grid.num_bins), np.zeros(grid.num_bins)
    slice_good = raw_good.reshape(-1, per_slice).sum(axis=1)
    slice_total = raw_total.reshape(-1, per_slice).sum(axis=1)
    bins_per_slice = per_slice // per_bin
    for k, (g, t) in enumerate(zip(slice_good.tolist(), slice_total.tolist())):
        last_bin = (k + 1) * bins_per_slice - 1  # a slice is an event when it closes
        good[last_bin], total[last_bin] = _judge_slice(slo, Counts(g, t))
    data = raw_data.reshape(-1, per_bin).max(axis=1)
    return good, total, data


def _place(steps: StepArrays, start: float, width: float,
           count: int) -> tuple[Floats, Floats, Floats]:
    """Arrays of ``count`` bins from the steps read, each in the bin holding its end (a
    source may leave steps out); steps in one bin add up in their order."""
    good, total, data = np.zeros(count), np.zeros(count), np.zeros(count)
    k = np.ceil((steps.end - start) / width - 1e-9).astype(np.int64) - 1
    inside = (k >= 0) & (k < count)
    k = k[inside]
    np.add.at(good, k, steps.good[inside])
    np.add.at(total, k, steps.total[inside])
    np.maximum.at(data, k, steps.has_data[inside].astype(np.float64))
    return good, total, data


def _ratio(bad: Floats, total: Floats) -> Floats:
    """bad / total, NaN where there were no events."""
    out = np.full(len(total), math.nan)
    np.divide(bad, total, out=out, where=total > 0)
    return out


def _bad(good: Floats, total: Floats) -> Floats:
    return np.maximum(total - good, 0.0)


def _totals(slo: Slo, cumulative: _Cumulative, first: int, last: int) -> Totals:
    good = float(cumulative.good[last] - cumulative.good[first])
    events = float(cumulative.total[last] - cumulative.total[first])
    bad = max(events - good, 0.0)
    allowed = slo.error_budget * events
    if events <= 0:
        return Totals(events, good, bad, math.nan, None, allowed, math.nan, math.nan)
    consumed = bad / allowed
    # Met when the bad events stayed within those allowed (the same as SLI >= objective,
    # without the rounding of 1 - bad / events).
    return Totals(events, good, bad, 1.0 - bad / events, consumed <= 1.0 + 1e-9, allowed,
                  consumed, 1.0 - consumed)


def _series(slo: Slo, cumulative: _Cumulative, grid: _Grid, first: int,
            steps: npt.NDArray[np.int64]) -> StepSeries:
    previous = np.concatenate(([first], steps[:-1]))
    good = cumulative.good[steps] - cumulative.good[previous]
    total = cumulative.total[steps] - cumulative.total[previous]
    so_far_good = cumulative.good[steps] - cumulative.good[first]
    so_far_total = cumulative.total[steps] - cumulative.total[first]
    used = _ratio(_bad(so_far_good, so_far_total), so_far_total) / slo.error_budget
    return StepSeries(tuple(grid.time(int(j)) for j in steps), _floats(good), _floats(total),
                      _floats(1.0 - _ratio(_bad(good, total), total)), _floats(1.0 - used))


def _burn_rates(slo: Slo, cumulative: _Cumulative, ends: npt.NDArray[np.int64], seconds: float,
                grid: _Grid) -> tuple[Floats, Floats, Floats]:
    """(burn rate, events, bins with data) over the window of ``seconds`` ending at each index."""
    good, total, data = cumulative.window(ends, round(seconds / grid.resolution))
    return _ratio(_bad(good, total), total) / slo.error_budget, total, data


def _window_burn(slo: Slo, window: BurnWindow, cumulative: _Cumulative, grid: _Grid,
                 steps: npt.NDArray[np.int64]) -> WindowBurnSeries:
    long, _, _ = _burn_rates(slo, cumulative, steps, window.long_seconds, grid)
    short, _, _ = _burn_rates(slo, cumulative, steps, window.short_seconds, grid)
    return WindowBurnSeries(window.name, window.severity.value, window.long_seconds,
                            window.short_seconds, window.factor, _floats(long), _floats(short))


def _burn_intervals(slo: Slo, windows: Sequence[BurnWindow], cumulative: _Cumulative,
                    grid: _Grid) -> tuple[BurnInterval, ...]:
    """Where each window's condition held, evaluated as the evaluator does at every bin start
    of the range (the state from there to the next bin)."""
    at = np.arange(grid.index(grid.start), grid.num_bins, dtype=np.int64)
    _, _, answered = _burn_rates(slo, cumulative, at, slo.alerting.no_data_after_seconds, grid)
    intervals = []
    for window in windows:
        long, events, _ = _burn_rates(slo, cumulative, at, window.long_seconds, grid)
        short, _, _ = _burn_rates(slo, cumulative, at, window.short_seconds, grid)
        with np.errstate(invalid="ignore"):  # NaN (no events) compares False: not burning
            held = ((answered > 0) & (events > 0) & (events >= slo.alerting.min_events)
                    & (long > window.factor) & (short > window.factor))
        intervals += [BurnInterval(window.name, window.severity.value, a, b)
                      for a, b in _runs(held, grid.start, grid.resolution)]
    return tuple(sorted(intervals, key=lambda i: (i.start, i.window)))


def _runs(flags: npt.NDArray[np.bool_], origin: float,
          width: float) -> list[tuple[float, float]]:
    """[start, end) of each run of True, flag k standing for [origin + k w, origin + (k+1) w)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], flags.astype(np.int8), [0]))))
    return [(origin + int(a) * width, origin + int(b) * width)
            for a, b in zip(edges[0::2], edges[1::2])]


def _floats(values: Floats) -> tuple[float, ...]:
    return tuple(values.tolist())


def _summary(slo: Slo) -> SloSummary:
    sliced = slo.budgeting is not Budgeting.OCCURRENCES
    return SloSummary(slo.name, slo.service, slo.description, slo.objective, str(slo.window),
                      slo.budgeting.value, slo.timeslice_seconds, describe_sli(slo),
                      "timeslices" if sliced else "events")


def describe_sli(slo: Slo) -> str:
    """One line saying what a good event is: "time to first token at most 200ms"."""
    sli = slo.sli
    if isinstance(sli, LatencySli):
        line = f"{_LATENCY_NAMES[sli.metric]} at most {format_duration(sli.threshold_seconds)}"
    elif isinstance(sli, AvailabilitySli):
        line = f"requests not failing with {', '.join(sli.errors)}"
    elif isinstance(sli, ThroughputSli):
        line = f"{sli.metric.replace('_', ' ')} at least {sli.min_per_second:g}/s"
    elif isinstance(sli, GoodputSli):
        line = sli.describe()
    else:
        line = _describe_ratio(sli)
    if slo.timeslice_seconds is None:
        return line
    per = format_duration(slo.timeslice_seconds)
    if slo.budgeting is Budgeting.RATIO_TIMESLICES:
        return f"{line}; the mean of per-{per} ratios"
    if slo.timeslice_target is not None:
        return f"{line}; a {per} slice is good when {slo.timeslice_target:.6g} of it is"
    return f"{line}, per {per} slice"


def _describe_ratio(sli: RatioSli) -> str:
    part = sli.good if sli.good is not None else sli.bad
    assert part is not None  # the model requires one of them

    def query(metric: str, labels: dict[str, str]) -> str:
        matchers = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return f"{metric}{{{matchers}}}" if matchers else metric

    kind = "good" if sli.good is not None else "bad"
    return (f"{kind}: {query(part.metric, part.labels)} over "
            f"{query(sli.total.metric, sli.total.labels)}")
