"""What the collector produces and the store keeps: one target's metrics over one interval.

Only additive primitives are kept: counter increases, histogram bucket increases, and gauge
statistics. Anything derived (tokens/s, p99 TTFT, error ratios, batch utilisation) is computed
from these with ``monitor.collect.derive`` for whatever window is asked, so a ratio over a day is
summed errors over summed requests, never a mean of per-interval ratios, and a p99 over a
month comes from merged buckets, never from averaged percentiles.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# A series of the normalized schema: metric name (as exposed, counters with _total, histograms
# without _bucket) and its labels in canonical order, e.g.
#   gen_ai_server_requests_total{finish_reason="stop",model="tiny"}
SeriesKey = str

def series_key(name: str, labels: Mapping[str, str]) -> SeriesKey:
    """Canonical key: labels sorted by name; ``le`` never part of it."""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()) if k != "le")
    return f"{name}{{{inner}}}"


def split_key(key: SeriesKey) -> tuple[str, dict[str, str]]:
    """Inverse of series_key."""
    name, _, rest = key.partition("{")
    labels: dict[str, str] = {}
    body = rest[:-1]
    i = 0
    while i < len(body):
        eq = body.index("=", i)
        j, value = eq + 2, []
        while body[j] != '"':
            if body[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(body[j], body[j]))
            else:
                value.append(body[j])
            j += 1
        labels[body[i:eq]] = "".join(value)
        i = j + 2  # past the closing quote and the comma
    return name, labels


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class TargetState(enum.StrEnum):
    UP = "up"          # answered; deltas cover [start, end)
    FIRST = "first"    # answered for the first time (or after being down): no deltas yet
    DOWN = "down"      # did not answer or answered garbage: no values, an explicit gap


@dataclass(frozen=True, slots=True)
class HistogramDelta:
    """Increases of one histogram series over an interval.

    ``counts[i]`` is the number of observations in (bounds[i-1], bounds[i]]; the last entry is
    the +Inf bucket, so ``len(counts) == len(bounds) + 1``. Non-cumulative, so that two
    deltas with the same bounds merge by adding.
    """

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float
    count: float

    def __post_init__(self) -> None:
        if len(self.counts) != len(self.bounds) + 1:
            raise ValueError(f"{len(self.bounds)} bounds need {len(self.bounds) + 1} counts, "
                             f"got {len(self.counts)}")
        if any(b >= a for a, b in zip(self.bounds[1:], self.bounds)):
            raise ValueError("histogram bounds must be strictly increasing")

    def cumulative(self) -> list[float]:
        """Cumulative counts per finite bound, then +Inf (what histogram_quantile reads)."""
        total, out = 0.0, []
        for c in self.counts:
            total += c
            out.append(total)
        return out

    def count_at_most(self, threshold: float) -> float:
        """Observations <= threshold; exact when threshold is a bound (an SLI's 'good')."""
        total = 0.0
        for bound, c in zip(self.bounds, self.counts):
            if bound > threshold:
                break
            total += c
        return total

    def merge(self, other: HistogramDelta) -> HistogramDelta:
        if other.bounds != self.bounds:
            raise ValueError("cannot merge histograms with different bucket bounds")
        return HistogramDelta(self.bounds,
                              tuple(a + b for a, b in zip(self.counts, other.counts)),
                              self.sum + other.sum, self.count + other.count)


def rebucket(delta: HistogramDelta, bounds: tuple[float, ...]) -> HistogramDelta:
    """The same observations over ``bounds``, a subset of ``delta.bounds`` (exact there)."""
    if bounds == delta.bounds:
        return delta
    cumulative = delta.cumulative()
    index = {bound: i for i, bound in enumerate(delta.bounds)}
    kept = [cumulative[index[bound]] for bound in bounds] + [cumulative[-1]]
    counts = [kept[0]] + [b - a for a, b in zip(kept, kept[1:])]
    return HistogramDelta(bounds, tuple(counts), delta.sum, delta.count)


def common_bounds(all_bounds: Iterable[tuple[float, ...]]) -> tuple[float, ...]:
    """Bounds every layout has: merging across a bucket-layout change stays exact there."""
    layouts = list(all_bounds)
    shared = set(layouts[0]).intersection(*layouts[1:])
    return tuple(sorted(shared))


def merge_deltas(deltas: Sequence[HistogramDelta]) -> HistogramDelta:
    """Sum of deltas; different layouts (an engine upgrade, two engine versions) are first
    reduced to the bounds they share rather than re-binned by interpolation."""
    layouts = {d.bounds for d in deltas}
    bounds = deltas[0].bounds if len(layouts) == 1 else common_bounds(layouts)
    merged = rebucket(deltas[0], bounds)
    for delta in deltas[1:]:
        merged = merged.merge(rebucket(delta, bounds))
    return merged


@dataclass(frozen=True, slots=True)
class GaugeStats:
    """A gauge over an interval: enough to merge into longer windows exactly."""

    last: float
    total: float = 0.0      # sum of readings
    num_readings: int = 0
    minimum: float = math.inf
    maximum: float = -math.inf

    @classmethod
    def of(cls, value: float) -> GaugeStats:
        return cls(value, value, 1, value, value)

    @property
    def mean(self) -> float:
        return self.total / self.num_readings if self.num_readings else math.nan

    def merge(self, later: GaugeStats) -> GaugeStats:
        return GaugeStats(later.last, self.total + later.total,
                          self.num_readings + later.num_readings,
                          min(self.minimum, later.minimum), max(self.maximum, later.maximum))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One target over [start, end), unix seconds; ``end`` is the scrape that produced it."""

    target: str
    start: float
    end: float
    state: TargetState
    error: str | None = None
    counters: Mapping[SeriesKey, float] = field(default_factory=dict)
    gauges: Mapping[SeriesKey, GaugeStats] = field(default_factory=dict)
    histograms: Mapping[SeriesKey, HistogramDelta] = field(default_factory=dict)
    # Seconds of [start, end) whose increases are in this snapshot (None: the whole duration
    # if UP, else 0). Rates divide by it, so a window with a gap is not diluted by the gap.
    seconds_with_increases: float | None = None
    # The engines the scraped page was read as (detected when the target's engine is auto);
    # not stored: the targets API shows the last answering scrape's.
    engines: tuple[str, ...] = ()

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def covered_seconds(self) -> float:
        if self.seconds_with_increases is not None:
            return self.seconds_with_increases
        return self.duration if self.state is TargetState.UP else 0.0


def merge_snapshots(target: str, parts: Iterable[Snapshot]) -> Snapshot:
    """Totals of consecutive snapshots of one target (a rollup, or a window for a query).

    Down intervals contribute nothing but are not hidden: the result is DOWN only when every
    part was down.
    """
    counters: dict[SeriesKey, float] = {}
    gauges: dict[SeriesKey, GaugeStats] = {}
    histograms: dict[SeriesKey, list[HistogramDelta]] = {}
    start, end, any_up, covered = math.inf, -math.inf, False, 0.0
    for part in sorted(parts, key=lambda s: s.end):
        start, end = min(start, part.start), max(end, part.end)
        covered += part.covered_seconds
        any_up = any_up or part.state is not TargetState.DOWN
        for key, value in part.counters.items():
            counters[key] = counters.get(key, 0.0) + value
        for key, stats in part.gauges.items():
            gauges[key] = gauges[key].merge(stats) if key in gauges else stats
        for key, delta in part.histograms.items():
            histograms.setdefault(key, []).append(delta)
    state = TargetState.UP if any_up else TargetState.DOWN
    merged = {key: merge_deltas(deltas) for key, deltas in histograms.items()}
    return Snapshot(target, start, end, state, None, counters, gauges, merged, covered)
