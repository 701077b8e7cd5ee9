"""What the SLO, anomaly, canary and API layers ask the store.

Every answer is a total of additive primitives (counter increases, gauge statistics,
histogram bucket counts) over the selected targets and time, read from the coarsest stored
resolution that covers it exactly. Rates, ratios and percentiles are derived from these
totals by the caller (``monitor.collect.derive``), never averaged from stored ratios.

Time ranges are (start, end]: an interval belongs to the range its end lies in. Steps are
(start + (k-1) step, start + k step], clipped to ``end``; each point carries its step's end.
A point is None when no selected target answered during the step (down or not scraped): a
gap, never a zero.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, select

from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    SeriesKey,
    Snapshot,
    TargetState,
    split_key,
)
from monitor.store.aggregates import (
    GaugeTotal,
    IntervalSummary,
    Key,
    counter_totals,
    gauge_totals,
    histogram_totals,
    interval_summaries,
    read_connection,
    up_ends,
)
from monitor.store.db import Store
from monitor.collect.snapshot import merge_deltas
from monitor.store.models import RAW_RESOLUTION, Series, SeriesKind, Target
from monitor.store.reads import Piece, all_series, load_watermarks, plan

_COARSEST_FIRST = (3600, 60, RAW_RESOLUTION)


@dataclass(frozen=True, slots=True)
class Selector:
    """One target by name, or every target whose labels include all of ``labels``."""

    target: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return ((self.target is None or name == self.target)
                and all(labels.get(k) == v for k, v in self.labels.items()))

    def __str__(self) -> str:
        parts = [f'target="{self.target}"'] if self.target is not None else []
        parts += [f'{k}="{v}"' for k, v in sorted(self.labels.items())]
        return "{" + ",".join(parts) + "}"


def window(store: Store, selector: Selector, start: float, end: float) -> Snapshot:
    """Totals of the selected targets over (start, end] as one snapshot: counters summed,
    histograms of replicas merged, gauge readings pooled (mean, min and max over every
    reading of every replica; for sums of amounts across replicas merge ``window_by_target``
    with ``monitor.collect.derive.merge_replicas``). DOWN with the last error when no selected
    target answered in the window, or with "no data" when nothing is stored."""
    totals = _WindowTotals.read(store, selector, start, end)
    return totals.snapshot(str(selector), set(totals.targets), start, end)


def window_by_target(store: Store, selector: Selector, start: float, end: float
                     ) -> dict[str, Snapshot]:
    """Each selected target's totals over (start, end]; targets with nothing stored in the
    window are left out."""
    totals = _WindowTotals.read(store, selector, start, end)
    by_target = totals.by_target()  # one pass, not one scan of every value per target
    return {name: by_target[target_id].snapshot(name, {target_id}, start, end)
            for target_id, name in sorted(totals.targets.items(), key=lambda item: item[1])
            if target_id in totals.summaries}


@dataclass(frozen=True, slots=True)
class _WindowTotals:
    """Per (target, series) totals of one window, merged into snapshots on demand."""

    targets: dict[int, str]
    series: dict[int, tuple[SeriesKey, SeriesKind]]
    counters: dict[Key, float]
    gauges: dict[Key, GaugeTotal]
    histograms: dict[Hashable, HistogramDelta]
    summaries: dict[int, IntervalSummary]

    @classmethod
    def read(cls, store: Store, selector: Selector, start: float, end: float) -> _WindowTotals:
        _check_range(start, end)
        with read_connection(store.engine) as conn:
            targets, series = select_targets(conn, selector), all_series(conn)
            pieces = plan(start, end, _COARSEST_FIRST, load_watermarks(conn))
            ids = {kind: [i for i, (_, k) in series.items() if k is kind] for kind in SeriesKind}
            return cls(
                targets, series,
                counter_totals(conn, pieces, targets, ids[SeriesKind.COUNTER], by_end=False),
                gauge_totals(conn, pieces, targets, ids[SeriesKind.GAUGE], by_end=False),
                histogram_totals(conn, store.ids, pieces, targets, ids[SeriesKind.HISTOGRAM],
                                 lambda targets, series, _ends: list(zip(targets, series))
                                 ).result(),
                interval_summaries(conn, pieces, targets))

    def by_target(self) -> dict[int, _WindowTotals]:
        """The totals split per target, each holding only its own values."""
        parts = {target_id: _WindowTotals({target_id: name}, self.series, {}, {}, {}, {})
                 for target_id, name in self.targets.items()}
        for key, increase in self.counters.items():
            parts[int(key[0])].counters[key] = increase
        for key, gauge in self.gauges.items():
            parts[int(key[0])].gauges[key] = gauge
        for group, delta in self.histograms.items():
            parts[cast(tuple[int, int], group)[0]].histograms[group] = delta
        for target_id, summary in self.summaries.items():
            parts[target_id].summaries[target_id] = summary
        return parts

    def snapshot(self, name: str, target_ids: set[int], start: float, end: float) -> Snapshot:
        summaries = [s for t, s in self.summaries.items() if t in target_ids]
        if not summaries:
            return Snapshot(name, start, end, TargetState.DOWN, "no data")
        summary = functools.reduce(IntervalSummary.merge, summaries)
        counters: dict[SeriesKey, float] = {}
        for (target_id, series_id), increase in self.counters.items():
            if target_id in target_ids:
                key = self.series[int(series_id)][0]
                counters[key] = counters.get(key, 0.0) + increase
        gauges: dict[SeriesKey, GaugeTotal] = {}
        for (target_id, series_id), g in self.gauges.items():
            if target_id in target_ids:
                key = self.series[int(series_id)][0]
                gauges[key] = gauges[key].merge(g) if key in gauges else g
        histograms: dict[SeriesKey, list[HistogramDelta]] = {}
        for group, delta in self.histograms.items():
            target_id, series_id = cast(tuple[int, int], group)
            if target_id in target_ids:
                histograms.setdefault(self.series[series_id][0], []).append(delta)
        error = None if summary.any_up or summary.last_down is None else summary.last_down[1]
        return Snapshot(
            name, summary.start, summary.end,
            TargetState.UP if summary.any_up else TargetState.DOWN, error, counters,
            {k: g.stats() for k, g in gauges.items()},
            {k: merge_deltas(deltas) for k, deltas in histograms.items()})


def counter_series(store: Store, selector: Selector, metric: str, start: float, end: float,
                   step: float, where: Mapping[str, str] | None = None
                   ) -> list[tuple[float, float | None]]:
    """Increase per step of a counter series (a full key) or of all series of a name (whose
    labels include ``where``)."""
    steps = StepGrid(start, end, step)
    with read_connection(store.engine) as conn:
        targets, series, pieces = _prepare(conn, selector, metric, SeriesKind.COUNTER, steps,
                                           where)
        totals = counter_totals(conn, pieces, targets, series, by_end=True)
        answered = steps.answered(up_ends(conn, pieces, targets))
    ends = np.fromiter((end for end, in totals), dtype=np.float64, count=len(totals))
    weights = np.fromiter(totals.values(), dtype=np.float64, count=len(totals))
    sums = np.bincount(steps.index(ends), weights=weights, minlength=len(steps.ends))
    return [(t, float(sums[k]) if answered[k] else None) for k, t in enumerate(steps.ends)]


def gauge_series(store: Store, selector: Selector, metric: str, start: float, end: float,
                 step: float, where: Mapping[str, str] | None = None
                 ) -> list[tuple[float, GaugeStats | None]]:
    """Gauge statistics per step (mean, min, max, last) of the series (whose labels include
    ``where``) pooled; None where nothing was read."""
    steps = StepGrid(start, end, step)
    with read_connection(store.engine) as conn:
        targets, series, pieces = _prepare(conn, selector, metric, SeriesKind.GAUGE, steps,
                                           where)
        totals = gauge_totals(conn, pieces, targets, series, by_end=True)
    merged: dict[int, GaugeStats] = {}
    for (end_time,), g in sorted(totals.items()):  # in time order: merge keeps the later last
        k = steps.index_of(end_time)
        stats = g.stats()
        merged[k] = merged[k].merge(stats) if k in merged else stats
    return [(t, merged.get(k)) for k, t in enumerate(steps.ends)]


def histogram_series(store: Store, selector: Selector, metric: str, start: float, end: float,
                     step: float, where: Mapping[str, str] | None = None
                     ) -> list[tuple[float, HistogramDelta | None]]:
    """Bucket increases per step, replicas and label sets (those including ``where``)
    merged: percentiles and rates of each step come from these (``HistogramDelta.cumulative``,
    ``.count``)."""
    steps = StepGrid(start, end, step)
    with read_connection(store.engine) as conn:
        targets, series, pieces = _prepare(conn, selector, metric, SeriesKind.HISTOGRAM, steps,
                                           where)
        deltas = histogram_totals(
            conn, store.ids, pieces, targets, series,
            lambda _targets, _series, ends: steps.index(np.asarray(ends)).tolist()).result()
    return [(t, deltas.get(k)) for k, t in enumerate(steps.ends)]


def good_total(store: Store, selector: Selector, histogram: str, threshold: float,
               start: float, end: float) -> tuple[float, float]:
    """(observations <= threshold, all observations) of a histogram over (start, end], from
    summed bucket counts: the good and total events of a latency SLI. ``threshold`` must be
    a bucket bound (anything else would be an interpolation, not a count)."""
    _check_range(start, end)
    with read_connection(store.engine) as conn:
        targets = select_targets(conn, selector)
        series = select_series(conn, histogram, SeriesKind.HISTOGRAM)
        pieces = plan(start, end, _COARSEST_FIRST, load_watermarks(conn))
        deltas = histogram_totals(conn, store.ids, pieces, targets, series,
                                  lambda _targets, _series, ends: [None] * len(ends)).result()
    if not deltas:
        return 0.0, 0.0
    delta = deltas[None]
    matching = [b for b in delta.bounds if math.isclose(b, threshold, rel_tol=1e-9)]
    if not matching:
        nearby = sorted(delta.bounds, key=lambda b: abs(b - threshold))[:3]
        raise ValueError(f"threshold {threshold} is not a bucket bound of {histogram}; "
                         f"nearest bounds: {sorted(nearby)}")
    return delta.count_at_most(matching[0]), float(sum(delta.counts))


def select_targets(conn: Connection, selector: Selector) -> dict[int, str]:
    stmt = select(Target.id, Target.name, Target.labels)
    if selector.target is not None:
        stmt = stmt.where(Target.name == selector.target)
    return {target_id: name for target_id, name, labels in conn.execute(stmt)
            if selector.matches(name, labels or {})}


# id, key, kind (a SeriesKind value), and the key's labels when read ``with_labels``
SeriesRow = tuple[int, str, str, Mapping[str, str] | None]


def series_rows(conn: Connection, metric: str, with_labels: bool = False) -> list[SeriesRow]:
    """The stored series of a full key (``name{labels}``) or of every label set of a name;
    ``with_labels``: each key's labels parsed once, for rows filtered many times."""
    column = Series.key if "{" in metric else Series.name
    found = conn.execute(select(Series.id, Series.key, Series.kind).where(column == metric))
    return [(series_id, key, kind, split_key(key)[1] if with_labels else None)
            for series_id, key, kind in found]


