"""Latency SLO thresholds against the edges a target really stores (issue 21).

``LatencySli`` checks a threshold against the schema's buckets: exact for the targets that
use them (the reference server, the instrumentation). An engine scraped through an adapter
keeps its own edges (``HistogramDelta.bounds`` as stored: vLLM's TTFT has no 2.0 s edge), and
there a threshold between two edges cannot be counted. The evaluator then counts good events
at the edge below the threshold (``HistogramDelta.count_at_most``), an exact count of a
stricter SLI: the SLI it reports is a lower bound, never an interpolated guess. This module
finds such targets from the stored bounds at run time (never from a table of engines) and
says what it costs: the SLO's SLI with good events counted at the edge below and at the edge
above, between which the true SLI lies. Those bounds are the SLO's, over all its selected
targets (the SLI reported beside them is): a fast vLLM target behind one SLO with a slow target
whose buckets hold the threshold once read "between 100% and 100%" beside an SLI of 34%
(issue 30); the target's own share is said apart. ``inferwatch slo buckets``
(``monitor.slo.buckets_cli``) writes the engine flag that adds the missing edges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.collect.snapshot import HistogramDelta
from monitor.slo.edges import is_edge
from monitor.slo.spec import LatencySli, Slo
from monitor.store import Selector, Store
from monitor.store.queries import histogram_series

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
        if is_edge(delta.bounds, threshold):
            return None
        below = [b for b in delta.bounds if b < threshold]
        above = [b for b in delta.bounds if b > threshold]
        lower = below[-1] if below else 0.0
        upper = above[0] if above else math.inf
        total = float(sum(delta.counts))
        good_upper = delta.count_at_most(upper) if above else total
        return cls(target, histogram, threshold, lower, upper,
                   delta.count_at_most(threshold), good_upper, total)

    def message(self, slo: str, bounds: SloBounds | None = None) -> str:
        """The warning, with the SLI bounds of the SLO (``bounds``, over all its targets;
        this target's own when it is the only one)."""
        bounds = bounds or SloBounds(self.good_lower, self.good_upper, self.total, 1)
        edges = f"{_s(self.lower)} and {_s(self.upper)}"
        sli = "no events yet"
        if bounds.total > 0 and bounds.num_targets == 1:
            sli = (f"between {bounds.good_lower / bounds.total:.4%} (at {_s(self.lower)}) and "
                   f"{bounds.good_upper / bounds.total:.4%} (at {_s(self.upper)}) over the "
                   f"{bounds.total:,.0f} events read")
        elif bounds.total > 0:
            own = "none of them"
            if self.total > 0:
                own = (f"{self.good_lower / self.total:.4%} at {_s(self.lower)} to "
                       f"{self.good_upper / self.total:.4%} at {_s(self.upper)} of its "
                       f"{self.total:,.0f}")
            sli = (f"between {bounds.good_lower / bounds.total:.4%} and "
                   f"{bounds.good_upper / bounds.total:.4%} over the {bounds.total:,.0f} events "
                   f"read from its {bounds.num_targets} targets ({self.target}: {own})")
        return (f"SLO {slo}: target {self.target} stores {self.histogram} without an edge at "
                f"the threshold {_s(self.threshold)} (nearest edges {edges}): good events are "
                f"counted at {_s(self.lower)}, so the SLI is a lower bound; the true SLI is "
                f"{sli}. Add the edge to the engine's buckets (inferwatch slo buckets)")


@dataclass(frozen=True, slots=True)
class SloBounds:
    """The SLO's good events over all its selected targets: as the evaluator counts them
    (``good_lower``: exact where a target's buckets hold the threshold, at the edge below
    where not) and with every off-edge target counted at its edge above (``good_upper``)."""

    good_lower: float
    good_upper: float
    total: float
    num_targets: int    # selected targets with the histogram stored over the range


def _deltas(store: Store, slo: Slo, start: float, end: float) -> list[tuple[str, HistogramDelta]]:
    """Each selected target's latency histogram over (start, end], bounds merged over the
    range as the evaluator merges them; [] for SLOs that are not latency SLOs."""
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
            found.append((target.name, delta))
    return found


def _off_edge(slo: Slo, deltas: Sequence[tuple[str, HistogramDelta]]) -> list[OffEdge]:
    sli = slo.sli
    if not isinstance(sli, LatencySli):
        return []
    return [gap for name, delta in deltas
            if (gap := OffEdge.of(name, sli.histogram, sli.threshold_seconds, delta))]


def off_edge(store: Store, slo: Slo, start: float, end: float) -> list[OffEdge]:
    """The selected targets whose buckets stored over (start, end] lack the SLO's
    threshold; [] for SLOs that are not latency SLOs."""
    return _off_edge(slo, _deltas(store, slo, start, end))


def threshold_warnings(store: Store, slo: Slo, start: float, end: float) -> list[str]:
    """One warning per off-edge target, each with the SLO's SLI bounds over the range."""
    deltas = _deltas(store, slo, start, end)
    gaps = _off_edge(slo, deltas)
    sli = slo.sli
    if not gaps or not isinstance(sli, LatencySli):
        return []
    good = sum(delta.count_at_most(sli.threshold_seconds) for _, delta in deltas)
    bounds = SloBounds(good, good + sum(g.good_upper - g.good_lower for g in gaps),
                       sum(float(sum(delta.counts)) for _, delta in deltas), len(deltas))
    return [gap.message(slo.name, bounds) for gap in gaps]


def _s(seconds: float) -> str:
    return "+Inf" if math.isinf(seconds) else f"{seconds:g}s"
