"""The SLO report's three plots as SVG text: SLI per step, budget burn-down, burn rates.

Drawn on ``matplotlib.figure.Figure`` objects, never pyplot: no global figure state and no
backend switch, so a web server can draw reports in several threads. Text is drawn as paths
(matplotlib's default), so the SVG holds no user text to escape and needs no fonts.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

import numpy as np
import numpy.typing as npt
from matplotlib import dates as mdates
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from monitor.slo.report_model import SloReport

Floats = npt.NDArray[np.float64]
SLI_FLOOR_BUDGETS: Final = 10
_SIZE_INCHES: Final = (10.0, 3.2)
_NO_DATA_COLOR: Final = "#9e9e9e"
_SEVERITY_COLORS: Final = {"page": "#d62728", "ticket": "#ff7f0e"}
_WINDOW_COLORS: Final = ("#1f77b4", "#9467bd", "#2ca02c", "#8c564b", "#e377c2", "#17becf")
# SVG metadata (creation date, creator) would make every page differ and say nothing.
_NO_METADATA: Final[dict[str, str | None]] = {
    "Creator": None, "Date": None, "Format": None, "Type": None}


def render_plots(report: SloReport) -> dict[str, str]:
    """SVG text of each plot, by its ``data-plot`` name: sli, budget, burn."""
    draw: dict[str, Callable[[Axes, SloReport], None]] = {
        "sli": _draw_sli, "budget": _draw_budget, "burn": _draw_burn}
    return {name: _svg(report, drawer) for name, drawer in draw.items()}


def _svg(report: SloReport, draw: Callable[[Axes, SloReport], None]) -> str:
    figure = Figure(figsize=_SIZE_INCHES)
    # Fixed margins, not a layout engine: the three time axes line up on the page.
    figure.subplots_adjust(left=0.09, right=0.985, top=0.96, bottom=0.2)
    axes = figure.add_subplot()
    _time_axis(axes, report)
    draw(axes, report)
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata=_NO_METADATA)
    return out.getvalue()


def _days(times: Sequence[float]) -> Floats:
    """Matplotlib's date numbers of Unix times (days since its epoch), for a date axis."""
    moments = [datetime.fromtimestamp(t, UTC) for t in times]
    return np.asarray(mdates.date2num(moments), dtype=np.float64)  # type: ignore[no-untyped-call]


def _time_axis(axes: Axes, report: SloReport) -> None:
    start, end = _days([report.start, report.end])
    axes.set_xlim(float(start), float(end))
    locator = mdates.AutoDateLocator(tz=UTC)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    axes.set_xlabel("time (UTC)")
    axes.grid(True, alpha=0.3)
    _spans(axes, [(i.start, i.end) for i in report.no_data_intervals], _NO_DATA_COLOR, 0.3,
           "no data")


def _spans(axes: Axes, intervals: Sequence[tuple[float, float]], color: str, alpha: float,
           label: str) -> None:
    """Full-height bands over [start, end) intervals, as ``axvspan`` draws each one, all in
    one collection: a month can hold hundreds of intervals, and an artist each is slow."""
    if not intervals:
        return
    days = _days([t for interval in intervals for t in interval]).reshape(-1, 2)
    bands = [[(left, 0.0), (left, 1.0), (right, 1.0), (right, 0.0)]
             for left, right in days.tolist()]
    axes.add_collection(PolyCollection(
        bands, closed=True, facecolors=color, edgecolors=color, alpha=alpha,
        linewidths=rcParams["patch.linewidth"], transform=axes.get_xaxis_transform(),
        label=label), autolim=False)


def _no_data(axes: Axes, text: str = "no data") -> None:
    axes.text(0.5, 0.5, text, transform=axes.transAxes, ha="center", va="center",
              fontsize=16, color=_NO_DATA_COLOR)
    axes.set_yticks([])


def _values(values: Sequence[float | None]) -> Floats:
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _with_start(report: SloReport, values: Sequence[float | None]) -> tuple[Floats, Floats]:
    """Points for a step line: step k holds (end[k-1], end[k]], the first from the start."""
    ys = _values(values)
    return _days([report.start, *report.series.end]), np.concatenate((ys[:1], ys))


def _draw_sli(axes: Axes, report: SloReport) -> None:
    objective = report.slo.objective
    axes.set_ylabel("SLI (good / all)")
    axes.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    if not report.totals.events:
        _no_data(axes)
        return
    xs, ys = _with_start(report, report.series.sli)
    axes.step(xs, ys, where="pre", color="#1f77b4", label="SLI per step")
    axes.axhline(objective, color="#d62728", linestyle="--",
                 label=f"objective {objective * 100:g}%")
    lowest = float(np.nanmin(ys)) if not np.all(np.isnan(ys)) else objective
    budget = 1.0 - objective
    # Detail near the objective matters more than an outage's depth (the burn plot has it):
    # the axis stops SLI_FLOOR_BUDGETS error budgets below the objective.
    floor = max(min(lowest, objective) - budget / 2, objective - SLI_FLOOR_BUDGETS * budget)
    axes.set_ylim(max(floor, 0.0), 1.0 + budget / 4)
    axes.legend(loc="lower left", fontsize="small")


def _draw_budget(axes: Axes, report: SloReport) -> None:
    axes.set_ylabel("error budget remaining")
    axes.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    if not report.totals.events:
        _no_data(axes)
        return
    xs, ys = _days(report.series.end), _values(report.series.budget_remaining)
    axes.plot(xs, ys, color="#2ca02c", label="budget remaining")
    with np.errstate(invalid="ignore"):  # NaN before the first event: neither side
        above, below = ys >= 0, ys < 0
    axes.fill_between(xs, ys, 0.0, where=above, color="#2ca02c", alpha=0.15, interpolate=True)
    axes.fill_between(xs, ys, 0.0, where=below, color="#d62728", alpha=0.25,
                      interpolate=True, label="overspent")
    axes.axhline(0.0, color="black", linewidth=0.8)
    lowest = float(np.nanmin(ys)) if not np.all(np.isnan(ys)) else 0.0
    axes.set_ylim(min(lowest, 0.0) - 0.05, 1.05)
    axes.legend(loc="lower left", fontsize="small")


def _draw_burn(axes: Axes, report: SloReport) -> None:
    axes.set_ylabel("burn rate (x budget pace)")
    if not report.burn_rates:
        _no_data(axes, "no alert windows")
        return
    values = [_values(w.long) for w in report.burn_rates]
    if all(np.all(np.isnan(series)) for series in values):
        _no_data(axes)
        return
    # Burn rates span 0 to 1/error budget (1000 for 99.9%): linear to 1, logarithmic above.
    axes.set_yscale("symlog", linthresh=1.0)
    xs = _days(report.series.end)
    for k, (window, ys) in enumerate(zip(report.burn_rates, values)):
        color = _WINDOW_COLORS[k % len(_WINDOW_COLORS)]
        axes.plot(xs, ys, color=color,
                  label=f"{window.window} {window.severity}, factor {window.factor:.3g}")
        axes.axhline(window.factor, color=color, linestyle="--", linewidth=1.0)
    by_severity: dict[str, list[tuple[float, float]]] = {}
    for interval in report.burn_intervals:  # legend entries in order of first appearance
        by_severity.setdefault(interval.severity, []).append((interval.start, interval.end))
    for severity, intervals in by_severity.items():
        _spans(axes, intervals, _SEVERITY_COLORS.get(severity, "#d62728"), 0.12,
               f"{severity} condition held")
    axes.set_ylim(bottom=0.0)
    axes.legend(loc="upper left", fontsize="x-small", ncols=2, framealpha=0.85)
