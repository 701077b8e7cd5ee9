"""Apply engine mapping tables to a parsed page: the engine's series in the inferwatch schema.

Values are converted by the row's scale; a histogram keeps the engine's own bucket boundaries
(``le`` scaled like the values), so nothing is re-binned and no precision is invented. Source
timestamps are dropped: the exporter serving the result is the one that observed it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Final, NamedTuple, cast

from prometheus_client.utils import floatToGoString

from exporters.adapters.table import Row, get_table
from exporters.exposition import PageProblem, ParsedPage, Sample
from exporters.schema import SCHEMA, MetricSpec, MetricType

_NO_LABELS: Final[Mapping[str, str]] = MappingProxyType({})
_LABEL_NAME_RE: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RESERVED_LABELS: Final = frozenset({"le", "quantile"})

LabelKey = tuple[tuple[str, str], ...]


class NormalizedSample(NamedTuple):
    name: str  # as exposed: counters with _total, histograms with _bucket/_sum/_count
    labels: dict[str, str]
    value: float
    line: int  # line of the source page it came from (the first term of a sum)
    source: str  # the source sample name


@dataclass(frozen=True, slots=True)
class NormalizedFamily:
    spec: MetricSpec
    samples: tuple[NormalizedSample, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def type(self) -> MetricType:
        return self.spec.type

    @property
    def help(self) -> str:
        return self.spec.help


@dataclass(frozen=True, slots=True)
class NormalizedPage:
    source: str
    engines: tuple[str, ...]
    families: tuple[NormalizedFamily, ...]  # in schema order, only those with samples
    unmapped: list[str]  # source metrics (or series) that no row consumed
    missing: list[str]  # schema metrics these engines do not provide
    problems: list[PageProblem]  # series the mapping had to refuse

    def value(self, sample_name: str, labels: Mapping[str, str] = _NO_LABELS) -> float | None:
        """The value of one normalized sample, or None (like get_sample_value)."""
        for family in self.families:
            for sample in family.samples:
                if sample.name == sample_name and sample.labels == labels:
                    return sample.value
        return None


@dataclass(slots=True)
class _Histogram:
    labels: dict[str, str]
    line: int
    source: str
    buckets: dict[float, float] = field(default_factory=dict)  # le (unscaled) -> count
    sum: float | None = None
    count: float | None = None


class _Index:
    """The page's samples by sample name, and which of them (by line) rows consumed."""

    def __init__(self, page: ParsedPage) -> None:
        self.page = page
        self.by_name: dict[str, list[Sample]] = {}
        for family in page.families.values():
            for sample in family.samples:
                self.by_name.setdefault(sample.name, []).append(sample)
        self.consumed: set[int] = set()
        self.selectors: dict[str, set[str]] = {}  # sample name -> labels rows select on
        self.problems: list[PageProblem] = []


def normalize(
    page: ParsedPage, engine: str, extra_labels: Mapping[str, str] = _NO_LABELS
) -> NormalizedPage:
    """The page's series mapped onto the schema by ``engine``'s table; ``extra_labels`` are
    added to every series (and win over a page label of the same name)."""
    return normalize_engines(page, (engine,), extra_labels)


def normalize_engines(
    page: ParsedPage, engines: Sequence[str], extra_labels: Mapping[str, str] = _NO_LABELS
) -> NormalizedPage:
    """Like normalize, with the rows of several tables (a Triton page with DCGM on it)."""
    check_extra_labels(extra_labels)
    tables = [get_table(engine) for engine in engines]
    index = _Index(page)
    outputs: dict[str, dict[LabelKey, list[NormalizedSample]]] = {}
    for table in tables:
        for row in table.rows:
            produced = outputs.setdefault(row.target.name, {})
            for key, samples in _apply(row, index, extra_labels).items():
                produced.setdefault(key, samples)  # an earlier row's series wins
    families = tuple(
        NormalizedFamily(spec, tuple(s for series in outputs[spec.name].values() for s in series))
        for spec in SCHEMA if outputs.get(spec.name)
    )
    mapped = {table_row.target.name for table in tables for table_row in table.rows}
    missing = sorted({name for table in tables for name in table.missing} - mapped)
    return NormalizedPage(page.source, tuple(engines), families, _unmapped(index), missing,
                          sorted(index.problems))


