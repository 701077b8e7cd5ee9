"""A target's page read through a compiled plan while its shape stays the same.

An engine serves the same series on every scrape; only the values change. Like Prometheus'
scrape cache (series text -> series ref, relabeling done once per series), a ``PageReader``
keeps, per target, the *shape* of the last page (every comment line verbatim, every sample
line up to its value) and a plan that maps the page's values straight to the ``Reading`` the
full path (parse -> normalize -> read_page) gives. A page of the same shape is then read with
one regex match (the shape's lines verbatim, a group per value), one float() per value and the
plan: no per-line parsing, no label dicts, no normalization. Anything else (a new series, a
changed comment, a value that is not a finite plain number, a DCGM sentinel, a page near the
size limit) takes the full path, which stays the reference. Kept per target: the shape's
lines (shared between targets through sys.intern) and the compiled plan, ~60 kB for the
419-sample vLLM page.

The plan is traced, not written a second time: the full path runs once over the page with
each value replaced by a ``_Traced`` float that records the arithmetic done on it (the scale
products, the sums of counters mapped together, the +Inf bucket taken from _count). The
recorded expressions are compiled into one function that repeats the same float operations
in the same order, so the figures are identical to the last bit. An operation on a value the
plan cannot repeat (a comparison, a subtraction ...) marks the trace unusable: that page is
then always read the full way. A page is planned only once its shape has been seen twice in
a row, so a page whose shape changes every scrape pays for no plans it never uses.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporters.adapters import normalize_engines
from exporters.exposition import (
    _FAST_SAMPLE_RE,
    DCGM_FP64_SENTINELS,
    DCGM_INT64_SENTINEL_MIN,
    DCGM_PREFIX,
    Family,
    ParsedPage,
    parse_page,
)
from monitor.collect.config import TargetConfig
from monitor.collect.scrape import CumulativeHistogram, Reading, normalize_parsed, read_page

__all__ = ["PageReader", "PageShape", "page_shape"]

# One line of a page's shape: (is a sample line, the comment line or the sample line up to
# and including the blank before its value).
ShapeLine = tuple[bool, str]
PageShape = tuple[ShapeLine, ...]
_Expr = tuple[Any, ...]  # ("slot", i) | ("const", x) | ("mul" | "add", left, right)
_Evaluate = Callable[[list[float]], tuple[dict[str, float], dict[str, float],
                                          dict[str, CumulativeHistogram]]]


def page_shape(text: str) -> tuple[PageShape, list[str]] | None:
    """The page's shape and its sample lines' value tokens; None if a sample line does not end
    in a single value token (a timestamp, an exemplar, nothing after the name)."""
    shape: list[ShapeLine] = []
    tokens: list[str] = []
    for line in text.split("\n"):
        stripped = line.rstrip("\r")
        if not stripped or stripped[0] == "#" or stripped.isspace():
            shape.append((False, line))
            continue
        split = _split_value(stripped)
        if split is None:
            return None
        shape.append((True, split[0]))
        tokens.append(split[1])
    return tuple(shape), tokens


def _shape_pattern(shape: PageShape) -> re.Pattern[str]:
    """A regex that matches exactly the pages of this shape, a value token captured per sample
    line: each comment line verbatim, each sample line its text up to the value, the value
    (no blank, '#', '_' or line end in it: page_shape's token, less what float() or the
    parser would refuse or read otherwise), then blanks and the '\\r's of a CRLF page."""
    return re.compile("\n".join(
        re.escape(text) + r"([^ \t#_\r\n]+)[ \t]*\r*" if is_sample else re.escape(text)
        for is_sample, text in shape))


def _split_value(line: str) -> tuple[str, str] | None:
    body = line.rstrip(" \t")
    blank = max(body.rfind(" "), body.rfind("\t"))
    token = body[blank + 1:]
    if blank < 0 or not token or "#" in token:
        return None
    return body[:blank + 1], token


@dataclass(slots=True)
class _Plan:
    shape: PageShape
    evaluate: _Evaluate
    dcgm_slots: tuple[int, ...]  # values that must not be DCGM's blank sentinels
    engines: tuple[str, ...]
    pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.pattern = _shape_pattern(self.shape)

    def read(self, text: str) -> Reading | None:
        """The page's reading through the plan; None if the page is not of the plan's shape
        or a value is one the full path would refuse."""
        match = self.pattern.fullmatch(text)
        if match is None:
            return None
        try:
            values = list(map(float, match.groups()))
        except ValueError:
            return None
        if not math.isfinite(sum(values)):  # a finite sum: every value finite
            return None
        for slot in self.dcgm_slots:
            if values[slot] >= DCGM_INT64_SENTINEL_MIN or values[slot] in DCGM_FP64_SENTINELS:
                return None
        counters, gauges, histograms = self.evaluate(values)
        return Reading(counters, gauges, histograms, self.engines)


@dataclass(slots=True)
class PageReader:
    """One target's pages to Readings, through a plan while the page keeps its shape."""

    target: TargetConfig
    num_planned: int = 0  # pages read through a plan
    num_full: int = 0  # pages read the full way
    _plan: _Plan | None = field(default=None, repr=False)
    _last_shape: PageShape | None = field(default=None, repr=False)
    _unplannable: PageShape | None = field(default=None, repr=False)  # its trace failed

    def read(self, text: str, max_bytes: int) -> Reading:
        """The page's Reading, exactly as read_page(normalize_text(...)) gives it; ScrapeError
        as normalize_text raises it."""
        reading = self.read_planned(text, max_bytes)
        return reading if reading is not None else self.read_full(text, max_bytes)

    def read_planned(self, text: str, max_bytes: int) -> Reading | None:
        """The page's Reading through the plan; None if there is none for a page like it."""
        if self._plan is None or not _surely_within(text, max_bytes):
            return None
        reading = self._plan.read(text)
        if reading is not None:
            self.num_planned += 1
        return reading

    def read_full(self, text: str, max_bytes: int) -> Reading:
        """The page read the full way (and planned, if its shape is the last page's)."""
        self.num_full += 1
        parsed = parse_page(text, self.target.url, max_bytes)
        reading = read_page(normalize_parsed(parsed, self.target))
        shaped = page_shape(text) if not parsed.problems else None
        shape = None if shaped is None else shaped[0]
        if shaped is None or shape in (self._unplannable, self._plan and self._plan.shape):
            return reading  # nothing to plan, or a value the plan refused: the plan stays
        if shape != self._last_shape:
            self._last_shape = shape
            return reading
        self._plan = _build_plan(parsed, shaped[0], shaped[1], self.target, reading)
        self._last_shape = None
        if self._plan is None:
            self._unplannable = shape
        return reading


