"""Engine mapping tables: the YAML files under mappings/, read and checked against the schema.

One file per engine. Each row maps one engine metric (or a sum of a few) onto one schema metric:

    - target: gen_ai_server_time_to_first_token_seconds   # a schema name, checked here
      source: nv_inference_first_response_histogram_ms     # name as scraped (histograms: base)
      match: {request_type: active}        # only samples with these labels; dropped from output
      scale: 0.001                         # unit conversion (applies to values, _sum and le)
      labels: {model_name: model}          # label renames (the engine-level ones apply too)
      values: {err: {validation: bad_request}}  # label value map; a value not listed is unmapped
      value_from_label: num_gpu_blocks     # the value is this label's (an info-style gauge)
      keep_labels: []                      # keep only these labels (after renames)
      set_labels: {finish_reason: stop}    # constant labels added to every output series
      sum_of: [A, B]                       # instead of source: the sum of gauges, per label set
      legacy: true                         # a name only older releases export (see below)
      requires: the TensorRT-LLM backend   # a condition without which the source is absent
      note: why this mapping is an approximation, where it is one

Rows with the same target are alternatives in file order: a series (label set) produced by an
earlier row wins over the same series from a later one (a V1 name over its deprecated V0 twin).
Per engine, ``missing`` lists the schema metrics the engine does not provide, and every schema
metric of the engine's kind is either a row target or missing. ``not_mapped`` names engine
metrics deliberately left out, with the reason. A ``legacy`` row reads a name that only older
releases export: when its source is absent from a page, that is no sign of a renamed or removed
metric (``exporters.adapters.coverage``). A ``requires`` row reads a name the engine exports only
under a condition the row states (a backend, an opt-in flag, a GPU): when its source is absent,
the metric is reported absent for that reason, not missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

from exporters.schema import ENGINE_SPECS, GPU_SPECS, LABEL_VALUES, SCHEMA, MetricSpec, MetricType

KINDS: Final[Mapping[str, tuple[MetricSpec, ...]]] = MappingProxyType({
    "inference": ENGINE_SPECS,
    "gpu": GPU_SPECS,
})
_ROW_KEYS: Final = frozenset({
    "target", "source", "sum_of", "match", "scale", "labels", "values", "value_from_label",
    "keep_labels", "note", "legacy", "requires", "set_labels",
})
_TABLE_KEYS: Final = frozenset({
    "engine", "kind", "detect", "labels", "rows", "missing", "not_mapped", "identity",
})


class AdapterError(Exception):
    """Base of the adapter errors."""


class MappingTableError(AdapterError):
    """A mapping table file that is not valid; the message names the file and the row."""


class UnknownEngine(AdapterError):
    """An engine name without a table, or a page on which no known engine's metrics appear."""


@dataclass(frozen=True, slots=True)
class Row:
    target: MetricSpec
    sources: tuple[str, ...]  # one, or the terms of a sum_of
    match: Mapping[str, str]
    scale: float
    labels: Mapping[str, str]  # renames, engine-level merged with the row's own
    values: Mapping[str, Mapping[str, str]]  # source label -> source value -> output value
    value_from_label: str | None
    keep_labels: frozenset[str] | None
    position: str  # "vllm.yaml rows[3]", for messages
    legacy: bool = False  # a name only older releases export
    requires: str | None = None  # the condition without which the engine omits the source
    # Constant labels every output series gets (a success counter without a finish reason
    # counted as finish_reason="stop"), after renames and keep_labels.
    set_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_sum(self) -> bool:
        return len(self.sources) > 1


@dataclass(frozen=True, slots=True)
class EngineTable:
    engine: str
    kind: str  # a key of KINDS
    detect: tuple[str, ...]  # metric name prefixes that identify the engine on a page
    rows: tuple[Row, ...]
    missing: tuple[str, ...]  # schema metrics the engine does not provide
    not_mapped: Mapping[str, str]  # engine metric -> why it is left out


def mappings_dir() -> Path:
    return Path(str(resources.files("exporters.adapters").joinpath("mappings")))


