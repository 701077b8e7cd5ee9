"""How busy other processes kept the CPU during a measurement.

On a 2-core box a neighbour's benchmark or test run can slow every engine step several-fold,
so each benchmark prints this beside its figures and warns when it is high.
"""

from __future__ import annotations

import os
import time

BUSY_WARNING_CORES = 0.2


def _system_busy_seconds() -> float | None:
    """CPU seconds all processes have used since boot (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
    busy = sum(fields[:3]) + sum(fields[5:8])
    return busy / os.sysconf("SC_CLK_TCK")


class OtherCpuMeter:
    """Cores kept busy by other processes over a window: system-wide CPU time minus this
    process's own."""

    def __init__(self) -> None:
        self._start = (_system_busy_seconds(), time.process_time(), time.perf_counter())

    def cores(self) -> float | None:
        system, own, wall = _system_busy_seconds(), time.process_time(), time.perf_counter()
        if system is None or self._start[0] is None:
            return None
        others = (system - self._start[0]) - (own - self._start[1])
        return max(0.0, others / max(1e-9, wall - self._start[2]))
