"""A lenient parser for the Prometheus text exposition format (0.0.4, and OpenMetrics 1.0).

An engine's ``/metrics`` page is input we do not control, so ``parse_page`` never raises on page
content: every line it skips and every value it refuses becomes a ``PageProblem`` naming the line,
and the rest of the page is still returned. Refused: syntax errors, non-finite values (except
summary quantiles, where NaN means "no observations"), duplicate series (the first is kept),
DCGM's "blank" sentinels, content after ``# EOF`` and everything past the size limit.

Samples are grouped into families the way Prometheus does it: a ``# TYPE``/``# HELP`` name owns
its suffixed samples (``_total``/``_created`` of a counter, ``_bucket``/``_sum``/``_count`` of a
histogram ...); a sample no declaration owns is an untyped family of its own name, which is how
Triton's counters without ``_total`` and without ``# TYPE`` arrive.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple

DEFAULT_MAX_BYTES: Final = 10 * 2**20
# A garbage page yields a problem per line; keep the first ones, count the rest.
MAX_PROBLEMS_KEPT: Final = 1000

UNTYPED: Final = "untyped"
_TYPES: Final = frozenset({
    "counter", "gauge", "histogram", "summary", "untyped", "gaugehistogram", "info", "stateset",
})
# Which suffixed sample names a declared family of each type owns.
_SUFFIXES: Final = MappingProxyType({
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("_sum", "_count", "_created"),
    "info": ("_info",),
})
_ALL_SUFFIXES: Final = ("_total", "_created", "_bucket", "_sum", "_count", "_gsum", "_gcount",
                        "_info")

# DCGM marks a field it could not read with a "blank" sentinel instead of leaving it out:
# DCGM_INT64_BLANK = 2**63 - 16 and its NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED neighbours
# (9223372036854775794 is NOT_SUPPORTED), DCGM_FP64_BLANK = 2**47 and its +1..+3 neighbours
# (NVIDIA/DCGM dcgmlib/dcgm_structs.h). None of them is a reading.
DCGM_PREFIX: Final = "DCGM_FI_"
DCGM_INT64_SENTINEL_MIN: Final = float(2**63 - 20)
DCGM_FP64_SENTINELS: Final = frozenset(float(2**47 + i) for i in range(4))

_NAME_RE: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# One label pair and the separator after it; the value regex is the unrolled, backtracking-free
# form of "any char but quote and backslash, or a backslash escape".
_LABEL_RE: Final = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"[ \t]*(,?)[ \t]*'
)
# The common case in one match: simple labels (no escapes, no space but after a comma), value,
# optional timestamp. Anything else takes the careful path (_split_labels) or is a problem.
_FAST_SAMPLE_RE: Final = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(?:,[ \t]*)?)*)\})?'
    r"[ \t]+([^ \t#]+)(?:[ \t]+([^ \t#]+))?[ \t]*$"
)
_FAST_LABEL_RE: Final = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_META_RE: Final = re.compile(r"#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t](.*))?$")
_EOF_RE: Final = re.compile(r"#[ \t]*EOF[ \t]*$")
_ESCAPE_RE: Final = re.compile(r"\\(.)")
_ESCAPES: Final = MappingProxyType({"\\": "\\", "n": "\n", '"': '"'})


class Sample(NamedTuple):
    """One sample line: full sample name (with its suffix), labels, value, optional timestamp
    (as written: milliseconds in 0.0.4, seconds in OpenMetrics) and its 1-based line number."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None
    line: int


class PageProblem(NamedTuple):
    line: int  # 1-based line of the page
    message: str


@dataclass(slots=True)
class Family:
    name: str
    type: str = UNTYPED
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


@dataclass(slots=True)
class ParsedPage:
    source: str  # where the page came from (a URL or a file), for messages
    families: dict[str, Family]  # by family name, in order of first appearance
    problems: list[PageProblem]  # the first MAX_PROBLEMS_KEPT
    num_problems: int  # all of them

    @property
    def num_samples(self) -> int:
        return sum(len(family.samples) for family in self.families.values())


class _LineError(Exception):
    """A sample line that cannot be read; the message says why."""


