"""Where the evaluator's SLI events come from: the store, read per step.

``StoreSliSource.read`` reads one SLO with per-selector queries, a step object each;
``read_many`` (and ``read_arrays``, one SLO in columns) reads many SLOs over one range with a
query per metric for all their targets (``monitor.slo.bulk_source``). Both give the same steps
(``tests/monitor/slo/test_bulk_source.py``); the evaluator and the report read in bulk.

An SLI reads as (good, total) per step plus whether any selected target answered in it
(``has_data``): a step where targets were up and nothing happened is zero events; a step where
none answered is no data, which the evaluator never counts as met. Throughput SLIs read
(tokens, seconds with data): the evaluator judges each timeslice's rate.

The PromQL equivalents of these reads are in ``monitor.slo.rules``; both follow the same
definitions (``monitor.slo.spec``).
"""

from __future__ import annotations

__all__ = ["ArraySliSource", "BulkSliSource", "MinuteArraySource", "SliSource", "Step",
           "StepArrays", "StoreSliSource", "read_arrays"]

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from exporters import schema
from monitor.slo.bulk_source import bucket_bound, read_many
from monitor.slo.event_source import goodput_steps
from monitor.slo.spec import (
    PRE_ENGINE_ERRORS,
    AvailabilitySli,
    GoodputSli,
    LatencySli,
    RatioSli,
    Slo,
    ThroughputSli,
)
from monitor.slo.steps import (
    ArraySliSource,
    BulkSliSource,
    Floats,
    SliSource,
    Step,
    StepArrays,
    read_arrays,
)
from monitor.slo.thresholds import threshold_warnings
from monitor.store.db import Store
from monitor.store.queries import (
    Selector,
    counter_series,
    histogram_series,
    series_label_sets,
)
from monitor.store.request_events import RequestFilter, distinct_request_label_sets


