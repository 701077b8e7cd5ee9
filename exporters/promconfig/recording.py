"""Recording rules for the rows relabeling cannot do: they read the raw series (``RAW_PREFIX``)
and record the schema series.

What each PromQL construct reproduces of the bridge (exporters.adapters.normalize):
``a or b`` keeps every series of ``a`` and those of ``b`` with a label set ``a`` lacks, which is
"an earlier row's series wins per label set" (for buckets, ``unless ignoring(le)`` makes it per
histogram); ``a + b`` joins series with equal label sets, as sum_of does; ``label_replace``
renames labels and maps values; ``sum without (label)`` adds up the counters a value map merges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from exporters.adapters.table import Row
from exporters.exposition import DCGM_FP64_SENTINELS, DCGM_INT64_SENTINEL_MIN
from exporters.promconfig.plan import (
    RAW_PREFIX,
    SENTINEL_PREFIX,
    TMP_LABEL,
    Plan,
    merges_series,
    row_gaps,
)
from exporters.schema import MetricType

Rule = dict[str, str]
# keep_labels keeps these too: the target labels Prometheus attaches, as the bridge's extra labels.
TARGET_LABELS: Final = ("instance", "job")


def rule_group(plan: Plan, interval: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"name": f"inferwatch-normalize-{plan.engine}"}
    if interval:
        group["interval"] = interval
    group["rules"] = [rule for rows in plan.rule_targets.values() for rule in target_rules(rows)]
    return group


def target_rules(rows: Sequence[Row]) -> list[Rule]:
    """The rules recording one target from its alternative rows (rows with gaps left out)."""
    usable = [row for row in rows if row.value_from_label is None]
    if not usable:
        return []
    target = usable[0].target
    if target.type is not MetricType.HISTOGRAM:
        exprs = [row_expr(row, "") for row in usable]
        return [{"record": target.exposed_name, "expr": " or ".join(exprs)}]
    rules: list[Rule] = []
    for suffix in ("_bucket", "_sum", "_count"):
        parts = [row_expr(row, suffix) for row in usable
                 if suffix != "_bucket" or not row_gaps("", row)]
        if not parts:
            continue
        combined = parts[0]
        for part in parts[1:]:
            # A later row's buckets only where no earlier row has the histogram (any le).
            combined = (f"{combined} or ({part} unless ignoring(le) ({combined}))"
                        if suffix == "_bucket" else f"{combined} or {part}")
        rules.append({"record": target.name + suffix, "expr": combined})
    return rules


def row_expr(row: Row, suffix: str) -> str:
    """PromQL for one row's series (``suffix``: a histogram's _bucket/_sum/_count, or "")."""
    expr = " + ".join(_selector(row, source + suffix) for source in row.sources)
    expr = _labels(row, f"({expr})" if row.is_sum else expr)
    if row.keep_labels is not None:
        kept = (row.keep_labels | set(TARGET_LABELS) | set(row.set_labels)
                | ({"le"} if suffix == "_bucket" else set()))
        by = ", ".join(sorted(kept))
        expr = f"{_merge(row)} by ({by}) ({expr})"
    if row.scale != 1.0 and suffix in ("", "_sum"):
        expr = f"({expr}) * {row.scale!r}"
    return expr


def _selector(row: Row, name: str) -> str:
    matchers = [f"{k}={_string(v)}" for k, v in sorted(row.match.items())]
    matchers += [f"{label}=~{_string('|'.join(re.escape(v) for v in sorted(values)))}"
                 for label, values in sorted(row.values.items())]
    selector = RAW_PREFIX + name + ("{" + ", ".join(matchers) + "}" if matchers else "")
    if name.startswith(SENTINEL_PREFIX):
        # The comparisons filter (they keep the sample's value): no DCGM "blank" sentinel.
        sentinels = "".join(f" != {value!r}" for value in sorted(DCGM_FP64_SENTINELS))
        selector = f"({selector} < {DCGM_INT64_SENTINEL_MIN!r}{sentinels})"
    return selector


def _labels(row: Row, expr: str) -> str:
    """The row's match labels dropped, value maps applied, labels renamed, constant labels
    set."""
    for label in sorted(row.match):
        expr = _set(expr, label, "", "", "")
    for label, value_map in sorted(row.values.items()):
        for mapped in sorted(set(value_map.values())):
            sources = "|".join(re.escape(v) for v, m in sorted(value_map.items()) if m == mapped)
            expr = _set(expr, TMP_LABEL, _literal(mapped), label, sources)
        if merges_series(row):
            expr = f"{_merge(row)} without ({label}) ({expr})"
        else:
            expr = _set(expr, label, "", "", "")
        expr = _set(_set(expr, row.labels.get(label, label), "$1", TMP_LABEL, "(.+)"),
                    TMP_LABEL, "", "", "")
    for label, new in sorted(row.labels.items()):
        if label in row.values or label in row.match or label == new:
            continue
        expr = _set(_set(expr, new, "$1", label, "(.+)"), label, "", "", "")
    for label, value in sorted(row.set_labels.items()):
        expr = _set(expr, label, _literal(value), "", "")
    return expr


def _merge(row: Row) -> str:
    """How series merged into one are combined: counters add up (as in the bridge); of gauges
    and histograms the bridge keeps the first on the page, which PromQL cannot know, so the
    largest."""
    return "sum" if row.target.type is MetricType.COUNTER else "max"


def _set(expr: str, dst: str, replacement: str, src: str, regex: str) -> str:
    return (f"label_replace({expr}, {_string(dst)}, {_string(replacement)}, {_string(src)}, "
            f"{_string(regex)})")


def _string(text: str) -> str:
    """A PromQL string literal (its escapes are Go's, which JSON's are a subset of)."""
    return json.dumps(text)


def _literal(text: str) -> str:
    return text.replace("$", "$$")
