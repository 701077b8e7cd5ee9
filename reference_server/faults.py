"""Fault injection: controlled failures that prove alerts end to end.

Off unless the server runs with ``--enable-fault-injection``. Each fault has a kind, a value
and a duration; the engine asks the injector at its seams what is active now.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


class FaultKind(enum.StrEnum):
    LATENCY = "latency"          # value: seconds added to every engine step
    ERROR_RATE = "error_rate"    # value: fraction of requests (0..1] failed with a model error
    SLOWDOWN = "slowdown"        # value: factor > 1 by which every model run is slowed
    KV_SQUEEZE = "kv_squeeze"    # value: fraction [0..1) of KV blocks withheld from allocation
    STALL = "stall"              # value ignored: the engine loop stops for the duration


_VALUE_RANGES: dict[FaultKind, tuple[float, float, str]] = {
    FaultKind.LATENCY: (0.0, 60.0, "seconds per step in [0, 60]"),
    FaultKind.ERROR_RATE: (0.0, 1.0, "a fraction in [0, 1]"),
    FaultKind.SLOWDOWN: (1.0, 1000.0, "a factor in [1, 1000]"),
    FaultKind.KV_SQUEEZE: (0.0, 0.99, "a fraction in [0, 0.99]"),
    FaultKind.STALL: (0.0, float("inf"), "ignored"),
}


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    value: float
    duration_seconds: float
    started_at: float
    expires_at: float

    def to_dict(self, now: float) -> dict[str, object]:
        """For the API: times as seconds left, since started_at/expires_at are monotonic."""
        return {"kind": self.kind.value, "value": self.value,
                "duration_seconds": self.duration_seconds,
                "remaining_seconds": round(max(0.0, self.expires_at - now), 3)}


class FaultInjector:
    """Thread-safe: the API thread adds and clears, the engine thread reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._faults: dict[FaultKind, Fault] = {}

    def add(self, kind: FaultKind | str, value: float, duration_seconds: float) -> Fault:
        kind = FaultKind(kind)
        low, high, what = _VALUE_RANGES[kind]
        if not low <= value <= high:
            raise ValueError(f"fault {kind.value}: value must be {what}, got {value}")
        if not 0 < duration_seconds <= 86400:
            raise ValueError(f"fault {kind.value}: duration_seconds must be in (0, 86400], "
                             f"got {duration_seconds}")
        now = self._clock()
        fault = Fault(kind, value, duration_seconds, now, now + duration_seconds)
        with self._lock:
            self._faults[kind] = fault
        return fault

    def clear(self, kind: FaultKind | str | None = None) -> int:
        with self._lock:
            if kind is None:
                num = len(self._faults)
                self._faults.clear()
                return num
            return 1 if self._faults.pop(FaultKind(kind), None) else 0

    def describe(self, fault: Fault) -> dict[str, object]:
        return fault.to_dict(self._clock())

    def active(self) -> list[Fault]:
        now = self._clock()
        with self._lock:
            expired = [k for k, f in self._faults.items() if f.expires_at <= now]
            for k in expired:
                del self._faults[k]
            return list(self._faults.values())

    def value(self, kind: FaultKind) -> float | None:
        """The value of an active fault of this kind, or None (cheap: no lock when empty)."""
        if not self._faults:
            return None
        fault = self._faults.get(kind)
        if fault is None or fault.expires_at <= self._clock():
            return None
        return fault.value

    def stalled_until(self) -> float | None:
        fault = self._faults.get(FaultKind.STALL) if self._faults else None
        if fault is None or fault.expires_at <= self._clock():
            return None
        return fault.expires_at
