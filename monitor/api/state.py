"""What the API reads: the service's parts, passed in (never module globals), so a test can
build the app over a real store without a collector."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from monitor.alerting.loop import AlertingLoop
from monitor.api.health import MonitorMetrics, ScrapeObserver
from monitor.api.runs import RunManager
from monitor.collect.config import MonitorConfig
from monitor.headroom.monitor import TargetHeadroom
from monitor.service.leader import Replica
from monitor.service.reload import Reloader
from monitor.slo.spec import Slo
from monitor.store import Store


@dataclass
class ServiceState:
    store: Store
    config: Callable[[], MonitorConfig]       # the current config (edits apply live)
    slos: list[Slo]
    metrics: MonitorMetrics
    scrapes: ScrapeObserver
    runs: RunManager
    alerting: AlertingLoop | None = None
    token: str | None = None                  # bearer token for changes; None: no changes
    started_at: float = field(default_factory=time.time)
    reloader: Reloader[Any] | None = None     # POST /-/reload; None: not reloadable
    replica: Replica | None = None            # active or standby; None: an API without one

    def headroom(self, target: str) -> TargetHeadroom | None:
        """The target's headroom of the latest round; None without a capacity or a round."""
        monitor = self.alerting.headroom if self.alerting is not None else None
        return monitor.statuses.get(target) if monitor is not None else None

    def slo(self, name: str) -> Slo | None:
        return next((s for s in self.slos if s.name == name), None)
