"""Latency SLO thresholds against the edges a target really stores (issue 21).

``LatencySli`` checks a threshold against the schema's buckets: exact for the targets that
use them (the reference server, the instrumentation). An engine scraped through an adapter
keeps its own edges (``HistogramDelta.bounds`` as stored: vLLM's TTFT has no 2.0 s edge), and
there a threshold between two edges cannot be counted. The evaluator then counts good events
at the edge below the threshold (``HistogramDelta.count_at_most``), an exact count of a
stricter SLI: the SLI it reports is a lower bound, never an interpolated guess. This module
finds such targets from the stored bounds at run time (never from a table of engines) and
says what it costs: the SLI at the edge below and at the edge above, between which the true
SLI lies. ``inferwatch slo buckets`` (``monitor.slo.buckets_cli``) writes the engine flag that
adds the missing edges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.collect.snapshot import HistogramDelta
from monitor.slo.spec import LatencySli, Slo
from monitor.store import Selector, Store
from monitor.store.queries import histogram_series

# As bucket_bound matches a threshold to a stored bound.
_REL_TOLERANCE = 1e-9


def on_an_edge(bounds: Sequence[float], threshold: float) -> bool:
    return any(abs(b - threshold) <= _REL_TOLERANCE * threshold for b in bounds)


@dataclass(frozen=True, slots=True)
class OffEdge:
    """A latency threshold a target's stored buckets lack, and the SLI bounds it implies."""

    target: str
    histogram: str
    threshold: float
    lower: float        # the nearest edge below (0: none, good counts nothing)
    upper: float        # the nearest edge above (inf: none, good would be every event)
    good_lower: float   # events at or under ``lower``: what the evaluator counts as good
    good_upper: float   # events at or under ``upper``
    total: float

    @classmethod
    def of(cls, target: str, histogram: str, threshold: float,
           delta: HistogramDelta) -> OffEdge | None:
        """None when the threshold is an edge of ``delta`` (the count is exact)."""
        if on_an_edge(delta.bounds, threshold):
            return None
        below = [b for b in delta.bounds if b < threshold]
        above = [b for b in delta.bounds if b > threshold]
        lower = below[-1] if below else 0.0
        upper = above[0] if above else math.inf
        total = float(sum(delta.counts))
        good_upper = delta.count_at_most(upper) if above else total
        return cls(target, histogram, threshold, lower, upper,
                   delta.count_at_most(threshold), good_upper, total)

    def message(self, slo: str) -> str:
        edges = f"{_s(self.lower)} and {_s(self.upper)}"
        sli = "no events yet"
        if self.total > 0:
            sli = (f"between {self.good_lower / self.total:.4%} (at {_s(self.lower)}) and "
                   f"{self.good_upper / self.total:.4%} (at {_s(self.upper)}) over the period")
        return (f"SLO {slo}: target {self.target} stores {self.histogram} without an edge at "
                f"the threshold {_s(self.threshold)} (nearest edges {edges}): good events are "
                f"counted at {_s(self.lower)}, so the SLI is a lower bound; the true SLI is "
                f"{sli}. Add the edge to the engine's buckets (inferwatch slo buckets)")


def off_edge(store: Store, slo: Slo, start: float, end: float) -> list[OffEdge]:
    """The selected targets whose buckets stored over (start, end] lack the SLO's
    threshold (bounds merged over the range as the evaluator merges them); [] for SLOs
    that are not latency SLOs."""
    sli = slo.sli
    if not isinstance(sli, LatencySli) or end <= start:
        return []
    selector = Selector(slo.selector.target, slo.selector.labels)
    found = []
    for target in store.targets():
        if not selector.matches(target.name, target.labels):
            continue
        (_, delta), = histogram_series(store, Selector(target=target.name), sli.histogram,
                                       start, end, end - start)
        if delta is not None:
            gap = OffEdge.of(target.name, sli.histogram, sli.threshold_seconds, delta)
            if gap is not None:
                found.append(gap)
    return found


def threshold_warnings(store: Store, slo: Slo, start: float, end: float) -> list[str]:
    return [gap.message(slo.name) for gap in off_edge(store, slo, start, end)]


def _s(seconds: float) -> str:
    return "+Inf" if math.isinf(seconds) else f"{seconds:g}s"