def _surely_within(text: str, max_bytes: int) -> bool:
    return len(text) <= max_bytes // 4 or len(text.encode("utf-8", "surrogatepass")) <= max_bytes


# --- tracing ------------------------------------------------------------------------------

class _Trace:
    __slots__ = ("usable",)

    def __init__(self) -> None:
        self.usable = True


class _Traced(float):
    """A value that records the arithmetic done on it (see the module docstring)."""

    __slots__ = ("expr", "trace")
    expr: _Expr
    trace: _Trace

    def __new__(cls, value: float, expr: _Expr, trace: _Trace) -> _Traced:
        obj = float.__new__(cls, value)
        obj.expr, obj.trace = expr, trace
        return obj

    def __mul__(self, other: Any) -> Any:
        return self._op("mul", super().__mul__(other), (self, other))

    def __rmul__(self, other: Any) -> Any:
        return self._op("mul", super().__rmul__(other), (other, self))

    def __add__(self, other: Any) -> Any:
        return self._op("add", super().__add__(other), (self, other))

    def __radd__(self, other: Any) -> Any:
        return self._op("add", super().__radd__(other), (other, self))

    def _op(self, kind: str, value: Any, operands: tuple[object, object]) -> Any:
        if value is NotImplemented or not all(isinstance(o, (int, float)) for o in operands):
            self.trace.usable = False
            return value
        return _Traced(value, (kind, _expr(operands[0]), _expr(operands[1])), self.trace)



def _taint(name: str) -> Callable[..., Any]:
    base = getattr(float, name)

    def method(self: _Traced, *args: Any) -> Any:
        self.trace.usable = False
        return base(self, *args)
    method.__name__ = name
    return method


for _name in ("__sub__", "__rsub__", "__truediv__", "__rtruediv__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__divmod__",
              "__rdivmod__", "__neg__", "__pos__", "__abs__", "__lt__", "__le__", "__gt__",
              "__ge__", "__eq__", "__ne__", "__bool__", "__float__", "__int__", "__round__",
              "__trunc__", "__floor__", "__ceil__", "__hash__", "__format__", "__repr__",
              "__str__"):
    setattr(_Traced, _name, _taint(_name))
