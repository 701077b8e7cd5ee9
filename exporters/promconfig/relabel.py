"""metric_relabel_configs for one engine: rows relabeling does alone become schema series; the
raw series that recording rules read get ``RAW_PREFIX``; everything else is dropped.

Relabel regexes are anchored by Prometheus; ``source_labels`` are joined with ";". A label set
to "" is removed, which is how a label is dropped from the matching series only (``labeldrop``
would drop it from every series of the scrape).
"""

from __future__ import annotations

import re
from typing import Any, Final

from exporters.adapters.table import Row
from exporters.promconfig.plan import RAW_PREFIX, TMP_LABEL, Plan
from exporters.schema import MetricType

RelabelConfig = dict[str, Any]
_SUFFIX_GROUP = "_(bucket|sum|count)"  # captured: the rename keeps the suffix
_SUFFIX_ANY = "_(?:bucket|sum|count)"
# Prometheus 2.x keeps 'le' as the page writes it; the bridge writes it as a float in Go's
# format, and rules select buckets by it (le="10.0"), so an integer bound (Triton, TGI write
# le="10") gains ".0". Larger integers and other spellings are kept as written.
LE_AS_FLOAT: Final[RelabelConfig] = {
    "source_labels": ["__name__", "le"], "regex": ".+_bucket;([0-9]{1,6})", "target_label": "le",
    "replacement": "${1}.0"}


def metric_relabel_configs(plan: Plan) -> list[RelabelConfig]:
    # First, only the families some row reads: the rest of a page (about 40% of vLLM's) then
    # leaves after one regex instead of passing every rule below (vmagent: about 20% less CPU
    # per sample, docs/benchmarks.md). The final keep still decides what is stored.
    configs: list[RelabelConfig] = [{"action": "keep", "source_labels": ["__name__"],
                                     "regex": _read_regex(plan)}]
    for row in plan.relabel_rows:
        configs.extend(row_relabel_configs(row))
    if plan.raw_sources:
        configs.append(_replace(["__name__"], f"({_sources_regex(plan.raw_sources)})",
                                "__name__", RAW_PREFIX + "${1}"))
    if any(r.target.type is MetricType.HISTOGRAM for r in plan.rows):
        configs.append(dict(LE_AS_FLOAT))
    kept = [output_regex(row) for row in plan.relabel_rows] + [re.escape(RAW_PREFIX) + ".*"]
    configs.append({"action": "keep", "source_labels": ["__name__"], "regex": "|".join(kept)})
    return configs


def row_relabel_configs(row: Row) -> list[RelabelConfig]:
    """The row's series renamed, its match labels dropped, labels renamed and value-mapped
    (a series whose value the map does not list is dropped, as the bridge drops it)."""
    configs = [_rename(row)] if row.sources[0] != _output_base(row) or row.match else []
    cond = output_regex(row)
    for label in sorted(row.match):
        configs.append(_replace(["__name__"], cond, label, ""))
    for label in sorted(row.values):
        configs.extend(_value_map(row, label, cond))
    for label, new in sorted(row.labels.items()):
        if label in row.values or label in row.match or label == new:
            continue
        configs.append(_replace(["__name__", label], f"{cond};(.+)", new, "${1}"))
        configs.append(_replace(["__name__"], cond, label, ""))
    return configs


def output_regex(row: Row) -> str:
    """Regex of the schema sample names the row produces."""
    if row.target.type is MetricType.HISTOGRAM:
        return re.escape(row.target.name) + _SUFFIX_ANY
    return re.escape(row.target.exposed_name)


def _output_base(row: Row) -> str:
    return row.target.name if row.target.type is MetricType.HISTOGRAM else row.target.exposed_name


def _source_regex(row: Row) -> str:
    source = re.escape(row.sources[0])
    return source + _SUFFIX_GROUP if row.target.type is MetricType.HISTOGRAM else source


def _read_regex(plan: Plan) -> str:
    """Regex of every page sample name the plan reads: relabel rows' sources, raw sources."""
    parts = sorted({_source_regex(row) for row in plan.relabel_rows})
    if plan.raw_sources:
        parts.append(_sources_regex(plan.raw_sources))
    return "|".join(parts)


def _sources_regex(sources: tuple[tuple[str, bool], ...]) -> str:
    return "|".join(re.escape(name) + ("(?:_bucket|_sum|_count)" if histogram else "")
                    for name, histogram in sources)


def _rename(row: Row) -> RelabelConfig:
    keys = sorted(row.match)
    regex = ";".join([_source_regex(row), *(re.escape(row.match[k]) for k in keys)])
    if row.target.type is MetricType.HISTOGRAM:
        name = _literal(row.target.name) + "_${1}"
    else:
        name = _literal(row.target.exposed_name)
    return _replace(["__name__", *keys], regex, "__name__", name)


def _value_map(row: Row, label: str, cond: str) -> list[RelabelConfig]:
    new = row.labels.get(label, label)
    configs = [_replace(["__name__", label], f"{cond};{re.escape(value)}", TMP_LABEL,
                        _literal(mapped))
               for value, mapped in sorted(row.values[label].items())]
    configs.append({"action": "drop", "source_labels": ["__name__", TMP_LABEL],
                    "regex": f"{cond};"})
    if new != label:
        configs.append(_replace(["__name__"], cond, label, ""))
    configs.append(_replace(["__name__", TMP_LABEL], f"{cond};(.+)", new, "${1}"))
    configs.append({"action": "labeldrop", "regex": re.escape(TMP_LABEL)})
    return configs


def _replace(source_labels: list[str], regex: str, target: str,
             replacement: str) -> RelabelConfig:
    return {"source_labels": source_labels, "regex": regex, "target_label": target,
            "replacement": replacement}


def _literal(text: str) -> str:
    """``text`` as a relabel replacement that expands to itself."""
    return text.replace("$", "$$")