class _Parse:
    """The state of one parse: metadata collected first, then samples grouped under it."""

    def __init__(self, source: str) -> None:
        self.page = ParsedPage(source, {}, [], 0)
        self.declared: dict[str, Family] = {}
        self.family_of_name: dict[str, Family] = {}
        self.seen_series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def problem(self, line: int, message: str) -> None:
        self.page.num_problems += 1
        if len(self.page.problems) < MAX_PROBLEMS_KEPT:
            self.page.problems.append(PageProblem(line, message))

    def declare(self, number: int, keyword: str, name: str, text: str) -> None:
        if not _NAME_RE.fullmatch(name):
            self.problem(number, f"# {keyword}: {name!r} is not a valid metric name")
            return
        family = self.declared.get(name)
        if family is None:
            family = self.declared[name] = self.page.families[name] = Family(name)
        if keyword == "HELP":
            if family.help:
                self.problem(number, f"second # HELP for {name} ignored")
            else:
                family.help = _unescape(text)
            return
        kind = text.strip()
        kind = UNTYPED if kind == "unknown" else kind
        if kind not in _TYPES:
            self.problem(number, f"# TYPE {name}: unknown type {kind!r} ignored")
        elif family.type != UNTYPED and family.type != kind:
            self.problem(number, f"second # TYPE for {name} ({kind}) ignored: it is {family.type}")
        else:
            family.type = kind

    def family_for(self, name: str) -> Family:
        family = self.family_of_name.get(name)
        if family is None:
            family = self.family_of_name[name] = self._resolve(name)
        return family

    def _resolve(self, name: str) -> Family:
        if name in self.declared:
            return self.declared[name]
        for suffix in _ALL_SUFFIXES:
            if not name.endswith(suffix):
                continue
            base = name[: -len(suffix)]
            owner = self.declared.get(base)
            if owner is not None and suffix in _SUFFIXES.get(owner.type, ()):
                return owner
            # prometheus_client's 0.0.4 output declares a counter as x_total, its sample x_created
            owner = self.declared.get(base + "_total")
            if suffix == "_created" and owner is not None and owner.type == "counter":
                return owner
        return self.page.families.setdefault(name, Family(name))

    def add_sample(self, number: int, line: str) -> None:
        try:
            name, labels, value_text, timestamp_text = _split_sample(line)
            value = _float(value_text, "value")
            timestamp = None if timestamp_text is None else _timestamp(timestamp_text)
        except _LineError as exc:
            self.problem(number, f"{exc}: {_shorten(line)}")
            return
        family = self.family_for(name)
        refusal = _refusal(family, name, labels, value, value_text)
        if refusal:
            self.problem(number, refusal)
            return
        key = (name, tuple(sorted(labels.items())))
        if key in self.seen_series:
            self.problem(number, f"duplicate series {_series(name, labels)}: the first is kept")
            return
        self.seen_series.add(key)
        family.samples.append(Sample(name, labels, value, timestamp, number))


