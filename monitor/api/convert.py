"""The evaluator's, the alert book's and the store's objects as API bodies."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from monitor.alerting.book import Alert
from monitor.api.health import TargetStatus
from monitor.api.schemas import (
    AlertEventOut,
    AlertOut,
    BurnRateOut,
    HeadroomDimensionOut,
    HeadroomOut,
    RunOut,
    SloAlertOut,
    SloGroupOut,
    SloOut,
    TargetOut,
)
from monitor.collect.config import TargetConfig
from monitor.headroom.monitor import TargetHeadroom
from monitor.loadgen.dimensions import UNITS
from monitor.slo.evaluator import SloStatus
from monitor.slo.spec import Slo
from monitor.store.alert_events import AlertEventRow
from monitor.store.runs import RunRow


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def slo_outs(slos: Sequence[Slo], statuses: Mapping[str, SloStatus],
             alerts: Sequence[Alert]) -> list[SloOut]:
    """``slo_out`` of each SLO, each given only its own alerts: the whole book per SLO was
    1,000 SLOs x 2,000 alerts of label look-ups (0.2 s of the list's CPU)."""
    by_slo: dict[str, list[Alert]] = {}
    for alert in alerts:
        by_slo.setdefault(alert.labels.get("slo", ""), []).append(alert)
    return [slo_out(slo, statuses.get(slo.name), by_slo.get(slo.name, [])) for slo in slos]


def slo_out(slo: Slo, status: SloStatus | None, alerts: list[Alert]) -> SloOut:
    mine = [SloAlertOut(alertname=a.name, severity=a.labels.get("severity", ""),
                        window=a.labels.get("window", ""), state=a.state.value,
                        group={k: a.labels[k] for k in slo.grouping if k in a.labels})
            for a in alerts if a.labels.get("slo") == slo.name]
    common: dict[str, Any] = {"name": slo.name, "service": slo.service,
                              "description": slo.description or "",
                              "objective": slo.objective, "period": str(slo.window),
                              "alerts": mine}
    outlook = None if status is None else status.forecast
    common.update(
        budget_state="unknown" if outlook is None else outlook.state.value,
        budget_at_period_end=None if outlook is None else finite(outlook.budget_at_period_end),
        period_end=None if outlook is None else outlook.period_end,
        sustained_burn_rate=None if outlook is None else finite(outlook.sustained_burn_rate))
    if status is None:  # not evaluated yet
        return SloOut(**common, state="pending", sli=None, events=0.0, budget_remaining=None,
                      time_to_exhaustion_seconds=None, burn_rates=[], evaluated_at=None,
                      error=None)
    return SloOut(
        **common, state=status.state.value, sli=finite(status.sli), events=status.events,
        budget_remaining=finite(status.budget_remaining), **budget_basis(status),
        time_to_exhaustion_seconds=finite(status.time_to_exhaustion_seconds),
        burn_rates=_burn_rates_out(status),
        evaluated_at=status.evaluated_at, error=status.error, warnings=list(status.warnings),
        groups=[slo_group_out(g) for g in status.groups if g.events > 0 or g.error])


def budget_basis(status: SloStatus) -> dict[str, Any]:
    """``observed_seconds`` and ``budget_basis`` of a status (SloOut's and SloGroupOut's)."""
    basis = ("none" if not (status.events > 0 and math.isfinite(status.budget_remaining))
             else "partial" if status.partial_period else "period")
    return {"observed_seconds": finite(status.observed_seconds), "budget_basis": basis}


def _burn_rates_out(status: SloStatus) -> list[BurnRateOut]:
    return [BurnRateOut(window=b.window, seconds=b.seconds, events=b.events,
                        error_ratio=finite(b.error_ratio), burn_rate=finite(b.burn_rate))
            for b in status.burn_rates]


def slo_group_out(status: SloStatus) -> SloGroupOut:
    return SloGroupOut(
        labels=dict(status.group), state=status.state.value, sli=finite(status.sli),
        events=status.events, budget_remaining=finite(status.budget_remaining),
        time_to_exhaustion_seconds=finite(status.time_to_exhaustion_seconds),
        burn_rates=_burn_rates_out(status), error=status.error, **budget_basis(status))


def alert_out(alert: Alert) -> AlertOut:
    return AlertOut(fingerprint=alert.fingerprint, alertname=alert.name, labels=alert.labels,
                    annotations=alert.annotations, state=alert.state.value,
                    active_at=alert.active_at, fired_at=alert.fired_at,
                    resolved_at=alert.resolved_at, value=finite(alert.value))


def alert_event_out(event: AlertEventRow) -> AlertEventOut:
    assert event.id is not None, "only stored events have an id"
    return AlertEventOut(id=event.id, at=event.at, fingerprint=event.fingerprint,
                         alertname=event.alertname, labels=event.labels,
                         annotations=event.annotations, state=event.state,  # type: ignore[arg-type]
                         previous_state=event.previous_state,  # type: ignore[arg-type]
                         fired_at=event.fired_at, value=finite(event.value))


def target_out(target: TargetConfig, status: TargetStatus,
               headroom: TargetHeadroom | None = None) -> TargetOut:
    return TargetOut(name=target.name, url=target.url, engine=target.engine,
                     labels=dict(target.labels),
                     scrape_interval_seconds=target.scrape_interval_seconds,
                     state=status.state,  # type: ignore[arg-type]
                     last_scrape_at=status.last_scrape_at,
                     last_scrape_seconds=status.last_scrape_seconds,
                     last_error=status.last_error,
                     max_num_seqs=target.max_num_seqs,
                     max_num_batched_tokens=target.max_num_batched_tokens,
                     detected_engines=list(status.engines),
                     headroom=headroom_out(headroom) if headroom is not None else None)


def headroom_out(status: TargetHeadroom) -> HeadroomOut:
    found, capacity = status.headroom, status.capacity
    bench = capacity.bench_binding if capacity is not None else None
    return HeadroomOut(
        state=status.state,  # type: ignore[arg-type]
        headroom_ratio=finite(found.ratio),
        binding_dimension=found.binding.value if found.binding else None,
        bench_binding_dimension=bench.value if bench else None,
        warn_below_ratio=status.warn_below_ratio,
        capacity_source=capacity.source if capacity is not None else None,
        dimensions=[HeadroomDimensionOut(dimension=p.dimension.value, unit=UNITS[p.dimension],
                                         load=p.load, capacity=p.capacity,
                                         headroom_ratio=p.ratio) for p in found.dimensions],
        evaluated_at=status.evaluated_at, error=status.error)


def run_out(row: RunRow) -> RunOut:
    return RunOut(id=row.id, kind=row.kind, name=row.name,
                  status=row.status,  # type: ignore[arg-type]
                  started_at=row.started_at, finished_at=row.finished_at, config=row.config,
                  result=row.result, error=row.error)
