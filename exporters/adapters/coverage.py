"""Coverage of a page by the engine tables: is every metric family on it decided?

The rule: each family an engine exposes is either **mapped** (a row of the engine's table reads
it), **not mapped** (listed in the table's ``not_mapped`` with a reason), or **ignored** by one
of ``IGNORE_RULES`` (the client library's and the API server's own families, and the
``_created`` start-time companion of a decided family). Anything else is **undecided**: a
family nobody looked at, typically one a new engine release added. Conversely, a schema metric
is **missing** when the table maps it but none of its rows finds its source on the page (a
renamed or removed metric); a ``legacy`` row (a name only older releases export) never makes
a metric missing by its absence, and a fallback row does not count while another row for the
same metric finds data. A schema metric whose rows all miss the page but each either is
``legacy`` or ``requires`` a condition (a backend, an opt-in flag, a GPU: Triton's TensorRT-LLM
and GPU families on a CPU server) is **absent**, with the conditions, rather than missing: the
page is complete without it.

Families are named as ``exposition.parse_page`` names them, and counters are reported with
``_total`` as the tables spell them, so a 0.0.4 page (``# TYPE x_total counter`` plus an
``x_created`` gauge) and its OpenMetrics form (``# TYPE x counter``, ``x_created`` inside the
family) give the same coverage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from exporters.adapters.table import EngineTable, Row, get_table
from exporters.exposition import Family, ParsedPage
from exporters.schema import SCHEMA, MetricType

CREATED_RULE: Final = "*_created"
_CREATED: Final = "_created"


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """Families on every engine's page that are not the engine's: ignored by name prefix."""

    name: str  # as reported, e.g. "process_*"
    prefix: str
    why: str


IGNORE_RULES: Final[tuple[IgnoreRule, ...]] = (
    IgnoreRule("process_*", "process_",
               "prometheus_client's process collector: the server process's CPU, memory, fds"),
    IgnoreRule("python_*", "python_", "prometheus_client's platform and garbage-collector "
               "collectors"),
    IgnoreRule("http_*", "http_", "the API server's HTTP middleware: requests as the HTTP "
               "layer saw them, not the engine"),
)
IGNORE_WHY: Final[Mapping[str, str]] = {
    **{rule.name: rule.why for rule in IGNORE_RULES},
    CREATED_RULE: "prometheus_client's creation timestamp of a decided family, not a reading",
}


@dataclass(frozen=True, slots=True)
class Coverage:
    engines: tuple[str, ...]
    mapped: tuple[str, ...]  # families a row reads
    not_mapped: Mapping[str, str]  # family -> the table's reason
    ignored: Mapping[str, str]  # family -> the rule (a key of IGNORE_WHY)
    undecided: tuple[str, ...]  # families nobody decided about
    missing: tuple[str, ...]  # schema metrics mapped from sources none of which is on the page
    # schema metrics whose sources are off the page because a stated condition is not met
    absent: Mapping[str, str] = field(default_factory=dict)  # metric -> the conditions

    @property
    def complete(self) -> bool:
        return not self.undecided and not self.missing

    def ignored_by_rule(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rule in self.ignored.values():
            counts[rule] = counts.get(rule, 0) + 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "engines": list(self.engines),
            "mapped": list(self.mapped),
            "not_mapped": dict(self.not_mapped),
            "ignored": self.ignored_by_rule(),
            "ignored_families": dict(self.ignored),
            "undecided": list(self.undecided),
            "missing": list(self.missing),
            "absent": dict(self.absent),
        }


def coverage(page: ParsedPage, engines: Sequence[str]) -> Coverage:
    """Which of the page's families ``engines``' tables decide, and which schema metrics they
    map that the page lacks (see the module docstring for the rule)."""
    tables = [get_table(engine) for engine in engines]
    sources = {source for table in tables for row in table.rows for source in row.sources}
    reasons = {name: why for table in tables for name, why in table.not_mapped.items()}
    mapped: list[str] = []
    not_mapped: dict[str, str] = {}
    ignored: dict[str, str] = {}
    undecided: list[str] = []
    for family in page.families.values():
        name = family_name(family)
        decision = _decide(family, sources, reasons)
        if decision is None:
            undecided.append(name)
            continue
        kind, detail = decision
        if kind == "mapped":
            mapped.append(name)
        elif kind == "not_mapped":
            not_mapped[name] = detail
        else:
            ignored[name] = detail
        # OpenMetrics keeps x_created inside x's family: the same companion as in 0.0.4.
        for created in _created_samples(family):
            ignored[created] = CREATED_RULE
    missing, absent = _missing(page, tables)
    return Coverage(tuple(engines), tuple(sorted(mapped)), dict(sorted(not_mapped.items())),
                    dict(sorted(ignored.items())), tuple(sorted(undecided)), tuple(missing),
                    absent)


def family_name(family: Family) -> str:
    """The family as tables name it: a counter with ``_total`` (OpenMetrics drops it from
    ``# TYPE``), unless its samples go without (Triton's counters)."""
    if family.type != "counter" or family.name.endswith("_total"):
        return family.name
    if any(sample.name == family.name for sample in family.samples):
        return family.name
    return family.name + "_total"


def _aliases(name: str) -> tuple[str, ...]:
    # A table may name a counter with or without _total (Triton's have none).
    return (name, name + "_total")


def _decide(family: Family, sources: set[str], reasons: Mapping[str, str]
            ) -> tuple[str, str] | None:
    """("mapped" | "not_mapped" | "ignored", detail), or None when nobody decided."""
    name = family_name(family)
    decision = _by_table(name, sources, reasons)
    if decision is not None:
        return decision
    # A 0.0.4 x_created gauge: ignored when x (x_total for a counter) is decided, under the
    # same rule as OpenMetrics' x_created sample inside x's family.
    base = name.removesuffix(_CREATED)
    if base != name and (_by_table(base, sources, reasons) or _by_prefix(base)):
        return "ignored", CREATED_RULE
    return _by_prefix(name)


def _by_table(name: str, sources: set[str], reasons: Mapping[str, str]
              ) -> tuple[str, str] | None:
    for alias in _aliases(name):
        if alias in sources:
            return "mapped", ""
        if alias in reasons:
            return "not_mapped", reasons[alias]
    return None


def _by_prefix(name: str) -> tuple[str, str] | None:
    rule = next((rule for rule in IGNORE_RULES if name.startswith(rule.prefix)), None)
    return ("ignored", rule.name) if rule is not None else None


def _created_samples(family: Family) -> set[str]:
    return {sample.name for sample in family.samples
            if sample.name.endswith(_CREATED) and sample.name != family.name}


def _missing(page: ParsedPage, tables: Iterable[EngineTable]
             ) -> tuple[list[str], dict[str, str]]:
    """Schema metrics whose rows all miss the page, unless every one of them is legacy or
    requires a condition; and those of the latter with a condition (metric -> conditions)."""
    by_name: dict[str, list[Mapping[str, str]]] = {}
    for family in page.families.values():
        for sample in family.samples:
            by_name.setdefault(sample.name, []).append(sample.labels)
    rows_of: dict[str, list[Row]] = {}
    for table in tables:
        for row in table.rows:
            rows_of.setdefault(row.target.name, []).append(row)
    missing: list[str] = []
    absent: dict[str, str] = {}
    for spec in SCHEMA:
        rows = rows_of.get(spec.name)
        if not rows or any(_row_found(row, by_name) for row in rows):
            continue
        if any(not row.legacy and row.requires is None for row in rows):
            missing.append(spec.name)
            continue
        conditions = dict.fromkeys(row.requires for row in rows if row.requires is not None)
        if conditions:
            absent[spec.name] = "; ".join(c for c in conditions if c is not None)
    return missing, absent


def _row_found(row: Row, by_name: Mapping[str, list[Mapping[str, str]]]) -> bool:
    """Whether the page has samples for the row: every term of a sum, a histogram's buckets or
    count, with the row's ``match`` labels."""
    for source in row.sources:
        names = ((source + "_bucket", source + "_count")
                 if row.target.type is MetricType.HISTOGRAM else (source,))
        found = (labels for name in names for labels in by_name.get(name, ()))
        if not any(_matches(labels, row.match) for labels in found):
            return False
    return True


def _matches(labels: Mapping[str, str], match: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in match.items())