class StoreSliSource:
    """Reads SLIs from the store's counters and histograms (exact bucket counts)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read_many(self, slos: Sequence[Slo], start: float, end: float,
                  step: float) -> dict[str, StepArrays | Exception]:
        """Many SLOs over one range, each metric read once for all targets
        (``monitor.slo.bulk_source``): the same steps as ``read`` gives each of them."""
        return read_many(self.store, slos, start, end, step,
                         lambda slo: self.read(slo, start, end, step))

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        """``read`` in columns, through the bulk read (a report reads a month of minutes)."""
        answer = self.read_many([slo], start, end, step)[slo.name]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def threshold_warnings(self, slo: Slo, start: float, end: float) -> list[str]:
        """Targets whose stored buckets lack the SLO's latency threshold, and the SLI bounds
        that implies (``monitor.slo.thresholds``)."""
        return threshold_warnings(self.store, slo, start, end)

    def group_values(self, slo: Slo, start: float, end: float) -> list[dict[str, str]]:
        """A split SLO's groups: the values of its grouping labels among the stored series of
        its total counter (a ratio SLI: every series stored, as Prometheus' ``sum by`` has a
        group for each series in range; one with no events in a window is not judged there),
        or among its request events from ``start`` to ``end`` (a goodput SLI)."""
        sli = slo.sli
        if isinstance(sli, RatioSli):
            total = schema.get_spec(sli.total.metric).exposed_name
            return series_label_sets(self.store, total, slo.grouping, sli.total.labels)
        if isinstance(sli, GoodputSli):
            return distinct_request_label_sets(self.store.engine, slo.grouping, RequestFilter(
                start, end, model=sli.model, tenant=sli.tenant, slo_class=sli.slo_class))
        raise ValueError(f"SLO {slo.name}: a {sli.kind} SLI is not judged per group")

    def read(self, slo: Slo, start: float, end: float, step: float) -> list[Step]:
        selector = Selector(slo.selector.target, slo.selector.labels)
        sli = slo.sli
        if isinstance(sli, LatencySli):
            return self._latency(selector, sli, start, end, step)
        if isinstance(sli, AvailabilitySli):
            return self._availability(selector, sli, start, end, step)
        if isinstance(sli, ThroughputSli):
            return self._throughput(selector, sli, start, end, step)
        if isinstance(sli, GoodputSli):
            return goodput_steps(self.store, sli, _step_ends(start, end, step), start)
        return self._ratio(selector, sli, start, end, step)

    def _counter(self, selector: Selector, metric: str, start: float, end: float,
                 step: float, where: dict[str, str] | None = None
                 ) -> list[tuple[float, float | None]]:
        # The store keys counters by their exposed names (with _total), as scraped.
        exposed = schema.get_spec(metric).exposed_name
        return counter_series(self.store, selector, exposed, start, end, step, where)

    def _latency(self, selector: Selector, sli: LatencySli, start: float, end: float,
                 step: float) -> list[Step]:
        # Up-ness comes with any counter read (it is per target, not per series).
        answered = self._counter(selector, schema.REQUESTS, start, end, step)
        deltas = histogram_series(self.store, selector, sli.histogram, start, end, step)
        steps = []
        for (t, up), (_, delta) in zip(answered, deltas, strict=True):
            good = total = 0.0
            if delta is not None:
                good = delta.count_at_most(_bound(delta.bounds, sli))
                total = float(sum(delta.counts))
            steps.append(Step(t, good, total, up is not None))
        return steps

    def _availability(self, selector: Selector, sli: AvailabilitySli, start: float,
                      end: float, step: float) -> list[Step]:
        requests = self._counter(selector, schema.REQUESTS, start, end, step)
        totals = [v or 0.0 for _, v in requests]
        bad = [0.0] * len(requests)
        for error in sli.errors:
            errors = self._counter(selector, schema.REQUEST_ERRORS, start, end, step,
                                   {schema.ERROR_TYPE: error})
            for k, (_, v) in enumerate(errors):
                bad[k] += v or 0.0
                if error in PRE_ENGINE_ERRORS:  # refused before the engine counted them
                    totals[k] += v or 0.0
        return [Step(t, max(total - b, 0.0), total, up is not None)
                for (t, up), total, b in zip(requests, totals, bad, strict=True)]

    def _throughput(self, selector: Selector, sli: ThroughputSli, start: float, end: float,
                    step: float) -> list[Step]:
        series = [self._counter(selector, name, start, end, step) for name in sli.counters]
        steps = []
        previous_end = start
        for k, (t, up) in enumerate(series[0]):
            tokens = sum(s[k][1] or 0.0 for s in series)
            seconds = t - previous_end if up is not None else 0.0
            steps.append(Step(t, tokens, seconds, up is not None))
            previous_end = t
        return steps

    def _ratio(self, selector: Selector, sli: RatioSli, start: float, end: float,
               step: float) -> list[Step]:
        total = self._counter(selector, sli.total.metric, start, end, step, sli.total.labels)
        part_query = sli.good if sli.good is not None else sli.bad
        assert part_query is not None  # the model requires one of them
        part = self._counter(selector, part_query.metric, start, end, step, part_query.labels)
        steps = []
        for (t, up), (_, p) in zip(total, part, strict=True):
            events, counted = up or 0.0, p or 0.0
            good = counted if sli.good is not None else max(events - counted, 0.0)
            steps.append(Step(t, min(good, events), events, up is not None))
        return steps


def _bound(bounds: Sequence[float], sli: LatencySli) -> float:
    return bucket_bound(bounds, sli)


class MinuteArraySource:
    """SLIs given as arrays of per-minute (good, total, has_data) from ``start`` (Unix
    seconds, a minute boundary): synthetic series for tests, benchmarks and replays. A step
    holds the minutes that end inside it."""

    def __init__(self, start: float,
                 series: dict[str, tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]]) -> None:
        if start % 60:
            raise ValueError(f"start {start} is not a minute boundary")
        self.start = start
        self._cumulative: dict[str, npt.NDArray[np.float64]] = {}
        for name, (good, total, has_data) in series.items():
            total = np.asarray(total, dtype=np.float64)
            rows = np.zeros((len(total) + 1, 3))
            rows[1:, 0] = np.cumsum(good)
            rows[1:, 1] = np.cumsum(total)
            rows[1:, 2] = np.cumsum(np.asarray(has_data, dtype=np.float64))
            self._cumulative[name] = rows

    def read(self, slo: Slo, start: float, end: float, step: float) -> list[Step]:
        return self.read_arrays(slo, start, end, step).steps()

    def group_values(self, slo: Slo, start: float, end: float) -> list[dict[str, str]]:
        """A split SLO's groups: the series named ``NAME/tenant=busy`` (``monitor.slo.groups``)."""
        found = []
        for name in self._cumulative:
            head, _, tail = name.partition("/")
            if head == slo.name and tail:
                found.append(dict(pair.split("=", 1) for pair in tail.split(",")))
        return found

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        rows = self._cumulative[slo.name]
        ends = _step_ends(start, end, step)
        if not len(ends):
            return StepArrays(ends, ends.copy(), ends.copy(), np.zeros(0, dtype=np.bool_))
        lo = self._minutes_through(rows, np.concatenate(([start], ends[:-1])))
        counts = rows[self._minutes_through(rows, ends)] - rows[lo]
        return StepArrays(ends, counts[:, 0].copy(), counts[:, 1].copy(), counts[:, 2] > 0)

    def _minutes_through(self, rows: npt.NDArray[np.float64],
                         t: Floats) -> npt.NDArray[np.int64]:
        return np.clip((t - self.start) // 60, 0, len(rows) - 1).astype(np.int64)


def _step_ends(start: float, end: float, step: float) -> Floats:
    """Ends of the steps (t, min(t + step, end)] from ``start`` while t < end."""
    starts = start + step * np.arange(math.ceil((end - start) / step) + 1, dtype=np.float64)
    starts = starts[starts < end - 1e-9]
    return np.minimum(starts + step, end)
