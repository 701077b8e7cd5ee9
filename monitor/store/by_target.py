"""Step series of every target at once: one query per metric instead of one per selector.

What many SLOs read together (the evaluator's first tick loads a month for each): a counter's
increase, whether a target answered, and a histogram's counts at some bucket bounds, per
(target, step), as arrays with one row per target. A selector's series is the sum of its
targets' rows (``rows_of``), as the per-selector queries (``monitor.store.queries``) sum them
in the database. Same pieces, same step binning, same None-is-a-gap rule: a step without an
answering target is not answered (its increase reads 0 here, None there).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Select, case, func, select

from monitor.collect.snapshot import TargetState
from monitor.store.histograms import value_positions
from monitor.store.ids import IdCache, load_bounds
from monitor.store.models import CounterValue, HistogramValue, Interval, Target
from monitor.store.queries import Selector, StepGrid, plan_steps
from monitor.store.reads import interval_range, value_range

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
_ROWS_PER_BATCH = 20_000
# Counters read as two columns each in one query up to this many; more may be read per series.
_KEY_COLUMNS = 8
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class TargetRows:
    """Targets (id -> row index) of the arrays read for a step grid. With one selector the
    targets share one row (``merged``): the database sums them, as a per-selector query does,
    and returns a row per step instead of one per target and step."""

    grid: StepGrid
    rows: dict[int, int]
    labels: dict[int, tuple[str, dict[str, str]]]
    merged: bool

    @classmethod
    def read(cls, conn: Connection, grid: StepGrid, selectors: Collection[Selector]
             ) -> TargetRows:
        """The targets any of ``selectors`` picks (the others' rows are not read)."""
        found = conn.execute(select(Target.id, Target.name, Target.labels).order_by(Target.id))
        labels = {target_id: (name, dict(target_labels or {}))
                  for target_id, name, target_labels in found
                  if any(s.matches(name, target_labels or {}) for s in selectors)}
        merged = len(selectors) == 1
        return cls(grid, {t: 0 if merged else k for k, t in enumerate(labels)}, labels, merged)

    def rows_of(self, selector: Selector) -> list[int]:
        """Rows of the targets a selector picks (as ``queries.select_targets`` picks them)."""
        return sorted({self.rows[t] for t, (name, labels) in self.labels.items()
                       if selector.matches(name, labels)})

    def _cells(self, target_ids: Sequence[int] | None, ends: Sequence[float]
               ) -> npt.NDArray[np.int64]:
        """Flat (row, step) index of each (target id, interval end); merged: no ids."""
        steps = self.grid.index(np.asarray(ends, dtype=np.float64))
        if self.merged:
            return steps
        ids = np.fromiter(self.rows, dtype=np.int64, count=len(self.rows))  # ascending
        rows = np.searchsorted(ids, np.asarray(target_ids, dtype=np.int64))
        return rows * len(self.grid.ends) + steps

    @property
    def shape(self) -> tuple[int, int]:
        return len(set(self.rows.values())), len(self.grid.ends)

    def group(self, *columns: Any) -> list[Any]:
        """The columns a value query groups by: (target, end), or the end alone merged."""
        return list(columns[1:]) if self.merged else list(columns)


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
    every_series = {s for key in keys for s in counters[key]}
    # Per series when that returns no more values (a value per series and cell, against two
    # per counter and cell): many counters over few series each, a split SLO's tenants.
    if len(keys) > _KEY_COLUMNS and len(every_series) <= 2 * len(keys):
        _counters_per_series(conn, targets, counters, keys, flats)
        return {key: flat.reshape(shape) for key, flat in flats.items()}
    c = CounterValue
    columns = []
    for key in keys:
        mine = c.series_id.in_(list(counters[key]))
        columns += [func.sum(case((mine, c.increase))), func.count(case((mine, 1)))]
    group = targets.group(c.target_id, c.end_time)
    for piece in plan_steps(conn, targets.grid):
        for batch in _batches(conn, select(*group, *columns).where(
                *value_range(c, piece, targets.rows, every_series)).group_by(*group)):
            keyed = _columns(batch, len(group) + len(columns))
            sums_and_counts = keyed[len(group):]
            cells = targets._cells(None if targets.merged else keyed[0], keyed[len(group) - 1])
            for k, key in enumerate(keys):
                sums = np.array(sums_and_counts[2 * k], dtype=np.float64)  # NULL -> NaN
                present = np.array(sums_and_counts[2 * k + 1], dtype=np.int64) > 0
                flats[key] += np.bincount(cells[present], weights=sums[present],
                                          minlength=flats[key].size)
    return {key: flat.reshape(shape) for key, flat in flats.items()}


def _counters_per_series(conn: Connection, targets: TargetRows,
                         counters: Mapping[K, Collection[int]], keys: Sequence[K],
                         flats: dict[K, Floats]) -> None:
    """``counters_by_target`` for many counters (a split SLO's: one per tenant, of the same
    metric): the value rows themselves, summed per counter here, instead of two columns per
    counter in the query (hundreds of them cost more to compile than to run)."""
    every_series = np.asarray(sorted({s for key in keys for s in counters[key]}),
                              dtype=np.int64)
    members = np.zeros((len(keys), len(every_series)), dtype=np.bool_)
    for k, key in enumerate(keys):
        members[k, np.searchsorted(every_series, np.asarray(list(counters[key]),
                                                            dtype=np.int64))] = True
    c = CounterValue
    group = targets.group(c.target_id, c.end_time)
    size = targets.shape[0] * targets.shape[1]
    for piece in plan_steps(conn, targets.grid):
        for batch in _batches(conn, select(*group, c.series_id, c.increase).where(
                *value_range(c, piece, targets.rows, every_series.tolist()),
                c.increase.is_not(None))):  # skipped, as SUM skips them (writes store none)
            keyed = _columns(batch, len(group) + 2)
            cells = targets._cells(None if targets.merged else keyed[0], keyed[len(group) - 1])
            series = np.searchsorted(every_series,
                                     np.asarray(keyed[len(group)], dtype=np.int64))
            values = np.array(keyed[len(group) + 1], dtype=np.float64)
            for k, key in enumerate(keys):
                mine = members[k][series]
                flats[key] += np.bincount(cells[mine], weights=values[mine], minlength=size)


def answered_by_target(conn: Connection, targets: TargetRows) -> Bools:
    """Whether each target answered (an interval not down ended) in each step."""
    flags = np.zeros(targets.shape[0] * targets.shape[1], dtype=np.bool_)
    if not targets.rows:
        return flags.reshape(targets.shape)
    group = targets.group(Interval.target_id, Interval.end_time)
    for piece in plan_steps(conn, targets.grid):
        # Not DISTINCT: a step answered twice is answered.
        for batch in _batches(conn, select(*group).where(
                *interval_range(piece, targets.rows), Interval.state != TargetState.DOWN.value)):
            keyed = _columns(batch, len(group))
            flags[targets._cells(None if targets.merged else keyed[0], keyed[-1])] = True
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
        keys = targets.group(h.target_id, h.end_time)  # each row's target (unless merged), end
        for piece in plan_steps(conn, targets.grid):
            for batch in _batches(conn, select(*keys, h.bounds_id, h.first_bucket, h.counts)
                                  .where(*value_range(h, piece, targets.rows, series_ids))):
                *keyed, bounds_ids, firsts, blobs = _columns(batch, len(keys) + 3)
                layouts.update(bounds_ids)
                if len(layouts) > 1:
                    break
                bounds = ids.bounds_by_id[bounds_ids[0]]
                cells = targets._cells(None if targets.merged else keyed[0], keyed[-1])
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
    as SLO thresholds are matched); when the layout lacks it, up to the edge below, as
    ``HistogramDelta.count_at_most`` counts (the SLO's status warns: monitor.slo.thresholds)."""
    return sum(1 for bound in bounds if bound <= threshold * (1 + 1e-9))


def _batches(conn: Connection, stmt: Select[Any]) -> Iterator[Sequence[Sequence[Any]]]:
    """The statement's rows, a batch at a time. On SQLite straight from the driver's cursor,
    in the caller's transaction: the columns read here are numbers and bytes, which need no
    conversion, and converting each of a month's minute rows anyway costs twice the read."""
    if conn.dialect.name != "sqlite":
        yield from conn.execute(stmt.execution_options(yield_per=_ROWS_PER_BATCH)).partitions()
        return
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    cursor = conn.connection.cursor()
    try:
        cursor.execute(compiled.string, [compiled.params[k] for k in compiled.positiontup or ()])
        while batch := cursor.fetchmany(_ROWS_PER_BATCH):
            yield batch
    finally:
        cursor.close()


def _columns(batch: Sequence[Sequence[Any]], num_columns: int) -> list[list[Any]]:
    """A batch of rows as its columns (a third of the time ``zip(*batch)`` takes)."""
    return [list(map(itemgetter(k), batch)) for k in range(num_columns)]
