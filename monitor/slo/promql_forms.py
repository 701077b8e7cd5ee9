"""The restricted PromQL an OpenSLO or Sloth SLI may use, read into an inferwatch SLI.

Foreign PromQL is never evaluated: the monitor computes SLIs from its own store and the rule
generator writes its own queries. So a query is accepted only in shapes whose meaning in our
schema is exact, and anything else is refused by name rather than approximated:

- a series selector with equality matchers, ``metric{label="value",...}``;
- that selector in ``rate(...[range])`` or ``increase(...[range])``, either optionally in
  ``sum(...)`` (no ``by``/``without``); the range a duration or Sloth's ``{{.window}}``;
- parentheses, and one subtraction for a bad-events query: ``<h>_count - <h>_bucket{le="T"}``.

A latency SLI is ``<h>_bucket{le="T"}`` (good) or ``<h>_count - <h>_bucket{le="T"}`` (bad)
over ``<h>_count``, for a histogram of ``LATENCY_METRICS``; a ratio SLI is a counter over a
counter. Equality matchers shared by the queries, except the metric's own labels (le,
error_type, finish_reason), select targets; the others stay with their counter.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from exporters import schema
from monitor.slo.spec import LATENCY_METRICS

_METRIC_OWN_LABELS: Final = frozenset({"le", schema.ERROR_TYPE, schema.FINISH_REASON})
_SHORT_NAME: Final = {histogram: short for short, histogram in LATENCY_METRICS.items()}
_ACCEPTED: Final = ('expected metric{label="value",...}, optionally in rate(...[window]) or '
                    "increase(...[window]) and in sum(...)")

_IDENT: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MATCH_OP: Final = re.compile(r"=~|!~|!=|=")
_STRING: Final = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`')
_RANGE: Final = re.compile(r"\{\{\s*\.window\s*\}\}|(?:\d+(?:ms|s|m|h|d|w|y))+")


class FormError(ValueError):
    """A query outside the accepted shapes. ``role`` names the query: good, bad, total or
    query (a threshold metric's)."""

    def __init__(self, role: str, message: str) -> None:
        super().__init__(message)
        self.role = role


@dataclass(frozen=True)
class Series:
    name: str
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SliForm:
    """An SLI read from queries: the ``sli`` fields of ``Slo``, the target labels the queries
    share (``selector``), and the role of the query each SLI field was read from."""

    sli: dict[str, Any]
    selector: dict[str, str]
    roles: dict[str, str]


@dataclass(frozen=True)
class _Counted:
    """What one selector counts in our schema: a counter, or a histogram's count or bucket."""

    kind: Literal["counter", "count", "bucket"]
    metric: str  # counter without _total, histogram without suffix
    labels: dict[str, str]  # without le
    le: float | None = None


def ratio_sli(total: str, *, good: str | None = None, bad: str | None = None) -> SliForm:
    """The SLI counting ``good`` (or ``bad``) events out of ``total``; FormError otherwise."""
    role = "good" if good is not None else "bad"
    numerator = good if good is not None else bad
    if numerator is None or (good is not None and bad is not None):
        raise FormError("total", "give exactly one of good and bad, beside total")
    total_counted = _single(_read(total, "total"), "total")
    terms = _read(numerator, role)
    if total_counted.kind == "count":
        return _latency(role, terms, total_counted)
    if total_counted.kind == "bucket":
        raise FormError("total", "a _bucket series counts only the requests at or under its "
                        "le; the total is the histogram's _count")
    counted = _single(terms, role)
    if counted.kind != "counter":
        raise FormError(role, f"{counted.metric} is a histogram but the total query counts "
                        f"{total_counted.metric}; both must count the same events")
    shared = {k: v for k, v in counted.labels.items()
              if total_counted.labels.get(k) == v and k not in _METRIC_OWN_LABELS}

    def query(c: _Counted) -> dict[str, Any]:
        return {"metric": c.metric, "labels": {k: v for k, v in c.labels.items()
                                               if k not in shared}}

    return SliForm({"kind": "ratio", role: query(counted), "total": query(total_counted)},
                   shared, {role: role, "total": "total"})


def threshold_sli(query: str) -> SliForm:
    """A latency histogram named for a threshold metric (the threshold is the objective's
    value): ``<h>`` or ``<h>_bucket``, with equality matchers selecting targets."""
    terms = _read(query, "query")
    if len(terms) != 1 or terms[0][0] < 0:
        raise FormError("query", f"cannot read {_squeeze(query)!r}: expected one histogram")
    series = terms[0][1]
    histogram = series.name.removesuffix("_bucket")
    if histogram not in _SHORT_NAME:
        raise FormError("query", f"{series.name!r}: a threshold metric is a latency histogram "
                        f"({_latency_names()})")
    labels = dict(series.labels)
    own = sorted(_METRIC_OWN_LABELS & labels.keys())
    if own:
        raise FormError("query", f"{own} cannot be matched here: the objective's value is "
                        "the threshold")
    return SliForm({"kind": "latency", "metric": _SHORT_NAME[histogram]}, labels,
                   {"metric": "query"})


def _latency(role: str, terms: list[tuple[int, Series]], total: _Counted) -> SliForm:
    short = _SHORT_NAME.get(total.metric)
    if short is None:
        raise FormError("total", f"{total.metric} has no latency SLI; latency SLIs count "
                        f"{_latency_names()}")
    counted = [(sign, _classify(series, role)) for sign, series in terms]
    if role == "good":
        shape_ok = len(counted) == 1 and counted[0][0] > 0 and counted[0][1].kind == "bucket"
        expected = f'{total.metric}_bucket{{le="<threshold>"}}'
    else:
        shape_ok = sorted((sign, c.kind) for sign, c in counted) == [(-1, "bucket"), (1, "count")]
        expected = f'{total.metric}_count - {total.metric}_bucket{{le="<threshold>"}}'
    if not shape_ok or any(c.metric != total.metric for _, c in counted):
        raise FormError(role, f"over the total {total.metric}_count, the {role} query must be "
                        f"{expected}")
    for _, c in counted:
        if c.labels != total.labels:
            raise FormError(role, f"its label matchers {c.labels} differ from the total "
                            f"query's {total.labels}: both must select the same series")
    own = sorted(_METRIC_OWN_LABELS & total.labels.keys())
    if own:
        raise FormError("total", f"{own} are not labels of {total.metric}")
    le = next(c.le for _, c in counted if c.kind == "bucket")
    return SliForm({"kind": "latency", "metric": short, "threshold_seconds": le},
                   dict(total.labels), {"metric": "total", "threshold_seconds": role})


def _latency_names() -> str:
    return ", ".join(f"{short} ({histogram})" for short, histogram in LATENCY_METRICS.items())


def _single(terms: list[tuple[int, Series]], role: str) -> _Counted:
    if len(terms) != 1 or terms[0][0] < 0:
        raise FormError(role, "expected one series here, not a sum or difference")
    return _classify(terms[0][1], role)


def _classify(series: Series, role: str) -> _Counted:
    labels = dict(series.labels)
    for suffix in ("_bucket", "_count", "_sum"):
        base = series.name.removesuffix(suffix)
        if base != series.name and _type(base) is schema.MetricType.HISTOGRAM:
            if suffix == "_sum":
                raise FormError(role, f"{series.name}: a histogram's _sum adds up values, it "
                                "does not count events; use _count or _bucket")
            le = labels.pop("le", None)
            if suffix == "_count":
                if le is not None:
                    raise FormError(role, f"{series.name} has no le label; the bucket series "
                                    f"is {base}_bucket")
                return _Counted("count", base, labels)
            return _Counted("bucket", base, labels, _bound(le, series.name, role))
    kind = _type(series.name)
    if kind is schema.MetricType.COUNTER:
        return _Counted("counter", schema.get_spec(series.name).name, labels)
    if kind is None:
        raise FormError(role, f"{series.name!r} is not a metric of the inferwatch schema "
                        "(exporters/schema.py); counters are exposed with _total")
    if kind is schema.MetricType.HISTOGRAM:
        raise FormError(role, f"{series.name} is a histogram: count its requests with "
                        f'{series.name}_count, those at or under a bound with _bucket{{le="..."}}')
    raise FormError(role, f"{series.name} is a {kind}: only counters and histogram series "
                    "count events")


def _bound(le: str | None, name: str, role: str) -> float:
    try:
        value = float(le) if le is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise FormError(role, f'{name} needs le="<threshold in seconds>", a finite bucket '
                        f"bound, got {le!r}")
    return value


def _type(name: str) -> schema.MetricType | None:
    try:
        return schema.get_spec(name).type
    except KeyError:
        return None


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _read(text: str, role: str) -> list[tuple[int, Series]]:
    """The signed series of a query in the accepted shapes."""
    return _Reader(text, role).query()


class _Reader:
    """A recursive-descent reader of the accepted shapes, character by character (a range
    ``[{{.window}}]`` holds braces, so tokens depend on the context)."""

    def __init__(self, text: str, role: str) -> None:
        self.text, self.role, self.pos = text, role, 0

    def query(self) -> list[tuple[int, Series]]:
        terms = self._sum()
        self._space()
        if self.pos < len(self.text):
            raise self._fail(f"unexpected {self.text[self.pos:self.pos + 20]!r} at column "
                             f"{self.pos + 1}", shapes=True)
        return terms

    def _sum(self) -> list[tuple[int, Series]]:
        terms = self._unit()
        while (op := self._accept("+", "-")) is not None:
            sign = -1 if op == "-" else 1
            terms += [(sign * s, series) for s, series in self._unit()]
        return terms

    def _unit(self) -> list[tuple[int, Series]]:
        if self._accept("("):
            terms = self._sum()
            self._expect(")")
            return terms
        name = self._match(_IDENT, "a metric name")
        if name == "sum" and self._peek() in ("(", "b", "w"):
            if self._accept("("):
                series = self._counted(self._match(_IDENT, "a metric name"))
                self._expect(")")
                if self._peek() in ("b", "w"):
                    raise self._fail("sum by/without is not supported: an SLI counts every "
                                     "series its selector matches")
                return [(1, series)]
            raise self._fail("sum by/without is not supported: an SLI counts every series "
                             "its selector matches")
        return [(1, self._counted(name))]

    def _counted(self, name: str) -> Series:
        if name in ("rate", "increase") and self._accept("("):
            series = self._selector(self._match(_IDENT, "a metric name"))
            self._expect("[")
            end = self.text.find("]", self.pos)
            if end < 0 or not _RANGE.fullmatch(self.text[self.pos:end].strip()):
                raise self._fail(f"{name}() needs a range like [5m] or [{{{{.window}}}}]")
            self.pos = end + 1
            self._expect(")")
            return series
        if self._peek() == "(":
            raise self._fail(f"{name}(...) is not supported", shapes=True)
        return self._selector(name)

    def _selector(self, name: str) -> Series:
        labels: dict[str, str] = {}
        if self._accept("{"):
            while not self._accept("}"):
                label = self._match(_LABEL, "a label name")
                op = self._match(_MATCH_OP, "=")
                raw = self._match(_STRING, "a quoted label value")
                if op != "=":
                    raise self._fail(f"{label}{op}{raw}: only equality matchers "
                                     '(label="value") are supported')
                if label in labels:
                    raise self._fail(f"label {label!r} is matched twice")
                labels[label] = raw[1:-1] if raw[0] == "`" else str(ast.literal_eval(raw))
                if not self._accept(","):
                    self._expect("}")
                    break
        return Series(name, tuple(sorted(labels.items())))

    def _space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> str:
        self._space()
        return self.text[self.pos:self.pos + 1]

    def _accept(self, *options: str) -> str | None:
        self._space()
        for option in options:
            if self.text.startswith(option, self.pos):
                self.pos += len(option)
                return option
        return None

    def _expect(self, token: str) -> None:
        if self._accept(token) is None:
            raise self._fail(f"expected {token!r} at column {self.pos + 1}", shapes=True)

    def _match(self, pattern: re.Pattern[str], what: str) -> str:
        self._space()
        found = pattern.match(self.text, self.pos)
        if found is None:
            raise self._fail(f"expected {what} at column {self.pos + 1}", shapes=True)
        self.pos = found.end()
        return found.group()

    def _fail(self, reason: str, shapes: bool = False) -> FormError:
        hint = f"; {_ACCEPTED}" if shapes else ""
        return FormError(self.role, f"cannot read {_squeeze(self.text)!r}: {reason}{hint}")
