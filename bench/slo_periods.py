"""Burn-rate windows per SLO period: each row's factor, the workbook's detection and reset
times for 100% errors, and the same times measured in the monitor's own evaluator.

    python -m bench.slo_periods [--objective 0.999] [--periods 1d,7d,14d,28d,30d,90d]

The evaluator runs on synthetic per-minute data (100 requests a minute, clean, then every
request failing for as long as the longest window, then clean again), ticked every 10 s with
no settle delay, so the figures are the evaluator's own timing, not the collector's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monitor.slo.durations import format_duration, parse_duration
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from monitor.slo.windows import burn_windows

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z, a minute boundary
TICK_SECONDS = 10


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds from the errors' start to the alert firing, and from their end to it
    clearing, measured in the evaluator for one window (None: it never did)."""

    fired: float | None
    cleared: float | None


def availability_slo(period: str, objective: float) -> Slo:
    return Slo.model_validate({"name": f"avail-{period}", "objective": objective,
                               "window": period, "sli": {"kind": "availability"}})


def measure(spec: Slo) -> dict[str, Timing]:
    """Each burn window's detection and reset of a 100% error burst, by window name."""
    windows = burn_windows(spec)
    longest = round(max(w.long_seconds for w in windows) / 60)
    injected, stopped = longest + 60, 2 * longest + 60
    minutes = stopped + round(max(w.short_seconds for w in windows) / 60) + 30
    total = np.full(minutes, 100.0)
    good = total.copy()
    good[injected:stopped] = 0.0
    source = MinuteArraySource(T0, {spec.name: (good, total, np.ones(minutes, dtype=bool))})
    evaluator = SloEvaluator([spec], source, settle_seconds=0)
    fired: dict[str, float] = {}
    cleared: dict[str, float] = {}
    # Ticks around the two edges only (the evaluator catches up on the minutes between).
    detect = max(w.detection_seconds(1.0, spec.error_budget) for w in windows)
    ticks = [*range((injected - 5) * 60, injected * 60 + round(detect) + 180, TICK_SECONDS),
             *range(stopped * 60 - 60, minutes * 60, TICK_SECONDS)]
    for second in ticks:
        for c in evaluator.tick(T0 + second)[0].conditions:
            name = c.labels["window"]
            if c.active:
                fired.setdefault(name, second - injected * 60)
            elif name in fired and second > stopped * 60:
                cleared.setdefault(name, second - stopped * 60)
    return {w.name: Timing(fired.get(w.name), cleared.get(w.name)) for w in windows}


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(round(seconds))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objective", type=float, default=0.999)
    p.add_argument("--periods", default="1d,7d,14d,28d,30d,90d")
    args = p.parse_args(argv)
    print(f"objective {args.objective:.4%}; 100% errors; workbook = budget share x period x "
          "error budget; reset = short window x (1 - factor x error budget)")
    print(f"{'period':<7}{'severity':<9}{'window':<16}{'factor':>7}{'budget':>8}"
          f"{'workbook':>10}{'measured':>10}{'reset':>10}{'measured':>10}")
    for period in args.periods.split(","):
        spec = availability_slo(period, args.objective)
        timings = measure(spec)
        for w in burn_windows(spec):
            t = timings[w.name]
            print(f"{format_duration(parse_duration(period)):<7}{w.severity.value:<9}"
                  f"{w.name:<16}{w.factor:>7.3g}{w.budget_consumed:>8.2%}"
                  f"{_time(w.detection_seconds(1.0, spec.error_budget)):>10}"
                  f"{_time(t.fired):>10}{_time(w.reset_seconds(1.0, spec.error_budget)):>10}"
                  f"{_time(t.cleared):>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
