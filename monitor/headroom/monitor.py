"""The headroom evaluation of the monitor: every round, each target with a ``capacity:``
block gets its load over the last ``window_seconds`` against that capacity, and a ticket
(``InferwatchCapacityHeadroomLow``) while its headroom stays under ``warn_below_ratio`` for
``for_seconds``: a warning while the SLO still holds, before its burn rate pages.

The statuses of the latest round are kept for /metrics and the targets API.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from monitor.collect.config import MonitorConfig, TargetConfig
from monitor.headroom.capacity import Capacity, CapacityError, Headroom, headroom, resolve
from monitor.headroom.config import HEADROOM_ALERT, HeadroomConfig
from monitor.headroom.load import current_load
from monitor.loadgen.dimensions import MEANINGS, UNITS, Dimension
from monitor.slo.evaluator import AlertCondition
from monitor.store import Store

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TargetHeadroom:
    target: str
    evaluated_at: float
    state: str                         # ok | low | no_data | no_capacity
    headroom: Headroom
    capacity: Capacity | None
    warn_below_ratio: float
    error: str | None = None


class HeadroomMonitor:
    def __init__(self, store: Store, config: Callable[[], MonitorConfig]) -> None:
        self.store = store
        self.config = config
        self.statuses: dict[str, TargetHeadroom] = {}

    def tick(self, now: float) -> list[AlertCondition]:
        """Evaluate every target with a capacity; the alert conditions of each."""
        config = self.config()
        settings = config.headroom
        statuses = {t.name: self.evaluate(t, settings, now) for t in config.targets
                    if t.capacity is not None}
        self.statuses = statuses
        return [condition(s, settings) for s in statuses.values()]

    def evaluate(self, target: TargetConfig, settings: HeadroomConfig,
                 now: float) -> TargetHeadroom:
        assert target.capacity is not None
        empty = Headroom(math.nan, None, ())
        try:
            capacity = resolve(self.store.engine, target.capacity)
        except CapacityError as exc:
            return TargetHeadroom(target.name, now, "no_capacity", empty, None,
                                  settings.warn_below_ratio, str(exc))
        load = current_load(self.store, target.name, now - settings.window_seconds, now)
        found = headroom(load, capacity.values)
        state = ("no_data" if math.isnan(found.ratio) else
                 "low" if found.ratio < settings.warn_below_ratio else "ok")
        return TargetHeadroom(target.name, now, state, found, capacity,
                              settings.warn_below_ratio)


def condition(status: TargetHeadroom, settings: HeadroomConfig) -> AlertCondition:
    labels = {"alertname": HEADROOM_ALERT, "target": status.target, "severity": "ticket"}
    active = status.state == "low"
    return AlertCondition(labels, annotate(status) if active else {}, active,
                          settings.for_seconds, status.headroom.ratio)


def annotate(status: TargetHeadroom) -> dict[str, str]:
    found, capacity = status.headroom, status.capacity
    binding = found.binding
    assert binding is not None and capacity is not None
    part = next(p for p in found.dimensions if p.dimension is binding)
    bench = capacity.bench_binding
    return {
        "summary": (f"{status.target}: {found.ratio:.0%} capacity headroom left "
                    f"({MEANINGS[binding]}: {_amount(part.load, binding)} of "
                    f"{_amount(part.capacity, binding)})"),
        "description": (f"Load is near what {capacity.source} sustained within the SLO; past "
                        "it the latency SLO burns. Add replicas or shed load before it pages."),
        "headroom": f"{found.ratio:.3f}",
        "binding_dimension": binding.value,
        "bench_binding_dimension": bench.value if bench else "",
        "capacity_source": capacity.source,
        "evidence": "; ".join(f"{p.dimension.value} {_amount(p.load, p.dimension)} of "
                              f"{_amount(p.capacity, p.dimension)} ({p.ratio:.0%} left)"
                              for p in found.dimensions),
    }


def _amount(value: float, dimension: Dimension) -> str:
    return f"{value:.4g} {UNITS[dimension]}"
