"""`inferwatch rules windows`: the burn-rate windows a period gets, as a table a person reads.

Each row gives its factor, the share of the period's budget spent before it fires, the
detection time of a burst of 100% errors (the workbook's: factor x error budget x long
window) and the reset time (how long the alert keeps firing after the errors stop: the short
window less the part that may still hold errors).
"""

from __future__ import annotations

from pathlib import Path

from monitor.slo.durations import format_duration
from monitor.slo.windows import DEFAULT_WINDOWS, PlannedWindow, window_plan


def format_window_table(period_seconds: float, objective: float, *,
                        path: str | Path | None = None,
                        slice_seconds: float | None = None) -> str:
    plan = window_plan(period_seconds, path, unit_seconds=slice_seconds or 60.0)
    budget = 1.0 - objective
    lines = [f"Burn-rate windows for a {format_duration(period_seconds)} SLO "
             f"({path or DEFAULT_WINDOWS}); detection and reset for 100% errors at a "
             f"{objective:.4%} objective",
             f"{'severity':<9}{'window':<16}{'factor':>8}{'budget':>9}{'detection':>12}"
             f"{'reset':>14}"]
    lines += [_row(p, budget) for p in plan]
    for severity in ("page", "ticket"):
        rows = [p for p in plan if p.window.severity == severity]
        if rows and all(p.dropped for p in rows):
            lines.append(f"A {format_duration(period_seconds)} SLO cannot {severity}: every "
                         f"{severity} row is dropped (too short a period to alert on).")
    return "\n".join(lines)


def _row(planned: PlannedWindow, budget: float) -> str:
    w = planned.window
    head = f"{w.severity.value:<9}{w.name:<16}{w.factor:>8.3g}{w.budget_consumed:>9.2%}"
    if planned.dropped:
        return f"{head}  dropped: {planned.dropped}"
    return (f"{head}{_time(w.detection_seconds(1.0, budget)):>12}"
            f"{_time(w.reset_seconds(1.0, budget)):>14}")


def _time(seconds: float) -> str:
    if seconds == float("inf"):
        return "never"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return format_duration(round(seconds))
