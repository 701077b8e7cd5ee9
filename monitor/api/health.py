"""The monitor's own health, for its /metrics and the targets API.

Scrapes are observed at the collector's sink (each snapshot arrives when its scrape ends, so
the time since the snapshot's end is the scrape's duration); evaluation rounds are reported by
the alerting loop; SLO state and alert counts are read from the loop when /metrics is scraped
(a collector in client_python's style, computed at scrape time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from monitor.alerting.loop import AlertingLoop
from monitor.service.reload import ReloadResult
from monitor.slo.forecast import BudgetState
from monitor.collect.snapshot import Snapshot, TargetState

_SCRAPE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_EVAL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class MonitorMetrics:
    """The monitor's instruments, in a registry of their own (never the global one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.scrape_duration = Histogram(
            "inferwatch_scrape_duration_seconds", "Time a scrape of a target took",
            ["target"], buckets=_SCRAPE_BUCKETS, registry=r)
        self.scrape_errors = Counter(
            "inferwatch_scrape_errors", "Scrapes that failed, by target and reason",
            ["target", "reason"], registry=r)
        self.target_up = Gauge("inferwatch_target_up", "1 when the last scrape succeeded",
                               ["target"], registry=r)
        self.evaluation_duration = Histogram(
            "inferwatch_evaluation_duration_seconds",
            "Time one SLO and anomaly evaluation round took", buckets=_EVAL_BUCKETS,
            registry=r)
        self.evaluation_failures = Counter(
            "inferwatch_evaluation_failures", "Evaluation rounds that failed", registry=r)
        self.api_requests = Counter(
            "inferwatch_api_requests", "API requests answered, by route and status",
            ["method", "route", "status"], registry=r)
        self.api_duration = Histogram(
            "inferwatch_api_request_duration_seconds", "Time to answer an API request",
            ["route"], buckets=_API_BUCKETS, registry=r)
        # Prometheus' own names for its reloads, with our prefix (monitor/service/reload.py
        # sets them).
        self.reload_successful = Gauge(
            "inferwatch_config_last_reload_successful",
            "1 when the last configuration reload (SLO files and targets) succeeded",
            registry=r)
        self.reload_success_timestamp = Gauge(
            "inferwatch_config_last_reload_success_timestamp_seconds",
            "Time of the last successful configuration reload (or of the start)", registry=r)

        # Replicas on one store (monitor/service/leader.py) and what the store refused.
        self.ha_role = Gauge("inferwatch_ha_role",
                             "1 for this replica's role (active, standby), 0 for the other",
                             ["role"], registry=r)
        self.ha_is_active = Gauge("inferwatch_ha_is_active",
                                  "1 while this replica is the active one", registry=r)
        self.ha_leader_changes = Counter(
            "inferwatch_ha_leader_changes",
            "Times this replica became active or stepped down", registry=r)
        self.snapshots_rejected = Counter(
            "inferwatch_snapshots_rejected",
            "Snapshots the store did not write, by reason (overlap: another snapshot of "
            "the target already covers that time)", ["reason"], registry=r)
        self.snapshots_rejected.labels("overlap")

    def observe_role(self, role: str, changed: bool = True) -> None:
        for name in ("active", "standby"):
            self.ha_role.labels(name).set(1.0 if role == name else 0.0)
        self.ha_is_active.set(1.0 if role == "active" else 0.0)
        if changed:
            self.ha_leader_changes.inc()

    def observe_rejected(self, reason: str, count: int) -> None:
        self.snapshots_rejected.labels(reason).inc(count)

    def observe_reload(self, result: ReloadResult) -> None:
        self.reload_successful.set(1.0 if result.successful else 0.0)
        if result.successful:
            self.reload_success_timestamp.set(result.at)

    def observe_round(self, seconds: float, failed: bool) -> None:
        self.evaluation_duration.observe(seconds)
        if failed:
            self.evaluation_failures.inc()


@dataclass(slots=True)
class TargetStatus:
    state: str = "unknown"               # up | down | unknown (not scraped yet)
    last_scrape_at: float | None = None
    last_scrape_seconds: float | None = None
    last_error: str | None = None
    engines: tuple[str, ...] = ()        # what the last answering page was read as


class ScrapeObserver:
    """Wraps the collector's sink: records each scrape's outcome, then passes it on."""

    def __init__(self, sink: Callable[[Snapshot], None], metrics: MonitorMetrics,
                 clock: Callable[[], float] = time.time) -> None:
        self._sink = sink
        self._metrics = metrics
        self._clock = clock
        self._status: dict[str, TargetStatus] = {}

    def __call__(self, snapshot: Snapshot) -> None:
        seconds = max(self._clock() - snapshot.end, 0.0)
        up = snapshot.state is not TargetState.DOWN
        engines = snapshot.engines if up else self.status(snapshot.target).engines
        self._status[snapshot.target] = TargetStatus(
            "up" if up else "down", snapshot.end, seconds, None if up else snapshot.error,
            engines)
        self._metrics.scrape_duration.labels(snapshot.target).observe(seconds)
        self._metrics.target_up.labels(snapshot.target).set(1.0 if up else 0.0)
        if not up:
            reason = (snapshot.error or "unknown").split(":", 1)[0].strip() or "unknown"
            self._metrics.scrape_errors.labels(snapshot.target, reason).inc()
        self._sink(snapshot)

    def status(self, target: str) -> TargetStatus:
        return self._status.get(target, TargetStatus())


class SloCollector(Collector):
    """SLO budget, burn rates and alert counts of the latest evaluation, at scrape time."""

    def __init__(self, loop: AlertingLoop) -> None:
        self._loop = loop

    def collect(self) -> Iterator[GaugeMetricFamily]:
        budget = GaugeMetricFamily("inferwatch_slo_budget_remaining_ratio",
                                   "Fraction of the period's error budget left", labels=["slo"])
        burn = GaugeMetricFamily("inferwatch_slo_burn_rate",
                                 "Error-budget burn rate over a window", labels=["slo", "window"])
        sli = GaugeMetricFamily("inferwatch_slo_sli_ratio", "Good over all events in the period",
                                labels=["slo"])
        at_end = GaugeMetricFamily(
            "inferwatch_slo_budget_forecast_ratio",
            "Error budget forecast for the period's end at the sustained burn rate",
            labels=["slo"])
        states = GaugeMetricFamily(
            "inferwatch_slo_budget_state", "1 for the SLO's budget state (healthy, at_risk, "
            "exhausted, unknown), 0 for the others", labels=["slo", "state"])
        for status in self._loop.statuses:
            if status.forecast is not None:
                if math.isfinite(status.forecast.budget_at_period_end):
                    at_end.add_metric([status.name], status.forecast.budget_at_period_end)
                for value in BudgetState:
                    states.add_metric([status.name, value.value],
                                     float(status.forecast.state is value))
            if math.isfinite(status.budget_remaining):
                budget.add_metric([status.name], status.budget_remaining)
            if math.isfinite(status.sli):
                sli.add_metric([status.name], status.sli)
            for b in status.burn_rates:
                if math.isfinite(b.burn_rate):
                    burn.add_metric([status.name, b.window], b.burn_rate)
        alerts = GaugeMetricFamily("inferwatch_alerts", "Alerts in the book, by name and state",
                                   labels=["alertname", "state"])
        counts: dict[tuple[str, str], int] = {}
        for alert in self._loop.book.alerts():
            key = (alert.name, alert.state.value)
            counts[key] = counts.get(key, 0) + 1
        for (name, state), n in sorted(counts.items()):
            alerts.add_metric([name, state], float(n))
        yield from (budget, burn, sli, at_end, states, alerts)
