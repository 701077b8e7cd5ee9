"""Many SLOs' events over one range from the store, each metric read once for all targets.

The evaluator's first tick loads a month for every SLO; read per SLO that is a dozen queries
each, and a thousand SLOs share a handful of metrics. Here each counter (name and labels),
each histogram and the targets' up-ness is read once per range for every target
(``monitor.store.by_target``), and each SLO's steps are the sum of its targets' rows, combined
as ``StoreSliSource.read`` combines its per-selector reads (the same rules, in columns; the
tests check both give the same steps and the same statuses). A histogram stored in more than
one bucket layout over the range is read per SLO (``per_slo``), as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from sqlalchemy import Connection

from exporters import schema
from monitor.slo.spec import (
    PRE_ENGINE_ERRORS,
    AvailabilitySli,
    GoodputSli,
    LatencySli,
    RatioSli,
    Slo,
    ThroughputSli,
)
from monitor.slo.steps import Floats, Step, StepArrays
from monitor.store.aggregates import read_connection
from monitor.store.by_target import (
    Bools,
    HistogramByTarget,
    TargetRows,
    answered_by_target,
    counters_by_target,
    histogram_by_target,
)
from monitor.store.db import Store
from monitor.store.models import SeriesKind
from monitor.store.queries import (
    Selector,
    SeriesRow,
    StepGrid,
    select_series,
    series_rows,
)


def read_many(store: Store, slos: Sequence[Slo], start: float, end: float, step: float,
              per_slo: Callable[[Slo], Sequence[Step]]) -> dict[str, StepArrays | Exception]:
    grid = StepGrid(start, end, step)
    selectors = list({str(s): s for s in map(_selector, slos)}.values())
    with read_connection(store.engine) as conn:
        reads = _TargetReads(conn, store, TargetRows.read(conn, grid, selectors), slos)
        answers: dict[str, StepArrays | Exception] = {}
        for slo in slos:
            try:
                columns = reads.columns(slo)
                answers[slo.name] = (columns if columns is not None
                                     else StepArrays.of(per_slo(slo)))
            except Exception as exc:  # the SLO's own read would raise it: so does its answer
                answers[slo.name] = exc
    return answers


def _selector(slo: Slo) -> Selector:
    return Selector(slo.selector.target, slo.selector.labels)


def bucket_bound(bounds: Sequence[float], sli: LatencySli) -> float:
    """The stored bucket bound equal to the threshold; where the engine's buckets lack it
    (vLLM's TTFT has no 2.0 s edge) the threshold itself, so that ``count_at_most`` counts at
    the edge below: an exact count of a stricter SLI, a lower bound of the SLO's, never an
    interpolated one. The SLO's status says so (``monitor.slo.thresholds``)."""
    for bound in bounds:
        if abs(bound - sli.threshold_seconds) <= 1e-9 * sli.threshold_seconds:
            return bound
    return sli.threshold_seconds


CounterKey = tuple[str, tuple[tuple[str, str], ...]]  # exposed name, labels to match


class _TargetReads:
    """Per-target arrays of one range, read once and shared by every SLO: all counters the
    SLOs name in one query, each histogram in one, up-ness in one."""

    def __init__(self, conn: Connection, store: Store, targets: TargetRows,
                 slos: Sequence[Slo]) -> None:
        self.conn, self.store, self.targets = conn, store, targets
        self.ends = np.asarray(targets.grid.ends, dtype=np.float64)
        self._answered = answered_by_target(conn, targets)
        self._histograms: dict[str, HistogramByTarget] = {}
        self._thresholds: dict[str, set[float]] = {}
        for slo in slos:
            if isinstance(slo.sli, LatencySli):
                self._thresholds.setdefault(slo.sli.histogram, set()).add(
                    slo.sli.threshold_seconds)
        series: dict[CounterKey, dict[int, str]] = {}
        self._bad_keys: dict[CounterKey, Exception] = {}
        # Each name's series read once: the keys of a split SLO's groups (the same counter,
        # one tenant each) are filters of them, not a query each.
        by_name: dict[str, list[SeriesRow]] = {}
        for key in {key for slo in slos for key in _counter_keys(slo)}:
            try:
                if key[0] not in by_name:
                    by_name[key[0]] = series_rows(conn, key[0], with_labels=True)
                series[key] = select_series(conn, key[0], SeriesKind.COUNTER, dict(key[1]),
                                            rows=by_name[key[0]])
            except ValueError as exc:  # the SLOs naming it fail as their own read would
                self._bad_keys[key] = exc
        self._counters = counters_by_target(conn, targets, series)

    def columns(self, slo: Slo) -> StepArrays | None:
        """The SLO's steps; None when they must be read per SLO (mixed bucket layouts)."""
        rows = self.targets.rows_of(_selector(slo))
        answered: Bools = np.asarray(self._answered[rows].any(axis=0), dtype=np.bool_)
        sli = slo.sli
        if isinstance(sli, LatencySli):
            return self._latency(rows, answered, sli)
        if isinstance(sli, AvailabilitySli):
            return self._availability(rows, answered, sli)
        if isinstance(sli, ThroughputSli):
            return self._throughput(rows, answered, sli)
        if isinstance(sli, GoodputSli):
            return None  # from the request events, not the targets' metrics: read per SLO
        return self._ratio(rows, answered, sli)

    def _counter(self, rows: list[int], answered: Bools, metric: str,
                 where: Mapping[str, str] | None = None) -> Floats:
        """Increase per step over the rows' targets; 0 where none answered (a gap)."""
        key = _counter_key(metric, where)
        if key in self._bad_keys:
            raise self._bad_keys[key]
        return np.where(answered, self._counters[key][rows].sum(axis=0), 0.0)

    def _latency(self, rows: list[int], answered: Bools, sli: LatencySli) -> StepArrays | None:
        if sli.histogram not in self._histograms:
            series = select_series(self.conn, sli.histogram, SeriesKind.HISTOGRAM)
            self._histograms[sli.histogram] = histogram_by_target(
                self.conn, self.store.ids, self.targets, series,
                self._thresholds.get(sli.histogram, set()))
        found = self._histograms[sli.histogram]
        if found.mixed_layouts:
            return None
        return StepArrays(self.ends, found.at_most[sli.threshold_seconds][rows].sum(axis=0),
                          found.total[rows].sum(axis=0), answered)

    def _availability(self, rows: list[int], answered: Bools,
                      sli: AvailabilitySli) -> StepArrays:
        totals = self._counter(rows, answered, schema.REQUESTS)
        bad = np.zeros(len(self.ends))
        for error in sli.errors:
            errors = self._counter(rows, answered, schema.REQUEST_ERRORS,
                                   {schema.ERROR_TYPE: error})
            bad = bad + errors
            if error in PRE_ENGINE_ERRORS:  # refused before the engine counted them
                totals = totals + errors
        return StepArrays(self.ends, np.maximum(totals - bad, 0.0), totals, answered)

    def _throughput(self, rows: list[int], answered: Bools,
                    sli: ThroughputSli) -> StepArrays:
        tokens = np.zeros(len(self.ends))
        for name in sli.counters:
            tokens = tokens + self._counter(rows, answered, name)
        previous_ends = np.concatenate(([self.targets.grid.start], self.ends[:-1]))
        seconds = np.where(answered, self.ends - previous_ends, 0.0)
        return StepArrays(self.ends, tokens, seconds, answered)

    def _ratio(self, rows: list[int], answered: Bools, sli: RatioSli) -> StepArrays:
        events = self._counter(rows, answered, sli.total.metric, sli.total.labels)
        part_query = sli.good if sli.good is not None else sli.bad
        assert part_query is not None  # the model requires one of them
        counted = self._counter(rows, answered, part_query.metric, part_query.labels)
        good = counted if sli.good is not None else np.maximum(events - counted, 0.0)
        return StepArrays(self.ends, np.where(events < good, events, good), events, answered)


def _counter_key(metric: str, where: Mapping[str, str] | None = None) -> CounterKey:
    # The store keys counters by their exposed names (with _total), as scraped.
    return schema.get_spec(metric).exposed_name, tuple(sorted((where or {}).items()))


def _counter_keys(slo: Slo) -> list[CounterKey]:
    """The counters an SLO's steps are made of (latency: none, up-ness comes apart)."""
    sli = slo.sli
    if isinstance(sli, AvailabilitySli):
        return [_counter_key(schema.REQUESTS)] + [
            _counter_key(schema.REQUEST_ERRORS, {schema.ERROR_TYPE: e}) for e in sli.errors]
    if isinstance(sli, ThroughputSli):
        return [_counter_key(name) for name in sli.counters]
    if isinstance(sli, RatioSli):
        part = sli.good if sli.good is not None else sli.bad
        assert part is not None  # the model requires one of them
        return [_counter_key(sli.total.metric, sli.total.labels),
                _counter_key(part.metric, part.labels)]
    return []
