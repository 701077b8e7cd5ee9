"""The targets' capacity headroom on the monitor's /metrics, computed at scrape time from the
latest evaluation round (client_python's custom-collector style):

    inferwatch_target_capacity_headroom_ratio{target,dimension}   1 - load / capacity
    inferwatch_target_capacity_binding_info{target,dimension,bench_dimension}   1

``min by (target) (inferwatch_target_capacity_headroom_ratio)`` is the target's headroom; the
info series names the dimension that gives it now and the one the sweep found binding.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from monitor.headroom.monitor import HeadroomMonitor

HEADROOM_METRIC: Final = "inferwatch_target_capacity_headroom_ratio"
BINDING_METRIC: Final = "inferwatch_target_capacity_binding_info"


class HeadroomCollector(Collector):
    def __init__(self, monitor: HeadroomMonitor) -> None:
        self._monitor = monitor

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ratio = GaugeMetricFamily(
            HEADROOM_METRIC,
            "1 - load / the capacity a sweep measured within the SLO, per load dimension",
            labels=["target", "dimension"])
        binding = GaugeMetricFamily(
            BINDING_METRIC,
            "The dimension with the least headroom now, and the one the sweep found binding",
            labels=["target", "dimension", "bench_dimension"])
        for name, status in sorted(self._monitor.statuses.items()):
            found = status.headroom
            for part in found.dimensions:
                if math.isfinite(part.ratio):
                    ratio.add_metric([name, part.dimension.value], part.ratio)
            if found.binding is not None:
                bench = status.capacity.bench_binding if status.capacity else None
                binding.add_metric([name, found.binding.value, bench.value if bench else ""],
                                   1.0)
        yield from (ratio, binding)
