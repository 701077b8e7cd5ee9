"""What the demo shows in the terminal, formatted from the monitor API's JSON.

One status line per refresh (tokens/s, batch utilization, p99 TTFT, each SLO's budget left,
alerts firing), rewritten in place on a terminal and printed as plain lines every few seconds
otherwise (a log, a pipe); a line of its own for every event (an alert firing or resolving,
the fault). Pure functions here; the polling is in ``monitor.stack.poll``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

_CLEAR_LINE: Final = "\r\x1b[2K"
_ALERT_LABELS: Final = ("severity", "slo", "target", "window")


@dataclass(frozen=True, slots=True)
class Budget:
    slo: str
    remaining: float | None    # fraction of the budget left; None: no events yet
    state: str


@dataclass(frozen=True, slots=True)
class Reading:
    """One refresh's numbers, each None when the monitor has none yet."""

    tokens_per_second: float | None = None
    batch_utilization: float | None = None
    ttft_p99_seconds: float | None = None
    budgets: tuple[Budget, ...] = ()
    num_firing: int = 0


@dataclass(frozen=True, slots=True)
class AlertChange:
    status: str                # "firing" or "resolved"
    alert: Mapping[str, Any]   # the API's alert object


def latest_value(series: Mapping[str, Any]) -> float | None:
    """The last non-null value of a ``/targets/{name}/series`` answer."""
    for point in reversed(series.get("points") or ()):
        value = point[1] if len(point) > 1 else None
        if value is not None and math.isfinite(float(value)):
            return float(value)
    return None


def budgets(slos: Sequence[Mapping[str, Any]]) -> tuple[Budget, ...]:
    """Each SLO's budget left, from the ``/slos`` list's items."""
    return tuple(Budget(str(s["name"]), s.get("budget_remaining"), str(s.get("state", "?")))
                 for s in slos)


def clock(elapsed_seconds: float) -> str:
    """'03:25': minutes and seconds since the load started."""
    seconds = max(0, int(elapsed_seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _number(value: float | None, fmt: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, fmt)


def _budget(budget: Budget) -> str:
    if budget.remaining is None:
        return f"{budget.slo} -"
    return f"{budget.slo} {budget.remaining:.0%}"


def format_status(elapsed_seconds: float, offered_rps: float, reading: Reading) -> str:
    """'[03:25] load 4.8 req/s | 212 tok/s | batch 31% | p99 TTFT 48 ms | budget left:
    availability 97%, ttft 100% | no alert firing' (one line)."""
    firing = reading.num_firing
    alerts = ("no alert firing" if firing == 0
              else f"{firing} alert{'s' if firing > 1 else ''} firing")
    parts = [
        f"[{clock(elapsed_seconds)}] load {offered_rps:.1f} req/s",
        f"{_number(reading.tokens_per_second, '.0f')} tok/s",
        f"batch {_number(reading.batch_utilization, '.0f', 100)}%",
        f"p99 TTFT {_number(reading.ttft_p99_seconds, '.0f', 1000)} ms",
        "budget left: " + (", ".join(_budget(b) for b in reading.budgets) or "-"),
        alerts,
    ]
    return " | ".join(parts)


def alert_changes(known: dict[str, str], alerts: Sequence[Mapping[str, Any]]
                  ) -> list[AlertChange]:
    """What changed since the last poll, given ``known`` (fingerprint -> state, updated here):
    alerts that started firing, and firing ones that resolved. An alert that fired and
    resolved between two polls gives both."""
    changes = []
    for alert in alerts:
        key, state = str(alert["fingerprint"]), str(alert["state"])
        before = known.get(key)
        known[key] = state
        if state == before:
            continue
        if state == "firing":
            changes.append(AlertChange("firing", alert))
        elif state == "resolved" and (before == "firing"
                                      or (before is None and alert.get("fired_at"))):
            if before is None:
                changes.append(AlertChange("firing", alert))
            changes.append(AlertChange("resolved", alert))
    return changes


def describe_alert(labels: Mapping[str, str]) -> str:
    """'InferwatchSLOBurnRate{severity=page, slo=demo-availability, window=1h/2m}'."""
    keys = [k for k in _ALERT_LABELS if k in labels]
    inside = ", ".join(f"{k}={labels[k]}" for k in keys)
    return f"{labels.get('alertname', '?')}{{{inside}}}"


def format_alert(elapsed_seconds: float, change: AlertChange) -> str:
    """'[03:52] FIRING   InferwatchSLOBurnRate{...}: <summary>' (RESOLVED without one)."""
    alert = change.alert
    labels = {**alert.get("labels", {}), "alertname": alert.get("alertname", "?")}
    line = f"[{clock(elapsed_seconds)}] {change.status.upper():<8} {describe_alert(labels)}"
    summary = (alert.get("annotations") or {}).get("summary")
    if change.status == "firing" and summary:
        line += f": {summary}"
    return line


class Console:
    """Prints the status line and events to ``stream``; safe from several threads (the alert
    receiver calls in from its own)."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 plain_every_seconds: float = 10.0) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.plain_every_seconds = plain_every_seconds
        # Reentrant: a signal handler may print while the main thread is printing.
        self._lock = threading.RLock()
        self._status = ""          # the status line on screen (TTY)
        self._last_plain = -math.inf

    def status(self, line: str) -> None:
        with self._lock:
            if self.tty:
                self._status = line
                self.stream.write(_CLEAR_LINE + line)
            elif time.monotonic() - self._last_plain >= self.plain_every_seconds:
                self._last_plain = time.monotonic()
                self.stream.write(line + "\n")
            self.stream.flush()

    def event(self, line: str) -> None:
        """A line of its own, above the status line (which is drawn again under it)."""
        with self._lock:
            if self.tty and self._status:
                self.stream.write(_CLEAR_LINE + line + "\n" + self._status)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        """End the status line, so what follows starts on a line of its own."""
        with self._lock:
            if self.tty and self._status:
                self.stream.write("\n")
                self.stream.flush()
            self._status = ""
