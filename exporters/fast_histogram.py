"""A histogram for one writer thread on a hot path, exported at scrape time.

prometheus_client's Histogram scans every bound and takes a lock on each observe: about
0.8 us per observation with our ~100 latency buckets, paid once per generated token for
inter-token latency. The engine loop is the only thread that records, so a bucket index by
binary search and a plain increment suffice (~0.2 us). A scrape copies the counts; it may
see a bucket incremented before the sum, a skew of one observation that the next scrape
corrects, which is what Prometheus tolerates from any exporter.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["SingleWriterHistogram"]


class _Child:
    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)   # the last one is the +Inf bucket
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # The first bound >= value: Prometheus buckets are "less than or equal".
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value


class SingleWriterHistogram(Collector):
    """Same constructor shape and ``labels(...).observe(v)`` use as prometheus_client's
    Histogram, for series recorded by a single thread."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 buckets: Iterable[float], registry: CollectorRegistry) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = list(labelnames)
        self._bounds = sorted({float(b) for b in buckets if not math.isinf(b)})
        if not self._bounds:
            raise ValueError(f"{name}: a histogram needs at least one finite bucket bound")
        self._children: dict[tuple[str, ...], _Child] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Child:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = _Child(self._bounds)
        return child

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            counts, total = list(child.counts), child.sum
            cumulative, buckets = 0.0, []
            for bound, count in zip(self._bounds, counts):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))  # type: ignore[no-untyped-call]
            buckets.append(("+Inf", cumulative + counts[-1]))
            family.add_metric(list(values), buckets, sum_value=total)
        yield family
