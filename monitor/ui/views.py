"""What each page shows, read from the service's objects through the API's own conversions
(monitor/api/convert.py), so a page's numbers are the JSON API's."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Final

from monitor.api.convert import alert_out, finite, slo_outs, target_out
from monitor.api.schemas import AlertOut, SloOut, TargetOut
from monitor.api.state import ServiceState
from monitor.slo.evaluator import SloStatus, slo_period_start
from monitor.slo.report import build_report
from monitor.slo.report_model import StepSeries
from monitor.slo.report_span import ChartSpan, chart_span
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.slo.steps import SliSource
from monitor.ui import fmt
from monitor.ui.figures import (
    FIGURE_RANGE_SECONDS,
    FIGURE_STEP_SECONDS,
    TargetFigures,
    latest_figures,
)
from monitor.ui.history import SloHistory, slo_history

# A line needs two points: two closed minutes of events.
CHART_MIN_SECONDS: Final = 120.0


@dataclass
class TargetRow:
    target: TargetOut
    figures: dict[str, float | None]
    # Percentile figures the buckets only bound ("< 300.0 ms": all in the first bucket;
    # issue 21), shown instead of the number; the number stays in ``figures``.
    bounded: dict[str, str] = field(default_factory=dict)
    batch_source: str | None = None  # what the batch figure is computed against


@dataclass
class Overview:
    targets: list[TargetRow]
    firing: list[AlertOut]
    figures_start: float
    figures_end: float


@dataclass
class ConditionRow:
    """One alert condition of an SLO: its windows, factor and current burn rates."""

    alertname: str
    severity: str
    window: str
    factor: str
    burn_rate_long: str
    burn_rate_short: str
    active: bool
    group: str = ""  # a split SLO's group: "tenant=busy"


@dataclass
class SloDetail:
    slo: SloOut
    conditions: list[ConditionRow] = field(default_factory=list)
    alerts: list[AlertOut] = field(default_factory=list)
    history: SloHistory | None = None  # the alert history over the SLO's period


def _statuses(state: ServiceState) -> dict[str, SloStatus]:
    return {s.name: s for s in (state.alerting.statuses if state.alerting else [])}


def alerts(state: ServiceState) -> list[AlertOut]:
    book = state.alerting.book.alerts() if state.alerting is not None else []
    return [alert_out(a) for a in book]


def slos(state: ServiceState) -> list[SloOut]:
    statuses = _statuses(state)
    book = state.alerting.book.alerts() if state.alerting is not None else []
    return slo_outs(state.slos, statuses, book)


def overview(state: ServiceState, now: float | None = None) -> Overview:
    end = math.floor((time.time() if now is None else now) / FIGURE_STEP_SECONDS) \
        * FIGURE_STEP_SECONDS
    start = end - FIGURE_RANGE_SECONDS
    figures = latest_figures(state.store, end)
    rows = []
    for t in state.config().targets:
        found = figures.get(t.name, TargetFigures())
        rows.append(TargetRow(target_out(t, state.scrapes.status(t.name), state.headroom(t.name)),
                              {k: finite(v) if v is not None else None
                               for k, v in found.values.items()}, found.bounded,
                              found.batch_source.value if found.batch_source else None))
    firing = [a for a in alerts(state) if a.state == "firing"]
    return Overview(rows, firing, start, end)


def slo_detail(state: ServiceState, name: str) -> SloDetail | None:
    out = next((o for o in slos(state) if o.name == name), None)
    if out is None:
        return None
    status = _statuses(state).get(name)
    conditions = [] if status is None else [
        ConditionRow(c.labels.get("alertname", ""), c.labels.get("severity", ""),
                     c.labels.get("window", ""), c.annotations["factor"],
                     c.annotations.get("burn_rate", ""),
                     c.annotations.get("burn_rate_short", ""), c.active,
                     ", ".join(f"{k}={v}" for k, v in g.group))
        for g in (status.groups or (status,)) for c in g.conditions
        if "factor" in c.annotations]
    mine = [a for a in alerts(state) if a.labels.get("slo") == name]
    slo = state.slo(name)
    history = None if slo is None else slo_history(state, name, slo.window.nominal_seconds,
                                                   time.time())
    return SloDetail(out, conditions, mine, history)


def slo_chart_span(slo: Slo, source: SliSource, status: SloStatus | None, now: float,
                   settled: float) -> ChartSpan | None:
    """Where the charts start. The evaluator's status says where the history does: one that
    covers the period draws the whole period (no search); a younger one is searched for its
    first event from its first answered minute on (two small reads); without a status, from
    the period's start."""
    period_start = slo_period_start(slo, now)
    if status is None or not math.isfinite(status.observed_seconds):
        return chart_span(slo, source, period_start, settled)
    if not status.partial_period:
        return ChartSpan(period_start, settled, period_start)
    seen_from = max(period_start, status.evaluated_at - status.observed_seconds)
    return chart_span(slo, source, seen_from, settled, period_start)


@dataclass(frozen=True)
class PeriodSeries:
    """What the SLO's charts draw: the report's steps over ``span``, from the first event in
    the period (a young SLO's history, not the whole period: issue 30) to now."""

    series: StepSeries
    span: ChartSpan
    step_seconds: float


def period_series(state: ServiceState, name: str, now: float) -> PeriodSeries | str:
    """The SLO's report from its first event in the period (``monitor.slo.report_span``) up
    to ``now``, at the report's default step for that span (whole minutes, up to ~300
    points): the per-step SLI and budget burn-down; or why there is none."""
    slo = state.slo(name)
    if slo is None:
        return f"no SLO {name!r}"
    source, settled = StoreSliSource(state.store), now - state.config().settle_seconds
    try:
        span = slo_chart_span(slo, source, _statuses(state).get(name), now, settled)
        if span is None:
            return "no events stored in the period yet"
        if math.floor(settled / 60) * 60 - span.start < CHART_MIN_SECONDS:
            return (f"first events at {fmt.when(span.start)}: the charts draw from "
                    f"{fmt.duration(CHART_MIN_SECONDS)} of them")
        report = build_report(slo, source, span.start, now, None, now=settled)
    except ValueError as exc:
        return str(exc)
    return PeriodSeries(report.series, replace(span, start=report.start, end=report.end),
                        report.step_seconds)