def _apply(
    row: Row, index: _Index, extra: Mapping[str, str]
) -> dict[LabelKey, list[NormalizedSample]]:
    for source in row.sources:
        _consume_created(row, source, index)
    if row.target.type is MetricType.HISTOGRAM:
        return _apply_histogram(row, index, extra)
    if row.is_sum:
        return _apply_sum(row, index, extra)
    return _apply_plain(row, index, extra)


def _apply_plain(
    row: Row, index: _Index, extra: Mapping[str, str]
) -> dict[LabelKey, list[NormalizedSample]]:
    name = row.target.exposed_name
    out: dict[LabelKey, list[NormalizedSample]] = {}
    for labels, sample in _select(row, row.sources[0], index, extra):
        value = _row_value(row, sample, index)
        if value is None:
            continue
        key = _key(labels)
        if key not in out:
            out[key] = [NormalizedSample(name, labels, value, sample.line, sample.name)]
        elif row.target.type is MetricType.COUNTER:  # e.g. two error kinds onto one type
            first = out[key][0]
            out[key] = [first._replace(value=first.value + value)]
        else:
            index.problems.append(PageProblem(sample.line, (
                f"{sample.name}: maps onto the same {name} series as line {out[key][0].line}; "
                "the first is kept")))
    return out


def _row_value(row: Row, sample: Sample, index: _Index) -> float | None:
    if row.value_from_label is None:
        return sample.value * row.scale
    text = sample.labels.get(row.value_from_label, "")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        index.problems.append(PageProblem(sample.line, (
            f"{sample.name}: label {row.value_from_label}={text!r} is not a number, "
            f"no {row.target.name}")))
        return None
    return value * row.scale


def _apply_sum(
    row: Row, index: _Index, extra: Mapping[str, str]
) -> dict[LabelKey, list[NormalizedSample]]:
    """One series per label set present in every term; absent terms mean no series."""
    terms: list[dict[LabelKey, tuple[dict[str, str], Sample]]] = []
    for source in row.sources:
        found: dict[LabelKey, tuple[dict[str, str], Sample]] = {}
        for labels, sample in _select(row, source, index, extra):
            found.setdefault(_key(labels), (labels, sample))
        terms.append(found)
    out: dict[LabelKey, list[NormalizedSample]] = {}
    for key, (labels, first) in terms[0].items():
        if all(key in term for term in terms[1:]):
            total = sum(term[key][1].value for term in terms) * row.scale
            out[key] = [NormalizedSample(row.target.name, labels, total, first.line, first.name)]
    return out


def _apply_histogram(
    row: Row, index: _Index, extra: Mapping[str, str]
) -> dict[LabelKey, list[NormalizedSample]]:
    base = row.sources[0]
    histograms: dict[LabelKey, _Histogram] = {}
    for suffix in ("_bucket", "_sum", "_count"):
        for labels, sample in _select(row, base + suffix, index, extra):
            key = _key(labels)
            histogram = histograms.setdefault(key, _Histogram(labels, sample.line, base))
            _add_histogram_sample(histogram, suffix, sample, index)
    out: dict[LabelKey, list[NormalizedSample]] = {}
    for key, histogram in histograms.items():
        samples = _histogram_samples(row, histogram, index)
        if samples:
            out[key] = samples
    return out


def _add_histogram_sample(
    histogram: _Histogram, suffix: str, sample: Sample, index: _Index
) -> None:
    if suffix == "_sum":
        histogram.sum = sample.value
    elif suffix == "_count":
        histogram.count = sample.value
    else:
        try:
            le = float(sample.labels["le"])
        except (KeyError, ValueError):
            index.problems.append(PageProblem(sample.line, f"{sample.name}: no numeric 'le'"))
            return
        if le in histogram.buckets:
            index.problems.append(PageProblem(sample.line, (
                f"{sample.name}: second bucket le={le}; the first is kept")))
        else:
            histogram.buckets[le] = sample.value


