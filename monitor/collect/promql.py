"""Snapshots read from a PromQL API (Prometheus, Thanos, Mimir, VictoriaMetrics).

For teams whose metrics already live in Prometheus: instead of scraping the engine, ask the
Prometheus that scrapes it, and produce the same ``Snapshot`` the built-in collector does, so
the same derive/SLO code runs on either source. The series must be in the normalized schema
(scraped from the reference server or through the bridge exporter).

Increase semantics. PromQL's ``increase(m[w])`` is not used: it extrapolates to the window
edges (non-integer results for integer counters) and ignores what happened between the last
sample before the window and the first one inside it, so adjacent windows do not add up to
the total. Instead two raw-sample queries are made and the increase is computed here with
the collector's rules (monitor.collect.collector), applied to every scrape Prometheus made:

    increase over (start, end] = value of the last sample <= end - value of the last sample
                                 <= start, adding back the value before each counter reset

The baseline "last sample <= start" is an instant query at ``start`` (within the server's
lookback, 5 min by default); the samples in (start, end] are a range selector evaluated at
``end``. The two partition the samples (a sample exactly at ``start`` is the baseline only,
though Prometheus 2 returns it in the range too), so consecutive windows tile:
their increases sum to the increase over their union, and equal the collector's deltas when
both scrape at the same moments. As in the collector:

- a drop in value is a reset (the counter restarted from 0, its whole value counts), and a
  series new since the baseline counts from 0;
- a histogram resets as a whole: a drop in any of its buckets or its count resets every
  series of it at that scrape, and bucket counts never go negative;
- a target without any baseline (first seen, or back after its series went stale) is FIRST:
  gauges only, no increases;
- gauges give ``GaugeStats`` over every sample in the window (the collector has one reading
  per interval, Prometheus one per scrape: the same statistic over more readings).

Errors. Prometheus unreachable, a timeout, a 5xx or an evaluation error give a DOWN snapshot
with the error text; so does a window without any sample of the target. An invalid query
(``bad_data``, e.g. a malformed selector) and a selector that matches several targets are
the caller's mistake and raise.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import httpx
import pydantic

from exporters.schema import SCHEMA, MetricSpec, MetricType
from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    SeriesKey,
    Snapshot,
    TargetState,
    series_key,
)

# Labels Prometheus attaches to every series of a scrape target; dropped from series keys so
# that keys equal the collector's, unless the caller keeps them.
TARGET_LABELS: Final = ("job", "instance")
_HISTOGRAM_SUFFIXES: Final = ("_bucket", "_sum", "_count")
_BAD_DATA: Final = "bad_data"
_LONG_NAME_REGEX: Final = re.compile(r'__name__=~"([^"]{100,})"')

Sample = tuple[float, float]  # (unix seconds, value)


class PromQLError(Exception):
    """A PromQL query that gave no usable answer; the message names the URL and the query."""

    def __init__(self, url: str, query: str, problem: str) -> None:
        super().__init__(f"{url}: {problem} (query: {_abbreviate(query)})")
        self.url, self.query, self.problem = url, query, problem


def _abbreviate(query: str) -> str:
    """The query with a long __name__ regex cut short: the schema's names run to kilobytes,
    while the selector is what a reader needs (``.query`` keeps it all)."""
    def cut(match: re.Match[str]) -> str:
        names = match[1]
        return f'__name__=~"{names[:60]}...<{len(names) - 60} more characters>"'
    return _LONG_NAME_REGEX.sub(cut, query)


class PromQLUnavailableError(PromQLError):
    """No answer: connection refused, timeout, or a response that is not the PromQL API's."""


class PromQLQueryError(PromQLError):
    """The API answered with its error envelope; ``error_type`` is its errorType."""

    def __init__(self, url: str, query: str, error_type: str, problem: str) -> None:
        super().__init__(url, query, f"{error_type}: {problem}")
        self.error_type = error_type


class AmbiguousSelectorError(PromQLError):
    """The selector matches series of more than one target."""


# --- the API's response envelope (https://prometheus.io/docs/prometheus/latest/querying/api/)


class _Series(pydantic.BaseModel):
    metric: dict[str, str]
    values: list[tuple[float, float]] = []  # a matrix result
    value: tuple[float, float] | None = None  # a vector result