del _name


def _expr(value: object) -> _Expr:
    if isinstance(value, _Traced):
        return value.expr
    return ("const", value)


def _traced_page(parsed: ParsedPage, order: dict[int, int], trace: _Trace) -> ParsedPage:
    """The page with each sample's value a _Traced slot (its index among the sample lines)."""
    families = {
        name: Family(family.name, family.type, family.help, [
            sample._replace(value=_Traced(sample.value, ("slot", order[sample.line]), trace))
            for sample in family.samples])
        for name, family in parsed.families.items()
    }
    return ParsedPage(parsed.source, families, parsed.problems, parsed.num_problems)


def _build_plan(parsed: ParsedPage, shape: PageShape, tokens: Sequence[str],
                target: TargetConfig, reference: Reading) -> _Plan | None:
    """The plan of a page read without problems, or None when it cannot be traced; checked
    against the full path's reading of the same page."""
    lines = [number for number, (is_sample, _) in enumerate(shape, start=1) if is_sample]
    samples = sorted((s for f in parsed.families.values() for s in f.samples),
                     key=lambda s: s.line)
    if [s.line for s in samples] != lines or any(s.timestamp is not None for s in samples):
        return None
    prefixes = [prefix for is_sample, prefix in shape if is_sample]
    for prefix, token in zip(prefixes, tokens):
        match = _FAST_SAMPLE_RE.match(prefix + token)
        if match is None or match[4] is not None or match.start(3) != len(prefix):
            return None
    trace = _Trace()
    order = {line: slot for slot, line in enumerate(lines)}
    traced = read_page(normalize_engines(_traced_page(parsed, order, trace), reference.engines))
    if not trace.usable:
        return None
    evaluate = _compile(traced)
    values = [s.value for s in samples]
    counters, gauges, histograms = evaluate(values)
    if not trace.usable or Reading(counters, gauges, histograms, reference.engines) != reference:
        return None
    dcgm = tuple(i for i, s in enumerate(samples) if s.name.startswith(DCGM_PREFIX))
    # Targets of one engine share most of their lines: one copy of each (~50 kB a page).
    shared = tuple((is_sample, sys.intern(text)) for is_sample, text in shape)
    return _Plan(shared, evaluate, dcgm, reference.engines)


# --- compiling ----------------------------------------------------------------------------

class _Source:
    """Python source of the plan's function; page text (series keys, constants) never goes
    into it: keys and constants are passed in lists and named by index."""

    def __init__(self) -> None:
        self.constants: list[Any] = []

    def const(self, value: Any) -> str:
        self.constants.append(value)
        return f"C[{len(self.constants) - 1}]"

    def expr(self, value: object) -> str:
        expr = _expr(value)
        return self._code(expr)

    def _code(self, expr: _Expr) -> str:
        kind = expr[0]
        if kind == "slot":
            return f"v[{int(expr[1])}]"
        if kind == "const":
            return self.const(expr[1])
        operator = "*" if kind == "mul" else "+"
        return f"({self._code(expr[1])} {operator} {self._code(expr[2])})"


def _compile(traced: Reading) -> _Evaluate:
    source = _Source()
    counters = ", ".join(f"{source.const(str(k))}: {source.expr(v)}"
                         for k, v in traced.counters.items())
    gauges = ", ".join(f"{source.const(str(k))}: {source.expr(v)}"
                       for k, v in traced.gauges.items())
    histograms = ", ".join(
        f"{source.const(str(k))}: H({source.const(tuple(float.__float__(b) for b in h.bounds))}, "
        f"({''.join(source.expr(c) + ', ' for c in h.cumulative)}), "
        f"{source.expr(h.sum)}, {source.expr(h.count)})"
        for k, h in traced.histograms.items())
    code = (f"def evaluate(v):\n"
            f"    return {{{counters}}}, {{{gauges}}}, {{{histograms}}}\n")
    namespace: dict[str, Any] = {"C": source.constants, "H": CumulativeHistogram}
    exec(compile(code, "<page plan>", "exec"), namespace)  # noqa: S102 - indices only
    evaluate: _Evaluate = namespace["evaluate"]
    return evaluate