@cache
def load_tables() -> Mapping[str, EngineTable]:
    """Every table under mappings/, by engine name (read once: the files are package data)."""
    paths = sorted(mappings_dir().glob("*.yaml"))
    return MappingProxyType({path.stem: load_table(path) for path in paths})


def get_table(engine: str) -> EngineTable:
    tables = load_tables()
    if engine not in tables:
        raise UnknownEngine(f"no mapping table for engine {engine!r}; known: {sorted(tables)}")
    return tables[engine]


def load_table(path: Path) -> EngineTable:
    """One table file, checked against the schema; MappingTableError names what is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise MappingTableError(f"{path}: cannot read the mapping table: {exc}") from exc
    where = path.name
    table = _mapping(data, where)
    _check_keys(table, _TABLE_KEYS, where)
    if table.get("engine") != path.stem:
        raise MappingTableError(f"{where}: 'engine' must be {path.stem!r}, the file name")
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise MappingTableError(f"{where}: 'kind' must be one of {sorted(KINDS)}, got {kind!r}")
    identity_missing: tuple[str, ...] = ()
    if table.get("identity"):
        rows = _identity_rows(where)
        # What the in-process instrumentation does not build, no page of ours carries.
        identity_missing = tuple(spec.name for spec in KINDS[kind] if not spec.in_process)
    else:
        renames = _str_mapping(table.get("labels", {}), f"{where} labels")
        raw_rows = table.get("rows") or []
        if not isinstance(raw_rows, list):
            raise MappingTableError(f"{where}: 'rows' must be a list")
        rows = tuple(_row(raw, renames, f"{where} rows[{i}]") for i, raw in enumerate(raw_rows))
    missing = identity_missing + tuple(_str_list(table.get("missing", []), f"{where} missing"))
    _check_coverage(rows, missing, KINDS[kind], where)
    not_mapped = _str_mapping(table.get("not_mapped", {}), f"{where} not_mapped")
    # A sum_of term may be listed too (used only in a sum); a whole source may not.
    both = sorted({row.sources[0] for row in rows if not row.is_sum} & set(not_mapped))
    if both:
        raise MappingTableError(f"{where}: {both} are both row sources and not_mapped")
    detect = tuple(_str_list(table.get("detect", []), f"{where} detect"))
    if not detect:
        raise MappingTableError(f"{where}: 'detect' needs at least one metric name prefix")
    return EngineTable(path.stem, kind, detect, rows, missing, not_mapped)


def _row(raw: object, renames: Mapping[str, str], where: str) -> Row:
    row = _mapping(raw, where)
    _check_keys(row, _ROW_KEYS, where)
    target = _target(row.get("target"), where)
    sources = _sources(row, where)
    scale = row.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
        math.isfinite(scale) and scale > 0
    ):
        raise MappingTableError(f"{where}: 'scale' must be a positive number, got {scale!r}")
    value_from_label = row.get("value_from_label")
    if value_from_label is not None and not isinstance(value_from_label, str):
        raise MappingTableError(f"{where}: 'value_from_label' must be a label name")
    if target.type is MetricType.HISTOGRAM and (len(sources) > 1 or value_from_label):
        raise MappingTableError(f"{where}: a histogram row takes one 'source' and nothing else")
    labels = {**renames, **_str_mapping(row.get("labels", {}), f"{where} labels")}
    values = _values(row.get("values", {}), labels, target, where)
    keep = row.get("keep_labels")
    keep_labels = None if keep is None else frozenset(_str_list(keep, f"{where} keep_labels"))
    legacy = row.get("legacy", False)
    if not isinstance(legacy, bool):
        raise MappingTableError(f"{where}: 'legacy' must be true or false, got {legacy!r}")
    requires = row.get("requires")
    if requires is not None and (not isinstance(requires, str) or not requires.strip()):
        raise MappingTableError(f"{where}: 'requires' must say the condition, got {requires!r}")
    set_labels = _set_labels(row.get("set_labels", {}), where)
    return Row(target, sources, MappingProxyType(_str_mapping(row.get("match", {}), where)),
               float(scale), MappingProxyType(labels), values, value_from_label, keep_labels,
               where, legacy, requires, set_labels)


def _set_labels(raw: object, where: str) -> Mapping[str, str]:
    constant = _str_mapping(raw, f"{where} set_labels")
    for label, value in constant.items():
        allowed = LABEL_VALUES.get(label)
        if allowed is not None and value not in allowed:
            raise MappingTableError(f"{where}: set_labels {label}={value!r} is not in the "
                                    f"schema's closed set {list(allowed)}")
    return MappingProxyType(constant)


def _target(name: object, where: str) -> MetricSpec:
    if not isinstance(name, str):
        raise MappingTableError(f"{where}: 'target' must be a schema metric name")
    spec = next((spec for spec in SCHEMA if spec.name == name), None)
    if spec is None:
        raise MappingTableError(f"{where}: target {name!r} is not a metric of the schema "
                                "(give the name without _total, as in exporters.schema)")
    return spec


def _sources(row: Mapping[str, Any], where: str) -> tuple[str, ...]:
    if ("source" in row) == ("sum_of" in row):
        raise MappingTableError(f"{where}: give exactly one of 'source' and 'sum_of'")
    if "source" in row:
        source = row["source"]
        if not isinstance(source, str) or not source:
            raise MappingTableError(f"{where}: 'source' must be a metric name")
        return (source,)
    terms = _str_list(row["sum_of"], f"{where} sum_of")
    if len(terms) < 2:
        raise MappingTableError(f"{where}: 'sum_of' needs two or more metric names")
    return tuple(terms)


def _values(
    raw: object, renames: Mapping[str, str], target: MetricSpec, where: str
) -> Mapping[str, Mapping[str, str]]:
    result: dict[str, Mapping[str, str]] = {}
    for label, mapping in _mapping(raw, f"{where} values").items():
        value_map = _str_mapping(mapping, f"{where} values.{label}")
        allowed = LABEL_VALUES.get(renames.get(label, label))
        bad = sorted(v for v in value_map.values() if allowed is not None and v not in allowed)
        if bad:
            raise MappingTableError(f"{where}: values {bad} of label {label!r} are not in the "
                                    f"schema's closed set {list(allowed or ())}")
        result[label] = MappingProxyType(value_map)
    return MappingProxyType(result)


def _identity_rows(where: str) -> tuple[Row, ...]:
    """Our own schema onto itself: every metric under its exposed name (counters with _total)."""
    empty: Mapping[str, str] = MappingProxyType({})
    return tuple(
        Row(spec, (spec.name if spec.type is MetricType.HISTOGRAM else spec.exposed_name,),
            empty, 1.0, empty, MappingProxyType({}), None, None, f"{where} identity {spec.name}")
        for spec in SCHEMA if spec.in_process
    )


def _check_coverage(
    rows: tuple[Row, ...], missing: tuple[str, ...], specs: tuple[MetricSpec, ...], where: str
) -> None:
    targets = {row.target.name for row in rows}
    unknown = sorted(set(missing) - {spec.name for spec in SCHEMA})
    both = sorted(targets & set(missing))
    uncovered = [spec.name for spec in specs if spec.name not in targets | set(missing)]
    for problem, names in (("are not schema metrics", unknown),
                           ("are both mapped and listed missing", both),
                           ("are neither mapped nor listed missing", uncovered)):
        if names:
            raise MappingTableError(f"{where}: {names} {problem}")


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise MappingTableError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")


def _mapping(data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise MappingTableError(f"{where}: expected a mapping with string keys")
    return data


def _str_mapping(data: object, where: str) -> dict[str, str]:
    mapping = _mapping(data, where)
    if not all(isinstance(value, str) for value in mapping.values()):
        raise MappingTableError(f"{where}: expected string values (quote numbers)")
    return mapping


def _str_list(data: object, where: str) -> list[str]:
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise MappingTableError(f"{where}: expected a list of strings")
    return data
