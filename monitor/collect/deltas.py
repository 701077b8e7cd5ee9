"""Snapshots from two readings of one target: what happened between two scrapes.

- counters, each histogram bucket, _sum and _count: ``now - before``, or ``now`` when the
  value went down (a restart reset it: Prometheus' rate() reads it the same way) or the series
  is new since the last scrape (it started from 0 in between);
- a histogram whose bounds changed, or any of whose buckets or count went down, restarts as a
  whole: its delta is its current content (per-bucket reset detection could mix a reset bucket
  with a non-reset neighbour and give negative bucket counts);
- gauges: the reading, as ``GaugeStats.of(value)``.
"""

from __future__ import annotations

from collections.abc import Mapping

from monitor.collect.scrape import CumulativeHistogram, Reading
from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    SeriesKey,
    Snapshot,
    TargetState,
)


def build_snapshot(target: str, previous: Reading | None, current: Reading, start: float,
                   end: float) -> Snapshot:
    """The snapshot of ``current`` against the previous good reading (FIRST if none)."""
    gauges = {key: GaugeStats.of(value) for key, value in current.gauges.items()}
    if previous is None:
        return Snapshot(target, start, end, TargetState.FIRST, None, {}, gauges, {},
                        engines=current.engines)
    histograms = {key: histogram_delta(previous.histograms.get(key), histogram)
                  for key, histogram in current.histograms.items()}
    return Snapshot(target, start, end, TargetState.UP, None,
                    counter_increases(previous.counters, current.counters), gauges, histograms,
                    engines=current.engines)


def counter_increases(previous: Mapping[SeriesKey, float],
                      current: Mapping[SeriesKey, float]) -> dict[SeriesKey, float]:
    """Increase per series with rate()'s reset rule; a new series counts from 0."""
    increases: dict[SeriesKey, float] = {}
    for key, value in current.items():
        before = previous.get(key)
        increases[key] = value if before is None or value < before else value - before
    return increases


def histogram_delta(previous: CumulativeHistogram | None,
                    current: CumulativeHistogram) -> HistogramDelta:
    """The observations between two readings of one histogram series, per bucket."""
    if previous is None or _restarted(previous, current):
        base_cumulative, base_sum, base_count = (0.0,) * len(current.cumulative), 0.0, 0.0
    else:
        base_cumulative, base_sum, base_count = previous.cumulative, previous.sum, previous.count
    counts: list[float] = []
    below = 0.0
    for now, before in zip(current.cumulative, base_cumulative):
        # The running maximum (as histogram_quantile's monotonic fix) keeps a bucket count of
        # a page with non-monotonic buckets at 0 instead of negative.
        cumulative = max(now - before, below)
        counts.append(cumulative - below)
        below = cumulative
    return HistogramDelta(current.bounds, tuple(counts), current.sum - base_sum,
                          current.count - base_count)


def _restarted(previous: CumulativeHistogram, current: CumulativeHistogram) -> bool:
    return (previous.bounds != current.bounds or current.count < previous.count
            or any(now < before for now, before in zip(current.cumulative, previous.cumulative)))