def select_series(conn: Connection, metric: str, kind: SeriesKind,
                  where: Mapping[str, str] | None = None,
                  rows: Sequence[SeriesRow] | None = None) -> dict[int, SeriesKey]:
    """Series of a full key (``name{labels}``) or of every label set of a name, kept when
    their labels include ``where``; from ``rows`` (``series_rows`` of ``metric``, read
    before) when given."""
    found = series_rows(conn, metric) if rows is None else rows
    series: dict[int, SeriesKey] = {}
    for series_id, key, stored_kind, parsed in found:
        if stored_kind != kind:
            raise ValueError(f"{key} is a {stored_kind}, not a {kind}")
        if where:
            labels = split_key(key)[1] if parsed is None else parsed
            if any(labels.get(k) != v for k, v in where.items()):
                continue
        series[series_id] = key
    return series


def series_label_values(store: Store, metric: str, label: str,
                        where: Mapping[str, str] | None = None) -> list[str]:
    """The values of ``label`` among the stored series of ``metric`` (an exposed name) whose
    labels include ``where``, sorted; a series without the label is left out."""
    with read_connection(store.engine) as conn:
        found = conn.execute(select(Series.labels).where(Series.name == metric))
        values = {labels[label] for labels, in found
                  if label in (labels or {})
                  and all(labels.get(k) == v for k, v in (where or {}).items())}
    return sorted(values)


