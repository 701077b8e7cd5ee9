"""The bucket edges each engine stores its latency histograms with (``latency_edges.yaml``).

An engine scraped through an adapter keeps its own ``le`` edges: the bridge and the generated
relabelings rename its histograms, never re-bucket them. So a latency SLO on vLLM is counted at
vLLM's edges, and a rule that reads ``le="0.2"`` from vLLM's TTFT histogram reads a series that
does not exist. This module says which edges an engine has, per schema histogram, and how its
operator adds one; ``monitor.slo.edges`` decides what an SLO threshold off those edges means.
The engine ``inferwatch`` (the reference server, the instrumentation) has the schema's buckets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Final

import yaml

from exporters import schema

SCHEMA_ENGINE: Final = "inferwatch"
_FILE: Final = "latency_edges.yaml"


class UnknownEdges(KeyError):
    """No edges are known for this engine."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class EngineEdges:
    """One engine release's latency buckets, by schema histogram name."""

    engine: str
    release: str
    source: str
    how_to_add: str | None   # with {buckets}: the argument that adds edges; None: compiled in
    histograms: Mapping[str, tuple[float, ...]]
    # The engine's own name of each histogram's bucket family, where its flag needs it.
    bucket_keys: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.engine if self.engine == SCHEMA_ENGINE else \
            f"{self.engine} {self.release}"

    def edges(self, histogram: str) -> tuple[float, ...] | None:
        """The histogram's finite edges, or None where the engine has no such histogram."""
        return self.histograms.get(histogram)

    def with_edges(self, histogram: str, edges: Sequence[float], source: str) -> EngineEdges:
        """The same engine with one histogram's edges as read elsewhere (a live page)."""
        merged = dict(self.histograms)
        merged[histogram] = tuple(sorted(edges))
        return EngineEdges(self.engine, self.release, source, self.how_to_add,
                           MappingProxyType(merged), self.bucket_keys)

    def how_to_add_edge(self, histogram: str, threshold: float) -> str | None:
        """The engine argument that adds ``threshold`` to ``histogram``'s edges, or None."""
        if self.how_to_add is None:
            return None
        edges = sorted({*self.histograms.get(histogram, ()), threshold})
        key = self.bucket_keys.get(histogram, "")
        if "{key}" in self.how_to_add:  # one flag per histogram, edges as arguments (SGLang)
            return self.how_to_add.format(key=key, buckets=" ".join(f"{e:g}" for e in edges))
        # vLLM's flag takes {bucket family: edges}; others a plain list.
        argument: object = {key: edges} if key else edges
        return self.how_to_add.format(buckets=json.dumps(argument, separators=(",", ":")))


@cache
def _loaded() -> Mapping[str, EngineEdges]:
    text = resources.files("exporters.adapters").joinpath(_FILE).read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    found: dict[str, EngineEdges] = {}
    for engine, entry in raw.items():
        histograms = {name: tuple(float(e) for e in edges)
                      for name, edges in (entry.get("histograms") or {}).items()}
        for name in histograms:
            schema.get_spec(name)  # a KeyError here is a typo in the data file
        found[engine] = EngineEdges(engine, str(entry["release"]), str(entry["source"]),
                                    entry.get("how_to_add"), MappingProxyType(histograms),
                                    MappingProxyType(dict(entry.get("bucket_keys") or {})))
    return MappingProxyType(found)


@cache
def schema_edges() -> EngineEdges:
    """The inferwatch schema's own buckets, for every latency histogram of the schema."""
    histograms = {spec.name: tuple(spec.buckets) for spec in schema.SCHEMA
                  if spec.type is schema.MetricType.HISTOGRAM and spec.buckets}
    return EngineEdges(SCHEMA_ENGINE, "schema", "exporters/buckets.py", None,
                       MappingProxyType(histograms))


def known_engines() -> tuple[str, ...]:
    return (SCHEMA_ENGINE, *sorted(_loaded()))


def engine_edges(engine: str) -> EngineEdges:
    """The edges of ``engine`` (a mapping table's name, or ``inferwatch``)."""
    if engine == SCHEMA_ENGINE:
        return schema_edges()
    try:
        return _loaded()[engine]
    except KeyError:
        raise UnknownEdges(f"no latency bucket edges are known for engine {engine!r}; known: "
                           f"{', '.join(known_engines())} (pass a live page instead)") from None


def page_edges(text: str, source: str) -> tuple[str, dict[str, tuple[float, ...]]]:
    """(the engine detected, schema histogram -> finite edges) of a /metrics page: the edges
    the engine really stores, custom bucket flags included, as its adapter maps them."""
    import math

    from exporters.adapters.detect import detect_engine
    from exporters.adapters.normalize import normalize
    from exporters.exposition import parse_page

    page = parse_page(text, source)
    engine = detect_engine(page)
    found: dict[str, tuple[float, ...]] = {}
    for family in normalize(page, engine).families:
        edges = {float(s.labels["le"]) for s in family.samples
                 if s.name.endswith("_bucket") and "le" in s.labels}
        if edges:
            found[family.name] = tuple(sorted(e for e in edges if math.isfinite(e)))
    return (SCHEMA_ENGINE if engine == SCHEMA_ENGINE else engine), found
