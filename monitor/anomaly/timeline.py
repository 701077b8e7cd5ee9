"""Messy timestamps onto the regular steps the detectors read, with a stated policy.

Real exported series repeat timestamps (exporter restarts, retries), go back (clock changes,
merged files), skip steps and drift off the grid. None of that rejects a series:

- **Time, not file position, orders the points.** Rows are placed by their timestamp; a row
  that goes back in time is scored at its own time, not after the row before it.
- **The step** is the one given, else the median spacing between distinct timestamps.
- **Slots.** Each row belongs to the step nearest its timestamp, on a grid of the step whose
  phase is the rows' median phase (so a few jittered rows do not shift everyone's step). The
  rows of one slot (a repeated timestamp, overlapping files, irregular samples closer than a
  step) are one point for the detectors: the median of their values (rows without a value
  ignored).
- **Gaps.** Empty slots between rows are fed as gaps (NaN: neither breach nor clear), so a
  seasonal lag stays a week. A gap longer than the detectors' memory (three weeks and a day
  at the default parameters) is fed as exactly that long: the state after it is the same.
- **Output**, decided by the caller (``inferwatch anomaly score``): one row per input row, in
  input order, each with its slot's score; an alert start is marked on the slot's first row in
  input order.

Every case is counted (``TimelineCounts``) so what was done is visible, never silent. Series
from the store and from a PromQL range arrive on this grid by construction (the store reads
one value per step; Prometheus evaluates a range query once per step), so only files need it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from monitor.anomaly.baseline import WEEK_SECONDS
from monitor.anomaly.params import AnomalyParams

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
_OFF_GRID = 0.1  # a row further than this fraction of a step from its slot's time is off-grid


class TimelineError(ValueError):
    """A series that cannot be placed on steps at all (fewer than two distinct times)."""


@dataclass(frozen=True, slots=True)
class TimelineCounts:
    rows: int
    points: int              # steps fed to the detectors, gaps included
    backwards: int           # rows earlier than a row before them in the input
    repeated: int            # rows whose timestamp an earlier row already had
    merged: int              # rows sharing a step with a row at another timestamp
    off_grid: int            # rows more than 10% of a step from their step's time
    gap_steps: int           # empty steps fed as gaps
    gap_steps_skipped: int   # empty steps beyond the detectors' memory, not fed
    missing_values: int      # rows without a value

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def describe(self) -> str:
        """What the policy did, for stderr; empty when the series was already regular."""
        parts = [f"{n} {what}" for n, what in (
            (self.backwards, "rows back in time (placed by their timestamp)"),
            (self.repeated, "repeated timestamps (one step: the median value)"),
            (self.merged, "rows merged into a step with another row"),
            (self.off_grid, "rows off the step grid (snapped to the nearest step)"),
            (self.gap_steps, "empty steps (gaps)"),
            (self.gap_steps_skipped, "empty steps past the detectors' memory (skipped)"),
            (self.missing_values, "rows without a value"),
        ) if n]
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Timeline:
    step: float
    times: Floats            # per point: the slot's time (NaN for a gap point)
    values: Floats           # per point: the median of its rows' values (NaN for a gap)
    point_of_row: Ints       # per input row: the point it belongs to
    first_row: Ints          # per point: its first row in input order (-1 for a gap)
    counts: TimelineCounts


def memory_points(params: AnomalyParams) -> int:
    """Steps after which the detectors hold nothing of what came before (their longest ring)."""
    season = max(1, round(WEEK_SECONDS / params.step_seconds))
    return season * params.season_lags + params.season_halfwidth_points + 1


def median_step(times: npt.ArrayLike) -> float:
    """The median spacing between distinct timestamps; TimelineError with fewer than two."""
    distinct = np.unique(np.asarray(times, dtype=np.float64))
    if len(distinct) < 2:
        raise TimelineError(f"needs at least 2 distinct timestamps to find the step, got "
                            f"{len(distinct)} (give --step)")
    return float(np.median(np.diff(distinct)))


def build(times: npt.ArrayLike, values: npt.ArrayLike, step: float | None = None,
          max_gap: int | None = None) -> Timeline:
    """The points of rows ``(times[i], values[i])`` in input order; ``max_gap``: the longest
    run of empty steps fed (default: the memory of the default parameters at ``step``)."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if len(t) != len(v) or len(t) == 0:
        raise TimelineError(f"needs rows with a time and a value each, got {len(t)} times "
                            f"and {len(v)} values")
    if step is None:
        step = median_step(t)
    if not step > 0:
        raise TimelineError(f"the step must be positive, got {step}")
    if max_gap is None:
        max_gap = memory_points(AnomalyParams(step_seconds=step))
    # The grid's origin: the earliest time moved to the rows' median phase within a step.
    t_min = float(t.min())
    phase = np.mod(t - t_min + step / 2, step) - step / 2
    t_min += float(np.median(phase))
    slot = np.rint((t - t_min) / step).astype(np.int64)
    slots, row_slot = np.unique(slot, return_inverse=True)
    # Point index of each occupied slot: the empty slots between are gap points, capped.
    empty = np.diff(slots) - 1
    fed = np.minimum(empty, max_gap)
    position = np.concatenate(([0], np.cumsum(fed + 1))).astype(np.int64)
    count = int(position[-1]) + 1
    point_values = np.full(count, np.nan)
    point_values[position] = pd.Series(v).groupby(row_slot).median().to_numpy()
    point_times = np.full(count, np.nan)
    point_times[position] = t_min + slots * step
    point_of_row = position[row_slot]
    first_row = np.full(count, -1, dtype=np.int64)
    # The first row in input order of each point: assign in reverse so the earliest wins.
    first_row[point_of_row[::-1]] = np.arange(len(t) - 1, -1, -1, dtype=np.int64)
    distinct_times = len(np.unique(t))
    counts = TimelineCounts(
        rows=len(t), points=count,
        backwards=int(np.count_nonzero(t[1:] < np.maximum.accumulate(t)[:-1])),
        repeated=len(t) - distinct_times,
        merged=distinct_times - len(slots),
        off_grid=int(np.count_nonzero(np.abs(t - (t_min + slot * step)) > _OFF_GRID * step)),
        gap_steps=int(fed.sum()), gap_steps_skipped=int((empty - fed).sum()),
        missing_values=int(np.count_nonzero(np.isnan(v))))
    return Timeline(step, point_times, point_values, point_of_row, first_row, counts)
