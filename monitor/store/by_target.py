"""Step series of every target at once: one query per metric instead of one per selector.

What many SLOs read together (the evaluator's first tick loads a month for each): a counter's
increase, whether a target answered, and a histogram's counts at some bucket bounds, per
(target, step), as arrays with one row per target. A selector's series is the sum of its
targets' rows (``rows_of``), as the per-selector queries (``monitor.store.queries``) sum them
in the database. Same pieces, same step binning, same None-is-a-gap rule: a step without an
answering target is not answered (its increase reads 0 here, None there).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, case, func, select

from monitor.snapshot import TargetState
from monitor.store.histograms import value_positions
from monitor.store.ids import IdCache, load_bounds
from monitor.store.models import CounterValue, HistogramValue, Interval, Target
from monitor.store.queries import Selector, StepGrid, plan_steps
from monitor.store.reads import interval_range, value_range

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
_ROWS_PER_BATCH = 20_000
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class TargetRows:
    """Targets (id -> row index) of the arrays read for a step grid."""

    grid: StepGrid
    rows: dict[int, int]
    labels: dict[int, tuple[str, dict[str, str]]]

    @classmethod
    def read(cls, conn: Connection, grid: StepGrid, selectors: Collection[Selector]
             ) -> TargetRows:
        """The targets any of ``selectors`` picks (the others' rows are not read)."""
        found = conn.execute(select(Target.id, Target.name, Target.labels).order_by(Target.id))
        labels = {target_id: (name, dict(target_labels or {}))
                  for target_id, name, target_labels in found
                  if any(s.matches(name, target_labels or {}) for s in selectors)}
        return cls(grid, {t: k for k, t in enumerate(labels)}, labels)

    def rows_of(self, selector: Selector) -> list[int]:
        """Rows of the targets a selector picks (as ``queries.select_targets`` picks them)."""
        return [self.rows[t] for t, (name, labels) in self.labels.items()
                if selector.matches(name, labels)]

    def _cells(self, target_ids: Sequence[int], ends: Sequence[float]
               ) -> npt.NDArray[np.int64]:
        """Flat (row, step) index of each (target id, interval end)."""
        ids = np.fromiter(self.rows, dtype=np.int64, count=len(self.rows))  # ascending
        rows = np.searchsorted(ids, np.asarray(target_ids, dtype=np.int64))
        return rows * len(self.grid.ends) + self.grid.index(np.asarray(ends, dtype=np.float64))

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.grid.ends)


def counters_by_target(conn: Connection, targets: TargetRows,
                       counters: Mapping[K, Collection[int]]) -> dict[K, Floats]:
    """Increase per (target, step) of each counter (a set of series ids, summed), all read in
    one pass: per row a sum and a count of each counter's series (a sum of no rows is not a
    step's NaN, it is nothing)."""
    shape = targets.shape
    flats = {key: np.zeros(shape[0] * shape[1]) for key in counters}
    keys = [key for key, series in counters.items() if series]
    if not keys or not targets.rows:
        return {key: flat.reshape(shape) for key, flat in flats.items()}
    c = CounterValue
    columns = []
    for key in keys:
        mine = c.series_id.in_(list(counters[key]))
        columns += [func.sum(case((mine, c.increase))), func.count(case((mine, 1)))]
    every_series = {s for key in keys for s in counters[key]}
    for piece in plan_steps(conn, targets.grid):
        found = conn.execute(
            select(c.target_id, c.end_time, *columns)
            .where(*value_range(c, piece, targets.rows, every_series))
            .group_by(c.target_id, c.end_time)).all()
        if not found:
            continue
        ids, ends, *sums_and_counts = zip(*found)
        cells = targets._cells(ids, ends)
        for k, key in enumerate(keys):
            sums = np.array(sums_and_counts[2 * k], dtype=np.float64)  # NULL -> NaN
            present = np.array(sums_and_counts[2 * k + 1], dtype=np.int64) > 0
            flats[key] += np.bincount(cells[present], weights=sums[present],
                                      minlength=flats[key].size)
    return {key: flat.reshape(shape) for key, flat in flats.items()}


