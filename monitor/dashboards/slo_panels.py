"""What the SLO specs put on the dashboards: burn-rate panels with their alert factors, and
the latency SLOs' bounds as threshold lines on the latency panels.

Burn rates come from the recorded error ratios of the rule file (``error_ratio_record``), one
series per window, divided by the SLO's own error budget. SLOs whose alert windows have the
same factor share a panel, so that its threshold line is every series' threshold: the
factors depend on the SLO's period (14.4, 6, 3, 1 for 30 days; 13.44, ... for 28).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Final

from monitor.dashboards.grafana import Panel, Row, Target
from monitor.dashboards.promql import Query, slo_label
from monitor.slo.durations import format_duration
from monitor.slo.rules import error_ratio_record, latency_le, promql_number
from monitor.slo.spec import LatencySli, Slo
from monitor.slo.windows import BurnWindow, burn_windows

BURN_UNIT: Final = "suffix:x"  # 14.4x
_FACTOR_DIGITS: Final = 4  # 0.9333... reads 0.9333x


def factor_text(factor: float) -> str:
    return f"{factor:.{_FACTOR_DIGITS}g}"


def latency_bounds(slos: Sequence[Slo], histogram: str) -> list[float]:
    """The threshold (a bucket bound) of every latency SLO on ``histogram``, ascending."""
    return sorted({float(le) for s in slos
                   if isinstance(s.sli, LatencySli) and s.sli.histogram == histogram
                   and (le := latency_le(s.sli)) is not None})


def _burn_expr(slos: Sequence[Slo], seconds: float) -> str:
    record = error_ratio_record(seconds)
    return " or ".join(f"{record}{{{slo_label(s)}}} / {promql_number(s.error_budget)}"
                       for s in slos)


def _burn_panel(window: BurnWindow, slos: Sequence[Slo]) -> Panel:
    names = ", ".join(s.name for s in slos)
    targets = tuple(
        Target(Query(_burn_expr(slos, seconds), f"{{{{slo}}}} {format_duration(seconds)}"))
        for seconds in (window.long_seconds, window.short_seconds))
    return Panel(
        title=f"Burn rate {window.name}: {window.severity.value} above "
              f"{factor_text(window.factor)}x",
        type="timeseries",
        targets=targets,
        description=(f"Error ratio over {window.name} divided by the error budget, for "
                     f"{names}. The alert fires when both windows burn faster than "
                     f"{factor_text(window.factor)}x ({window.budget_consumed:.0%} of the "
                     f"budget within {format_duration(window.long_seconds)})."),
        unit=BURN_UNIT,
        width=12,
        steps=(("green", None), ("red", window.factor)),
        threshold_lines=True,
        min=0,
    )


def burn_rate_rows(slos: Sequence[Slo], title: str) -> list[Row]:
    """One row per SLO period, one panel per (window, factor), SLOs by name in each."""
    by_period: dict[float, dict[tuple[float, float, str, float], list[Slo]]] = defaultdict(
        lambda: defaultdict(list))
    windows: dict[tuple[float, float, str, float], BurnWindow] = {}
    for slo in sorted(slos, key=lambda s: s.name):
        for window in burn_windows(slo):
            key = (window.long_seconds, window.short_seconds, window.severity.value,
                   window.factor)
            by_period[slo.window.nominal_seconds][key].append(slo)
            windows[key] = window
    rows = []
    for period in sorted(by_period, reverse=True):  # 30d first
        groups = by_period[period]
        panels = tuple(_burn_panel(windows[key], groups[key]) for key in sorted(groups))
        rows.append(Row(title.format(period=format_duration(period)), panels))
    return rows