def parse_page(text: str, source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedPage:
    """Parse a Prometheus text page; never raises on its content (see the module docstring)."""
    state = _Parse(source)
    text, oversize = _truncate(text, max_bytes)
    sample_lines: list[tuple[int, str]] = []
    eof_at = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if eof_at:
            if line.strip():
                state.problem(number, f"content after # EOF (line {eof_at}) ignored")
                break
            continue
        line = line.rstrip("\r")
        if not line or line.isspace():
            continue
        if line[0] != "#":
            sample_lines.append((number, line))
        elif _EOF_RE.match(line):
            eof_at = number
        elif (meta := _META_RE.match(line)) is not None:
            state.declare(number, meta[1], meta[2], meta[3] or "")
    # Samples after all metadata, so HELP/TYPE may come in any order and even after samples.
    for number, line in sample_lines:
        state.add_sample(number, line)
    if oversize is not None:
        state.problem(*oversize)
    state.page.problems.sort()
    return state.page


def _truncate(text: str, max_bytes: int) -> tuple[str, PageProblem | None]:
    """The page cut to at most max_bytes of UTF-8 at a line boundary, and the problem if cut."""
    if len(text) <= max_bytes // 4:  # at most 4 bytes per character: surely small enough
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, None
    kept = data[: data.rfind(b"\n", 0, max_bytes + 1) + 1]
    first_dropped = kept.count(b"\n") + 1
    message = (f"page is {len(data)} bytes, over the limit of {max_bytes}: "
               f"ignored from line {first_dropped} on")
    return kept.decode("utf-8", "replace"), PageProblem(first_dropped, message)


def _split_sample(line: str) -> tuple[str, dict[str, str], str, str | None]:
    """Name, labels, value and timestamp text of a sample line; _LineError if it is not one."""
    fast = _FAST_SAMPLE_RE.match(line)
    if fast is not None:
        name, block, value, timestamp = fast.groups()
        if not block:
            return name, {}, value, timestamp
        pairs = dict(_FAST_LABEL_RE.findall(block))
        if len(pairs) == block.count('="'):  # else a label given twice: the careful path says so
            return name, pairs, value, timestamp
    match = _NAME_RE.match(line)
    if match is None:
        raise _LineError("not a sample or a comment")
    name, pos = match[0], match.end()
    labels: dict[str, str] = {}
    if line.startswith("{", pos):
        labels, pos = _split_labels(line, pos + 1)
    elif pos < len(line) and line[pos] not in " \t":
        raise _LineError(f"bad character {line[pos]!r} after the metric name")
    rest = line[pos:].split("#", 1)[0]  # an OpenMetrics exemplar follows a '#'
    tokens = rest.split()
    if not 1 <= len(tokens) <= 2:
        raise _LineError("expected a value and an optional timestamp after the name")
    return name, labels, tokens[0], tokens[1] if len(tokens) == 2 else None


def _split_labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    """The labels starting at pos (just after '{'), and the position after the closing '}'."""
    labels: dict[str, str] = {}
    while True:
        while line.startswith((" ", "\t"), pos):
            pos += 1
        if line.startswith("}", pos):
            return labels, pos + 1
        match = _LABEL_RE.match(line, pos)
        if match is None:
            raise _LineError(f"bad label syntax at column {pos + 1}")
        label, raw, comma = match[1], match[2], match[3]
        if label in labels:
            raise _LineError(f"label {label!r} given twice")
        labels[label] = _unescape(raw)
        pos = match.end()
        if not comma and not line.startswith("}", pos):
            raise _LineError(f"expected ',' or '}}' at column {pos + 1}")


def _float(token: str, what: str) -> float:
    if "_" in token:  # Python's float() takes 1_000, the Prometheus format does not
        raise _LineError(f"{what} {token!r} is not a number")
    try:
        return float(token)
    except ValueError:
        raise _LineError(f"{what} {token!r} is not a number") from None


def _timestamp(token: str) -> float:
    timestamp = _float(token, "timestamp")
    if not math.isfinite(timestamp):
        raise _LineError(f"timestamp {token!r} is not finite")
    return timestamp


def _refusal(
    family: Family, name: str, labels: dict[str, str], value: float, value_text: str
) -> str:
    """Why a well-formed sample is refused, or "" if it is kept."""
    if not math.isfinite(value):
        quantile = family.type == "summary" and name == family.name and "quantile" in labels
        if not quantile:
            return f"{_series(name, labels)}: value {value} refused, a finite number is needed"
    if name.startswith(DCGM_PREFIX) and (
        value >= DCGM_INT64_SENTINEL_MIN or value in DCGM_FP64_SENTINELS
    ):
        return (f"{_series(name, labels)}: {value_text} is DCGM's 'blank' sentinel (field not "
                "supported or not read): treated as missing")
    if family.type in ("histogram", "gaugehistogram") and name.endswith("_bucket"):
        try:
            float(labels["le"])
        except (KeyError, ValueError):
            return f"{_series(name, labels)}: a histogram bucket needs a numeric 'le' label"
    return ""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m[1], m[0]), text)


def _series(name: str, labels: dict[str, str]) -> str:
    pairs = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return f"{name}{{{pairs}}}" if pairs else name


def _shorten(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
