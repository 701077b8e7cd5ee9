"""One scrape of one target: fetch its /metrics page, parse it, normalize it onto the schema,
and read the result as cumulative values per series (a ``Reading``).

The fetch (exporters.fetch), the parser, the engine detection and the mapping tables are the
exporters' own, shared with the bridge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field


from exporters.adapters import (
    NormalizedFamily,
    NormalizedPage,
    normalize_engines,
)
from exporters.fetch import ScrapeError, engines_for, require_samples
from exporters.exposition import ParsedPage, parse_page
from exporters.schema import MetricType
from monitor.collect.config import TargetConfig
from monitor.collect.snapshot import SeriesKey, series_key

@dataclass(frozen=True, slots=True)
class CumulativeHistogram:
    """A histogram series as exposed: cumulative count per finite bound, then +Inf."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]  # len(bounds) + 1, the last is the +Inf bucket
    sum: float
    count: float


@dataclass(slots=True)
class Reading:
    """The cumulative values of one target's normalized page at one scrape."""

    counters: dict[SeriesKey, float] = field(default_factory=dict)
    gauges: dict[SeriesKey, float] = field(default_factory=dict)
    histograms: dict[SeriesKey, CumulativeHistogram] = field(default_factory=dict)
    engines: tuple[str, ...] = ()  # the mapping tables the page was read with


def normalize_text(text: str, target: TargetConfig, max_bytes: int) -> NormalizedPage:
    """The page mapped onto the schema by the target's engine (detected when auto), or
    ScrapeError ("parse", "unknown_engine") when nothing on it can be used."""
    return normalize_parsed(parse_page(text, target.url, max_bytes), target)


def normalize_parsed(parsed: ParsedPage, target: TargetConfig) -> NormalizedPage:
    """normalize_text's second half: a parsed page mapped onto the schema."""
    require_samples(parsed, target.url)
    page = normalize_engines(parsed, engines_for(parsed, target.engine))
    if not page.families:
        raise ScrapeError("unknown_engine", f"{target.url}: no {target.engine} metrics on the "
                                            f"page ({len(page.unmapped)} unmapped metrics)")
    return page


def read_page(page: NormalizedPage) -> Reading:
    """The page's values by series key (counters keep their _total name, histograms their
    base name with ``le`` dropped)."""
    reading = Reading(engines=page.engines)
    for family in page.families:
        if family.type is MetricType.HISTOGRAM:
            reading.histograms.update(_histograms(family))
            continue
        values = reading.counters if family.type is MetricType.COUNTER else reading.gauges
        for sample in family.samples:
            values[series_key(sample.name, sample.labels)] = sample.value
    return reading


def _histograms(family: NormalizedFamily) -> Iterable[tuple[SeriesKey, CumulativeHistogram]]:
    buckets: dict[SeriesKey, dict[float, float]] = {}
    sums: dict[SeriesKey, float] = {}
    counts: dict[SeriesKey, float] = {}
    for sample in family.samples:
        key = series_key(family.name, sample.labels)  # series_key leaves out le
        suffix = sample.name[len(family.name):]
        if suffix == "_bucket":
            buckets.setdefault(key, {})[float(sample.labels["le"])] = sample.value
        elif suffix == "_sum":
            sums[key] = sample.value
        elif suffix == "_count":
            counts[key] = sample.value
    for key, by_bound in buckets.items():
        ordered = sorted(by_bound.items())  # the normalizer always gives a +Inf bucket
        if not ordered or not math.isinf(ordered[-1][0]):
            continue
        cumulative = tuple(count for _, count in ordered)
        count = counts.get(key, cumulative[-1])
        # An engine without _sum still has a usable distribution; its sum is unknown.
        yield key, CumulativeHistogram(tuple(b for b, _ in ordered[:-1]), cumulative,
                                       sums.get(key, math.nan), count)