def series_label_sets(store: Store, metric: str, labels: Sequence[str],
                      where: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The distinct values of ``labels`` together (one dict each) among the stored series of
    ``metric`` (an exposed name) whose labels include ``where``, sorted; a series lacking one
    of ``labels`` is left out. One query of the series table."""
    with read_connection(store.engine) as conn:
        found = conn.execute(select(Series.labels).where(Series.name == metric))
        sets = {tuple(series[k] for k in labels) for series, in found
                if all(k in (series or {}) for k in labels)
                and all(series.get(k) == v for k, v in (where or {}).items())}
    return [dict(zip(labels, values, strict=True)) for values in sorted(sets)]


def _prepare(conn: Connection, selector: Selector, metric: str, kind: SeriesKind,
             steps: StepGrid, where: Mapping[str, str] | None = None
             ) -> tuple[dict[int, str], dict[int, SeriesKey], list[Piece]]:
    return (select_targets(conn, selector), select_series(conn, metric, kind, where),
            plan_steps(conn, steps))


def plan_steps(conn: Connection, steps: StepGrid) -> list[Piece]:
    """The pieces a step query reads: a resolution serves it only if each of its buckets lies
    in one step."""
    usable = [r for r in _COARSEST_FIRST[:-1]
              if steps.start % r == 0 and steps.step % r == 0] + [RAW_RESOLUTION]
    return plan(steps.start, steps.ends[-1], usable, load_watermarks(conn))


def _check_range(start: float, end: float) -> None:
    if not end > start:
        raise ValueError(f"need start < end, got start {start}, end {end}")


class StepGrid:
    """Steps (start + (k-1) step, start + k step], the last clipped to ``end``."""

    def __init__(self, start: float, end: float, step: float) -> None:
        _check_range(start, end)
        if not step > 0:
            raise ValueError(f"step must be positive seconds, got {step}")
        self.start, self.step = start, step
        num_steps = math.ceil((end - start) / step - 1e-9)
        self.ends = [min(start + (k + 1) * step, end) for k in range(num_steps)]

    def index(self, end_times: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Step of each interval end: the step (t - step, t] that holds it."""
        k = np.ceil((end_times - self.start) / self.step).astype(np.int64) - 1
        return np.clip(k, 0, len(self.ends) - 1)

    def index_of(self, end_time: float) -> int:
        k = math.ceil((end_time - self.start) / self.step) - 1
        return min(max(k, 0), len(self.ends) - 1)

    def answered(self, ends: Sequence[float]) -> npt.NDArray[np.bool_]:
        flags = np.zeros(len(self.ends), dtype=np.bool_)
        flags[self.index(np.asarray(ends, dtype=np.float64))] = True
        return flags