def _histogram_samples(row: Row, h: _Histogram, index: _Index) -> list[NormalizedSample]:
    """The schema histogram's samples, or [] (with a problem) if the source is incomplete."""
    where = f"{h.source}{_describe_labels(h.labels)}"
    if not h.buckets:
        index.problems.append(PageProblem(h.line, f"{where}: no _bucket samples, not exported"))
        return []
    if math.inf not in h.buckets:
        if h.count is None:
            index.problems.append(PageProblem(h.line, (
                f"{where}: no +Inf bucket and no _count, not exported")))
            return []
        # The +Inf bucket counts every observation: it is _count by definition.
        index.problems.append(PageProblem(h.line, f"{where}: no +Inf bucket, _count used"))
        h.buckets[math.inf] = h.count
    name = row.target.name
    samples = [
        NormalizedSample(f"{name}_bucket", {**h.labels, "le": _le_label(le, row.scale)}, count,
                         h.line, h.source + "_bucket")
        for le, count in sorted(h.buckets.items())
    ]
    if h.sum is not None:
        samples.append(NormalizedSample(f"{name}_sum", h.labels, h.sum * row.scale, h.line,
                                        h.source + "_sum"))
    count = h.count if h.count is not None else h.buckets[math.inf]
    samples.append(NormalizedSample(f"{name}_count", h.labels, count, h.line, h.source + "_count"))
    return samples


@lru_cache(maxsize=4096)  # the same few bounds on every scrape
def _le_label(le: float, scale: float) -> str:
    if scale != 1.0 and math.isfinite(le):
        # 15 significant digits drop the binary noise of the product: 300 ms -> "0.3" s.
        le = float(f"{le * scale:.15g}")
    return cast(str, floatToGoString(le))  # type: ignore[no-untyped-call]


def _select(
    row: Row, name: str, index: _Index, extra: Mapping[str, str]
) -> Iterator[tuple[dict[str, str], Sample]]:
    """The samples called ``name`` that the row takes, with their output labels; marks them
    consumed."""
    index.selectors.setdefault(name, set()).update(row.match, row.values)
    is_bucket = row.target.type is MetricType.HISTOGRAM and name.endswith("_bucket")
    for sample in index.by_name.get(name, ()):
        if any(sample.labels.get(k) != v for k, v in row.match.items()):
            continue
        labels = _output_labels(row, sample.labels, extra, is_bucket)
        if labels is None:
            continue
        index.consumed.add(sample.line)
        yield labels, sample


def _consume_created(row: Row, source: str, index: _Index) -> None:
    """prometheus_client's ``_created`` twin of a source (x_total -> x_created, histogram
    h -> h_created) is consumed with it: a start time, not a reading to re-export."""
    created = (source[: -len("_total")] if source.endswith("_total") else source) + "_created"
    for sample in index.by_name.get(created, ()):
        if all(sample.labels.get(k) == v for k, v in row.match.items()):
            index.consumed.add(sample.line)


def _output_labels(
    row: Row, labels: Mapping[str, str], extra: Mapping[str, str], is_bucket: bool
) -> dict[str, str] | None:
    """Labels renamed and value-mapped, the row's selectors (and a bucket's le) dropped; None
    if a value-mapped label is absent or has a value the row does not list (not the row's)."""
    out: dict[str, str] = {}
    for label in row.values:
        if label not in labels:
            return None
    for label, value in labels.items():
        if label in row.match or label == row.value_from_label or (is_bucket and label == "le"):
            continue
        value_map = row.values.get(label)
        if value_map is not None:
            if value not in value_map:
                return None
            value = value_map[value]
        out[row.labels.get(label, label)] = value
    if row.keep_labels is not None:
        out = {label: value for label, value in out.items() if label in row.keep_labels}
    out.update(row.set_labels)
    out.update(extra)
    return out


def _unmapped(index: _Index) -> list[str]:
    """Source metrics no row consumed; series by the labels rows select on, where some did."""
    unmapped: set[str] = set()
    for family in index.page.families.values():
        for sample in family.samples:
            if sample.line in index.consumed:
                continue
            selectors = index.selectors.get(sample.name)
            if selectors:
                chosen = {k: v for k, v in sample.labels.items() if k in selectors}
                unmapped.add(sample.name + _describe_labels(chosen))
            else:
                unmapped.add(family.name)
    return sorted(unmapped)


def check_extra_labels(extra: Mapping[str, str]) -> None:
    """ValueError unless every name is a label we may add to every series."""
    for label in extra:
        bad = not _LABEL_NAME_RE.fullmatch(label) or label.startswith("__")
        if bad or label in _RESERVED_LABELS:
            raise ValueError(f"extra label {label!r}: not a label name we can add to every series")


def _key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


def _describe_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{value}"' for key, value in labels.items()) + "}"
