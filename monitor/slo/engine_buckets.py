"""An engine's histogram bucket flag that makes every latency SLO threshold an edge (issue 21).

vLLM keeps its own bucket edges (the adapters keep them: ``HistogramDelta.bounds``), and a
threshold between two edges can only be counted at the edge below (``monitor.slo.thresholds``).
vLLM 0.32 takes ``--custom-histogram-buckets`` (``ObservabilityConfig.custom_histogram_buckets``
in vllm/config/observability.py): a JSON object from bucket-family key to a list of strictly
increasing, positive, finite upper bounds; a listed family's list *replaces* its defaults
for every histogram of the family, families not listed keep theirs. So each affected family
is given its default edges (or those read from a recorded /metrics page) merged with the
thresholds.

The family keys, their defaults and which histograms draw from which family are vLLM 0.32's,
read from its source (vllm/v1/metrics/buckets.py, and the ``histogram_buckets(...)`` calls of
vllm/v1/metrics/loggers.py) as installed here by ``make live-engines``; the defaults match
the live page recorded from it (tests/fixtures/engines/vllm-0.32-cpu-live.prom). Another vLLM
version may differ: pass ``--page`` with its /metrics page to merge into the edges it shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from exporters import schema
from exporters.adapters.edges import engine_edges
from exporters.exposition import parse_page
from monitor.slo.edges import is_edge
from monitor.slo.spec import LatencySli, Slo

FLAG: Final = "--custom-histogram-buckets"


@dataclass(frozen=True, slots=True)
class Family:
    """One vLLM bucket family: its default edges and the histograms that use them."""

    key: str
    defaults: tuple[float, ...]
    histograms: tuple[str, ...]


def _family(key: str, schema_histogram: str, histograms: tuple[str, ...]) -> Family:
    # The defaults are the vLLM edges the whole product counts at (exporters/adapters/
    # latency_edges.yaml), so this flag and the rules' edges cannot drift apart.
    edges = engine_edges("vllm").edges(schema_histogram)
    assert edges is not None, schema_histogram  # the data file maps every latency histogram
    return Family(key, edges, histograms)


_REQUEST_LATENCY: Final = _family("request_latency", schema.REQUEST_DURATION, (
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds"))
_TIME_TO_FIRST_TOKEN: Final = _family("time_to_first_token", schema.TIME_TO_FIRST_TOKEN,
                                      ("vllm:time_to_first_token_seconds",))
_INTER_TOKEN_LATENCY: Final = _family("inter_token_latency", schema.INTER_TOKEN_LATENCY, (
    "vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"))

# The family of each latency SLI's histogram as the vLLM adapter maps it
# (exporters/adapters/mappings/vllm.yaml): tpot is vllm:request_time_per_output_token_seconds.
VLLM_FAMILIES: Final[Mapping[str, Family]] = {
    "ttft": _TIME_TO_FIRST_TOKEN,
    "itl": _INTER_TOKEN_LATENCY,
    "tpot": _INTER_TOKEN_LATENCY,
    "e2e": _REQUEST_LATENCY,
}
ENGINES: Final = ("vllm",)


@dataclass(frozen=True, slots=True)
class FamilyBuckets:
    family: Family
    edges: tuple[float, ...]      # the merged list given to the flag
    added: tuple[float, ...]      # thresholds that were not edges
    slos: tuple[str, ...]         # the SLOs whose thresholds fall in this family

    @property
    def series_per_model(self) -> int:
        """Extra time series per model (and engine index): one ``_bucket`` series per added
        edge per histogram of the family."""
        return len(self.added) * len(self.family.histograms)


@dataclass(frozen=True, slots=True)
class BucketPlan:
    families: tuple[FamilyBuckets, ...]   # those with an edge added, in key order

    @property
    def overrides(self) -> dict[str, list[float]]:
        return {f.family.key: list(f.edges) for f in self.families}

    @property
    def series_per_model(self) -> int:
        return sum(f.series_per_model for f in self.families)

    def flag(self) -> str:
        """``--custom-histogram-buckets '{...}'``, quoted for a POSIX shell."""
        return f"{FLAG} '{json.dumps(self.overrides, separators=(',', ':'))}'"


def page_edges(text: str, source: str) -> dict[str, tuple[float, ...]]:
    """Finite ``le`` edges of each histogram family of a /metrics page."""
    found: dict[str, tuple[float, ...]] = {}
    for name, family in parse_page(text, source).families.items():
        edges = {float(s.labels["le"]) for s in family.samples
                 if s.name == f"{name}_bucket" and "le" in s.labels}
        if edges:
            found[name] = tuple(sorted(e for e in edges if math.isfinite(e)))
    return found


def plan_vllm(slos: Iterable[Slo],
              current: Mapping[str, Sequence[float]] | None = None) -> BucketPlan:
    """The families to override so that every latency threshold of ``slos`` is an edge.
    ``current``: histogram name -> edges (from ``page_edges``) to merge into instead of the
    defaults; a family's first histogram found there stands for the family."""
    thresholds: dict[str, set[float]] = {}
    names: dict[str, list[str]] = {}
    for slo in slos:
        if isinstance(slo.sli, LatencySli):
            key = VLLM_FAMILIES[slo.sli.metric].key
            thresholds.setdefault(key, set()).add(slo.sli.threshold_seconds)
            names.setdefault(key, []).append(slo.name)
    by_key = {f.key: f for f in VLLM_FAMILIES.values()}
    planned = []
    for key in sorted(thresholds):
        family = by_key[key]
        edges = _current_edges(family, current or {})
        added = tuple(sorted(t for t in thresholds[key] if not is_edge(edges, t)))
        if added:
            planned.append(FamilyBuckets(family, tuple(sorted({*edges, *added})), added,
                                         tuple(dict.fromkeys(names[key]))))
    return BucketPlan(tuple(planned))


def _current_edges(family: Family, current: Mapping[str, Sequence[float]]) -> tuple[float, ...]:
    for histogram in family.histograms:
        if current.get(histogram):
            return tuple(current[histogram])
    return family.defaults


def describe(plan: BucketPlan) -> list[str]:
    """What the flag adds, a line per family, then the total."""
    if not plan.families:
        return ["every latency threshold is already an edge of vLLM's buckets: no flag needed"]
    lines = []
    for f in plan.families:
        added = ", ".join(f"{t:g}s" for t in f.added)
        lines.append(
            f"{f.family.key}: adds {added} for {', '.join(f.slos)} "
            f"({len(f.added)} edge(s) x {len(f.family.histograms)} histogram(s): "
            f"{', '.join(f.family.histograms)}) = {f.series_per_model} series per model")
    lines.append(f"in all {plan.series_per_model} more series per model (and per engine "
                 "index); families not listed keep vLLM's default edges")
    return lines
