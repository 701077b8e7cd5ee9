"""A target's capacity per dimension, from its ``capacity:`` block, and its headroom.

``headroom = 1 - load / capacity`` in every dimension the capacity gives; the target's
headroom is the least of them, and the dimension that gives it is the one binding now.
Prefill-heavy load (long prompts at a modest request rate) so reaches the prompt-token
capacity while the request rate looks comfortable. Below 0 the target is past what it
sustained within the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from monitor.headroom.config import CapacityConfig
from monitor.loadgen.dimensions import Dimension, profile
from monitor.store.runs import find_sweep


@dataclass(frozen=True, slots=True)
class Capacity:
    values: dict[Dimension, float]
    bench_binding: Dimension | None     # what the sweep found binding (None: numbers given)
    source: str                         # "sweep <id> (<name>)" or "configured"
    sweep_id: str | None = None


@dataclass(frozen=True, slots=True)
class DimensionHeadroom:
    dimension: Dimension
    load: float
    capacity: float

    @property
    def ratio(self) -> float:
        return 1.0 - self.load / self.capacity


@dataclass(frozen=True, slots=True)
class Headroom:
    ratio: float                          # the least over the dimensions; NaN without load
    binding: Dimension | None             # the dimension with the least headroom now
    dimensions: tuple[DimensionHeadroom, ...]


class CapacityError(LookupError):
    """A ``capacity:`` block that names no usable sweep."""


def resolve(engine: Engine, config: CapacityConfig) -> Capacity:
    """The capacity the block gives; CapacityError when its sweep is missing or found none."""
    if config.sweep is None:
        return Capacity(config.numbers(), None, "configured")
    row = find_sweep(engine, config.sweep)
    if row is None or row.result is None:
        raise CapacityError(f"no finished sweep {config.sweep!r} in the store")
    values, binding = _from_result(row.result)
    if not values:
        raise CapacityError(f"sweep {row.id} ({row.name}) found no rate that met its SLO")
    return Capacity(values, binding, f"sweep {row.id} ({row.name})", row.id)


def _from_result(result: Mapping[str, Any]) -> tuple[dict[Dimension, float],
                                                     Dimension | None]:
    """Capacities and binding dimension recorded with the sweep, else computed from it."""
    recorded = result.get("dimensions")
    if not isinstance(recorded, Mapping):
        found = profile(result)
        if found is None:
            return {}, None
        recorded = found.to_json()
    values = {Dimension(k): float(v) for k, v in recorded.get("capacity", {}).items()
              if k in {d.value for d in Dimension} and v}
    binding = recorded.get("binding")
    return values, Dimension(binding) if binding else None


def headroom(load: Mapping[Dimension, float], capacity: Mapping[Dimension, float]) -> Headroom:
    """Per dimension and least headroom of ``load`` against ``capacity`` (dimensions without
    a load reading are left out; none left: NaN)."""
    parts = tuple(DimensionHeadroom(d, load[d], c) for d, c in capacity.items()
                  if c > 0 and not math.isnan(load.get(d, math.nan)))
    if not parts:
        return Headroom(math.nan, None, ())
    least = min(parts, key=lambda p: p.ratio)
    return Headroom(least.ratio, least.dimension, parts)
