"""Which mapping rows relabeling can do alone, which need recording rules, and which neither.

Relabeling sees one series at a time and cannot touch values, so a row is done by relabeling
alone only when it is a pure rename of series nobody else reads: one row for its target (no
alternatives), no unit scale, no sum, no value taken from a label, no labels dropped by
keep_labels, a value map that never merges two series, no DCGM field (its "blank" sentinels
are values), and a source whose series no other row reads (other rows on the same source must
select disjoint series with ``match``). Everything
else is a recording rule over the raw series, which relabeling renames to ``RAW_PREFIX`` + the
engine's name; the rest of the page is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from exporters.adapters.table import AdapterError, EngineTable, Row
from exporters.exposition import DCGM_PREFIX
from exporters.schema import MetricType

# Raw engine series that recording rules read: a reserved namespace, so they never clash with
# a schema name, a rule reads only series our relabeling kept, and remote_write can drop them.
RAW_PREFIX: Final = "inferwatch_raw:"
# A label set and cleared inside one rule or relabel sequence, never stored.
TMP_LABEL: Final = "__tmp_inferwatch_value"
HISTOGRAM_SUFFIXES: Final = ("_bucket", "_sum", "_count")
# dcgm-exporter writes "blank" sentinels as values (exporters.exposition refuses them); only a
# rule can filter on a value, so these sources always go through rules.
SENTINEL_PREFIX: Final = DCGM_PREFIX
_METRIC_NAME_RE: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass(frozen=True, slots=True)
class Gap:
    """What the generated Prometheus configuration cannot reproduce of one row."""

    engine: str
    position: str  # "vllm.yaml rows[3]"
    series: str  # the schema series left out, e.g. "gen_ai_server_..._bucket"
    why: str

    def describe(self) -> str:
        return f"{self.position}: {self.series}: {self.why}"


@dataclass(frozen=True, slots=True)
class Plan:
    engine: str
    relabel_rows: tuple[Row, ...]  # done by metric_relabel_configs alone
    rule_targets: Mapping[str, tuple[Row, ...]]  # target -> its rows, in file order
    gaps: tuple[Gap, ...]

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.relabel_rows + tuple(r for rows in self.rule_targets.values() for r in rows)

    @property
    def raw_sources(self) -> tuple[tuple[str, bool], ...]:
        """(engine metric name, is a histogram base name) of what the rules read, sorted."""
        return tuple(sorted({(s, r.target.type is MetricType.HISTOGRAM)
                             for rows in self.rule_targets.values() for r in rows
                             for s in r.sources}))


class PromConfigError(AdapterError):
    """A table row Prometheus cannot be configured for; the message names engine and row."""


def plan(table: EngineTable) -> Plan:
    by_target: dict[str, list[Row]] = {}
    for row in table.rows:
        check_names(table.engine, row)
        by_target.setdefault(row.target.name, []).append(row)
    relabel: list[Row] = []
    rules: dict[str, tuple[Row, ...]] = {}
    for target, rows in by_target.items():
        if len(rows) == 1 and _relabel_only(rows[0], table.rows):
            relabel.append(rows[0])
        else:
            rules[target] = tuple(rows)
    gaps = tuple(gap for row in table.rows for gap in row_gaps(table.engine, row))
    return Plan(table.engine, tuple(relabel), rules, gaps)


def row_gaps(engine: str, row: Row) -> list[Gap]:
    """What of ``row`` Prometheus cannot reproduce (such a row's rules leave it out)."""
    name = row.target.exposed_name
    if row.value_from_label is not None:
        return [Gap(engine, row.position, name,
                    f"the value is label {row.value_from_label!r}; neither relabeling nor "
                    "PromQL can turn a label into a value")]
    if row.target.type is MetricType.HISTOGRAM and row.scale != 1.0:
        return [Gap(engine, row.position, f"{name}_bucket",
                    f"scale {row.scale:g} would have to rescale the 'le' bucket edges; only "
                    "_sum (scaled) and _count are recorded")]
    return []


def check_names(engine: str, row: Row) -> None:
    """PromConfigError unless every metric and label name of the row is one Prometheus takes
    (the bridge reads any name its parser accepts; a relabeling or rule would be invalid)."""
    bad = [name for name in row.sources if not _METRIC_NAME_RE.fullmatch(name)]
    labels = {*row.match, *row.values, *row.labels, *row.labels.values(), *row.set_labels,
              *(row.keep_labels or ()), *([row.value_from_label] if row.value_from_label else [])}
    bad += sorted(label for label in labels
                  if not _LABEL_NAME_RE.fullmatch(label) or label.startswith("__"))
    if bad:
        raise PromConfigError(f"{engine}: {row.position}: {bad} are not metric or label names "
                              "Prometheus can relabel or record")


def merges_series(row: Row) -> bool:
    """Whether the row's value map sends two source values onto one output value."""
    return any(len(set(m.values())) < len(m) for m in row.values.values())


def _relabel_only(row: Row, all_rows: tuple[Row, ...]) -> bool:
    if row.is_sum or row.scale != 1.0 or row.value_from_label is not None:
        return False
    if row.keep_labels is not None or merges_series(row) or row.set_labels:
        return False
    if row.sources[0].startswith(SENTINEL_PREFIX):
        return False
    return all(other is row or row.sources[0] not in other.sources or _disjoint(row, other)
               for other in all_rows)


def _disjoint(a: Row, b: Row) -> bool:
    """Whether no series can satisfy both rows' match."""
    return any(key in b.match and b.match[key] != value for key, value in a.match.items())
