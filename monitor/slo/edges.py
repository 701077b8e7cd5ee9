"""Where a latency SLO's good events are counted on the engine it reads (issue 30).

A latency SLI counts the requests at or under its threshold from a histogram's ``_bucket``
series, which exist only at the engine's own edges (``exporters.adapters.edges``). A threshold
that is an edge is counted exactly. One that is not (TTFT 200 ms on vLLM, whose edges around
it are 0.1 s and 0.25 s) is, by the SLO's ``off_edge`` policy:

- ``refuse`` (the default): an error that names the engine's nearest edges and the engine
  argument that adds the threshold as an edge;
- ``lower_edge``: good events are counted at the nearest edge below, by the generated rules
  (``le="0.1"``) and by the monitor's evaluator (``HistogramDelta.count_at_most``) alike. That
  is an exact count of a stricter SLI, so the SLO pages no later than the true one would, and
  may page on requests between the two edges; the rules, the API and the UI say so.

Never a rule that reads a bucket the engine does not have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from exporters.adapters.edges import SCHEMA_ENGINE, EngineEdges, engine_edges

_REL_TOLERANCE: Final = 1e-9


class OffEdge(StrEnum):
    REFUSE = "refuse"
    LOWER_EDGE = "lower_edge"


@dataclass(frozen=True, slots=True)
class CountedAt:
    """Where a threshold is counted among ``edges``."""

    threshold: float
    edge: float | None      # the edge counted at (None: no edge at or below, nothing is good)
    lower: float | None     # the nearest edge below the threshold
    upper: float | None     # the nearest edge above it

    @property
    def exact(self) -> bool:
        return self.edge is not None and _same(self.edge, self.threshold)

    def nearest(self) -> str:
        found = [f"{e:g}s" for e in (self.lower, self.upper) if e is not None]
        return " and ".join(found) if found else "none"


def counted_at(edges: Sequence[float], threshold: float) -> CountedAt:
    finite = sorted(e for e in edges if math.isfinite(e))
    for edge in finite:
        if _same(edge, threshold):
            return CountedAt(threshold, edge, edge, edge)
    below = [e for e in finite if e < threshold]
    above = [e for e in finite if e > threshold]
    lower = below[-1] if below else None
    return CountedAt(threshold, lower, lower, above[0] if above else None)


def _same(edge: float, threshold: float) -> bool:
    return abs(edge - threshold) <= _REL_TOLERANCE * threshold


def is_edge(edges: Sequence[float], threshold: float) -> bool:
    """Whether ``threshold`` is one of ``edges`` (up to float noise: 1e-9 relative)."""
    return any(_same(edge, threshold) for edge in edges)


def layout(engine: str | None, edges: Sequence[float] | None, histogram: str) -> \
        tuple[str, tuple[float, ...] | None, EngineEdges]:
    """(the layout's name, the histogram's edges or None, the engine) an SLI is counted on:
    ``edges`` as given (a live page, a custom bucket flag), else the engine's defaults."""
    known = engine_edges(engine or SCHEMA_ENGINE)
    if edges is not None:
        return f"{known.name} (edges as given)", tuple(sorted(edges)), known
    return known.name, known.edges(histogram), known


def off_edge_message(histogram: str, where: CountedAt, name: str, known: EngineEdges) -> str:
    """Why a threshold cannot be counted exactly, and the ways out."""
    threshold = where.threshold
    add = known.how_to_add_edge(histogram, threshold)
    ways = [f"use one of {name}'s edges ({where.nearest()})"]
    if add:
        ways.append(add)
    elif known.engine == SCHEMA_ENGINE:
        ways.append("the schema's buckets are fixed (exporters/buckets.py); name the engine the "
                    "SLO reads (`engine:`, or rules generate --engine) to count at its edges")
    else:
        ways.append(f"{known.engine}'s edges are compiled in: no argument adds one")
    ways.append("or set `off_edge: lower_edge` to count good events at "
                + (f"{where.lower:g}s" if where.lower is not None else "no edge (none is good)")
                + ", a stricter SLI, in the rules and the monitor alike")
    return (f"threshold {threshold:g}s is not a bucket edge of {histogram} on {name} "
            f"(nearest edges: {where.nearest()}), so its good requests cannot be counted: "
            + "; ".join(ways))


def lower_edge_note(histogram: str, where: CountedAt, name: str) -> str:
    """What ``off_edge: lower_edge`` counts, for the rules' annotations, the API and the UI."""
    at = f"{where.edge:g}s" if where.edge is not None else "no edge (none is good)"
    return (f"{name} has no {where.threshold:g}s edge on {histogram}: good requests are "
            f"counted at {at}, the nearest edge below (a stricter SLI: it may page on requests "
            f"between {at} and {where.threshold:g}s)")