def answered_by_target(conn: Connection, targets: TargetRows) -> Bools:
    """Whether each target answered (an interval not down ended) in each step."""
    flags = np.zeros(targets.shape[0] * targets.shape[1], dtype=np.bool_)
    if not targets.rows:
        return flags.reshape(targets.shape)
    for piece in plan_steps(conn, targets.grid):
        found = conn.execute(select(Interval.target_id, Interval.end_time).distinct().where(
            *interval_range(piece, targets.rows),
            Interval.state != TargetState.DOWN.value)).all()
        if found:
            ids, ends = zip(*found)
            flags[targets._cells(ids, ends)] = True
    return flags.reshape(targets.shape)


@dataclass(frozen=True, slots=True)
class HistogramByTarget:
    """Observations per (target, step): all of them, and those at or below each bound asked
    for; ``bounds`` is the one bucket layout stored (None when there were none or several)."""

    bounds: tuple[float, ...] | None
    mixed_layouts: bool
    rows: Floats             # stored rows (a step with rows has a histogram, maybe empty)
    total: Floats
    at_most: dict[float, Floats]


def histogram_by_target(conn: Connection, ids: IdCache, targets: TargetRows,
                        series_ids: Collection[int], thresholds: Collection[float]
                        ) -> HistogramByTarget:
    """Bucket counts of the given histogram series summed per (target, step), reduced to the
    counts at or below each threshold (a bound of the layout, as ``count_at_most`` counts).
    Several layouts in the range (an engine upgrade) are reported as ``mixed_layouts`` and
    not summed: the per-selector query merges them to their shared bounds."""
    size = targets.shape[0] * targets.shape[1]
    total, num_rows = np.zeros(size), np.zeros(size)
    at_most = {t: np.zeros(size) for t in thresholds}
    layouts: set[int] = set()
    if series_ids and targets.rows:
        load_bounds(conn, ids)
        h = HistogramValue
        for piece in plan_steps(conn, targets.grid):
            result = conn.execute(
                select(h.target_id, h.end_time, h.bounds_id, h.first_bucket, h.counts)
                .where(*value_range(h, piece, targets.rows, series_ids))
                .execution_options(yield_per=_ROWS_PER_BATCH))
            for batch in result.partitions():
                target_ids, ends, bounds_ids, firsts, blobs = zip(*batch)
                layouts.update(bounds_ids)
                if len(layouts) > 1:
                    break
                bounds = ids.bounds_by_id[bounds_ids[0]]
                cells = targets._cells(target_ids, ends)
                row, bucket, values = value_positions(blobs, firsts)
                num_rows += np.bincount(cells, minlength=size)
                total += np.bincount(cells[row], weights=values, minlength=size)
                for threshold, counts in at_most.items():
                    good = bucket < _bucket_count(bounds, threshold)
                    counts += np.bincount(cells[row[good]], weights=values[good],
                                          minlength=size)
            if len(layouts) > 1:
                break
    single = len(layouts) == 1
    return HistogramByTarget(ids.bounds_by_id[next(iter(layouts))] if single else None,
                             len(layouts) > 1, num_rows.reshape(targets.shape),
                             total.reshape(targets.shape),
                             {t: c.reshape(targets.shape) for t, c in at_most.items()})


def _bucket_count(bounds: Sequence[float], threshold: float) -> int:
    """Buckets counted as at most ``threshold``: up to the bound equal to it (within 1e-9,
    as SLO thresholds are matched); none when the layout lacks it (the SLO reports that)."""
    for k, bound in enumerate(bounds):
        if abs(bound - threshold) <= 1e-9 * threshold:
            return k + 1
    return 0