class _Data(pydantic.BaseModel):
    resultType: Literal["matrix", "vector"]
    result: list[_Series]


class _Envelope(pydantic.BaseModel):
    status: Literal["success", "error"]
    data: _Data | None = None
    errorType: str = "unknown"
    error: str = ""


@dataclass(frozen=True, slots=True)
class RawSeries:
    """One series of a query result: all its labels (``__name__`` included) and samples."""

    labels: Mapping[str, str]
    samples: tuple[Sample, ...]


class PromQLClient:
    """Instant queries against ``{base_url}/api/v1/query`` at an explicit time."""

    def __init__(self, base_url: str, http_client: httpx.AsyncClient, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.url = f"{base_url.rstrip('/')}/api/v1/query"
        self.http_client = http_client
        self.timeout = timeout

    async def query(self, query: str, at: float) -> list[RawSeries]:
        """The series of ``query`` evaluated at unix time ``at`` (matrix or vector result)."""
        # POST keeps long __name__ regexes out of the URL; `timeout` bounds the evaluation too.
        form = {"query": query, "time": f"{at:.3f}", "timeout": f"{round(self.timeout * 1000)}ms"}
        try:
            async with asyncio.timeout(self.timeout):  # httpx's bounds each phase, not the whole
                response = await self.http_client.post(self.url, data=form, timeout=self.timeout)
        except TimeoutError as exc:
            raise PromQLUnavailableError(self.url, query,
                                         f"no complete answer within {self.timeout:g} s") from exc
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise PromQLUnavailableError(self.url, query, problem) from exc
        envelope = self._parse(response, query)
        if envelope.status == "error":
            raise PromQLQueryError(self.url, query, envelope.errorType, envelope.error)
        if envelope.data is None:
            raise PromQLUnavailableError(self.url, query, "success without data")
        return [RawSeries(s.metric, tuple(s.values) if s.value is None else (s.value,))
                for s in envelope.data.result]

    def _parse(self, response: httpx.Response, query: str) -> _Envelope:
        try:
            return _Envelope.model_validate_json(response.content)
        except pydantic.ValidationError as exc:
            head = response.text[:200].strip()
            problem = f"HTTP {response.status_code}, not a PromQL API response: {head!r}"
            if response.is_success:  # JSON, but not what a matrix or vector query gives
                first = exc.errors()[0]
                problem = f"unexpected response: {first['msg']} at {first['loc']}"
            raise PromQLUnavailableError(self.url, query, problem) from None


# --- pure computations on raw samples ---------------------------------------------------------


def counter_increase(baseline: float, samples: Sequence[Sample],
                     resets: frozenset[float] = frozenset()) -> float:
    """Increase of a counter from ``baseline`` through ``samples``.

    A drop in value, or a sample whose timestamp is in ``resets`` (a reset seen by a sibling
    series), is a reset: the counter restarted from 0, so its whole value counts.
    """
    previous, total = baseline, 0.0
    for at, value in samples:
        total += value if value < previous or at in resets else value - previous
        previous = value
    return total


def reset_times(baseline: float, samples: Sequence[Sample]) -> set[float]:
    """Timestamps at which a counter dropped (below the baseline, or the sample before)."""
    times, previous = set(), baseline
    for at, value in samples:
        if value < previous:
            times.add(at)
        previous = value
    return times


def gauge_stats(samples: Sequence[Sample]) -> GaugeStats:
    values = [value for _, value in samples]
    return GaugeStats(values[-1], math.fsum(values), len(values), min(values), max(values))


Baselines = Mapping[frozenset[tuple[str, str]], float]  # by all labels; absent: new series


@dataclass(slots=True)
class HistogramSeries:
    """The raw series of one histogram (one label set), gathered from a query result."""

    buckets: dict[float, RawSeries] = field(default_factory=dict)  # by upper bound (le)
    sum: RawSeries | None = None
    count: RawSeries | None = None


def histogram_delta(parts: HistogramSeries, baselines: Baselines) -> HistogramDelta | None:
    """Non-cumulative bucket increases of one histogram; None without a +Inf bucket."""
    if math.inf not in parts.buckets:
        return None
    bounds = sorted(parts.buckets)
    members = [parts.buckets[bound] for bound in bounds]
    members += [series for series in (parts.count,) if series is not None]
    resets = frozenset().union(*(reset_times(_baseline(s, baselines), s.samples)
                                 for s in members))

    def increase(series: RawSeries) -> float:
        return counter_increase(_baseline(series, baselines), series.samples, resets)

    counts, below = [], 0.0
    for bound in bounds:
        # A running maximum, as the collector and histogram_quantile do: a bucket series
        # missing a scrape must not make a neighbour's count negative.
        cumulative = max(increase(parts.buckets[bound]), below)
        counts.append(cumulative - below)
        below = cumulative
    total = increase(parts.count) if parts.count else below
    observed_sum = increase(parts.sum) if parts.sum else math.nan
    return HistogramDelta(tuple(bounds[:-1]), tuple(counts), observed_sum, total)


def _baseline(series: RawSeries, baselines: Baselines) -> float:
    return baselines.get(_identity(series.labels), 0.0)


def _identity(labels: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


# --- the source -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Part:
    spec: MetricSpec
    suffix: str  # "" for counters and gauges, else one of _HISTOGRAM_SUFFIXES


def _schema_parts(specs: Iterable[MetricSpec]) -> dict[str, _Part]:
    """Every series name the schema exposes, mapped to its metric."""
    parts: dict[str, _Part] = {}
    for spec in specs:
        if spec.type is MetricType.HISTOGRAM:
            parts.update({spec.name + s: _Part(spec, s) for s in _HISTOGRAM_SUFFIXES})
        else:
            parts[spec.exposed_name] = _Part(spec, "")
    return parts


def _name_matcher(names: Iterable[str], selector: str) -> str:
    # Schema names are [a-zA-Z0-9_:] only: nothing to escape in the regex.
    matchers = [f'__name__=~"{"|".join(sorted(names))}"', *([selector] if selector else [])]
    return "{" + ",".join(matchers) + "}"


class PromQLSource:
    """Snapshots of one target, read from a PromQL API.

    ``selector`` holds the extra label matchers that pick the target's series, e.g.
    ``job="llm",instance="10.0.0.1:8000"`` (surrounding braces are accepted too).
    """

    def __init__(self, base_url: str, http_client: httpx.AsyncClient, timeout: float,
                 selector: str = "", *, keep_target_labels: bool = False,
                 specs: Sequence[MetricSpec] = SCHEMA) -> None:
        self.client = PromQLClient(base_url, http_client, timeout)
        self.selector = selector.strip().removeprefix("{").removesuffix("}").strip()
        self.dropped_labels = frozenset({"__name__"} if keep_target_labels
                                        else {"__name__", *TARGET_LABELS})
        self._parts = _schema_parts(specs)
        self._all_series = _name_matcher(self._parts, self.selector)
        self._gauges = _name_matcher([name for name, part in self._parts.items()
                                      if part.spec.type is MetricType.GAUGE], self.selector)

    async def first(self, target: str, at: float) -> Snapshot:
        """The target's first reading at ``at``, as the scraper's first scrape gives it:
        FIRST, its gauges only (the last sample of each at or before ``at``, within the
        server's lookback), no increases. Raises PromQLError as ``snapshot`` does."""
        # Queried at the millisecond (the API's resolution), stored at ``at`` itself: the next
        # window starts exactly there, so the two tile (a rounded end reached past the next
        # start, and the store refused that window as an overlap).
        series = await self.client.query(self._gauges, round(at * 1000) / 1000)
        gauges: dict[SeriesKey, GaugeStats] = {}
        seen: dict[tuple[str, SeriesKey, str], Mapping[str, str]] = {}
        for one in series:
            name = one.labels.get("__name__", "")
            part = self._parts.get(name)
            if part is None or part.spec.type is not MetricType.GAUGE or not one.samples:
                continue
            labels = {k: v for k, v in one.labels.items() if k not in self.dropped_labels}
            key = series_key(part.spec.exposed_name, labels)
            self._check_unique(seen, (name, key, ""), one.labels, self._gauges)
            value = one.samples[-1][1]
            gauges[key] = GaugeStats(value, value, 1, value, value)
        return Snapshot(target, at, at, TargetState.FIRST, None, {}, gauges, {})

    async def snapshot(self, target: str, start: float, end: float) -> Snapshot:
        """The target over [start, end): counter and histogram increases, gauge statistics.

        DOWN, with the reason, when the API cannot answer or holds no sample in the window;
        raises PromQLQueryError for an invalid query and AmbiguousSelectorError when the
        selector matches several targets.
        """
        start_ms, end_ms = round(start * 1000), round(end * 1000)
        if end_ms <= start_ms:
            raise ValueError(f"empty window: start {start} is not before end {end}")
        window_query = f"{self._all_series}[{end_ms - start_ms}ms]"
        results = await asyncio.gather(
            self.client.query(window_query, end_ms / 1000),
            self.client.query(self._all_series, start_ms / 1000),  # the baselines
            return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:  # the caller's mistakes first: they will not heal by themselves
            if (isinstance(error, PromQLQueryError) and error.error_type == _BAD_DATA) \
                    or not isinstance(error, PromQLError):
                raise error
        if errors:
            return Snapshot(target, start, end, TargetState.DOWN, str(errors[0]))
        window, baseline = (r for r in results if not isinstance(r, BaseException))
        # Prometheus 2 ranges are closed, [start, end]: a sample exactly at start is the
        # baseline and belongs to the window before (3 and later are left-open already).
        window = [RawSeries(s.labels, tuple(x for x in s.samples if x[0] > start_ms / 1000))
                  for s in window]
        if not any(series.samples for series in window):
            return Snapshot(target, start, end, TargetState.DOWN,
                            f"no samples matching {{{self.selector}}} in "
                            f"({start_ms / 1000:.3f}, {end_ms / 1000:.3f}] at {self.client.url}")
        return self._assemble(target, start, end, window, baseline, window_query)

    def _assemble(self, target: str, start: float, end: float, window: Sequence[RawSeries],
                  baseline: Sequence[RawSeries], query: str) -> Snapshot:
        baselines = {_identity(s.labels): s.samples[-1][1] for s in baseline if s.samples}
        counters: dict[SeriesKey, float] = {}
        gauges: dict[SeriesKey, GaugeStats] = {}
        histograms: dict[SeriesKey, HistogramSeries] = {}
        seen: dict[tuple[str, SeriesKey, str], Mapping[str, str]] = {}
        for series in window:
            name = series.labels.get("__name__", "")
            part = self._parts.get(name)
            if part is None or not series.samples:
                continue
            labels = {k: v for k, v in series.labels.items() if k not in self.dropped_labels}
            key = series_key(part.spec.exposed_name if part.suffix == "" else part.spec.name,
                             labels)
            self._check_unique(seen, (name, key, labels.get("le", "")), series.labels, query)
            if part.spec.type is MetricType.GAUGE:
                gauges[key] = gauge_stats(series.samples)
            elif part.spec.type is MetricType.COUNTER:
                counters[key] = counter_increase(_baseline(series, baselines), series.samples)
            else:
                _add_histogram_part(histograms.setdefault(key, HistogramSeries()),
                                    part.suffix, series)
        if not baselines:  # no scrape before the window to count from, as in the collector
            return Snapshot(target, start, end, TargetState.FIRST, None, {}, gauges, {})
        deltas = {key: delta for key, parts in histograms.items()
                  if (delta := histogram_delta(parts, baselines)) is not None}
        return Snapshot(target, start, end, TargetState.UP, None, counters, gauges, deltas)

    def _check_unique(self, seen: dict[tuple[str, SeriesKey, str], Mapping[str, str]],
                      ident: tuple[str, SeriesKey, str], labels: Mapping[str, str],
                      query: str) -> None:
        """Two series that differ only in dropped labels come from two targets."""
        other = seen.setdefault(ident, labels)
        if other is not labels:
            differing = sorted(k for k in self.dropped_labels
                               if other.get(k) != labels.get(k) and k != "__name__")
            raise AmbiguousSelectorError(
                self.client.url, query,
                f"the selector {self.selector!r} matches several targets (series differ in "
                f"{differing}: {dict(other)} and {dict(labels)}); narrow it to one target")


def _add_histogram_part(parts: HistogramSeries, suffix: str, series: RawSeries) -> None:
    if suffix == "_bucket":
        try:
            bound = float(series.labels["le"])
        except (KeyError, ValueError):
            return  # not a bucket of a classic histogram: no usable bound
        if not math.isnan(bound):
            parts.buckets[bound] = series
    elif suffix == "_sum":
        parts.sum = series
    else:
        parts.count = series
