"""The monitor's evaluation loop, wired from its config: the SLO evaluator, the anomaly
monitor, the headroom monitor and the target-down alert (monitor/alerting/target_down.py) feed
one alert book, whose notifications go to Alertmanager (monitor/alerting/loop.py runs the
rounds). `inferwatch serve` (monitor/service/process.py) and `inferwatch collect`
(monitor/collect/cli.py) both run it beside their collector.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.alerting.book import AlertBook
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from monitor.alerting.target_down import TargetDownMonitor
from monitor.anomaly.monitor import AnomalyMonitor
from monitor.anomaly.params import AnomalyParams
from monitor.collect.config import MonitorConfig
from monitor.headroom.monitor import HeadroomMonitor
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store


def evaluation_loop(config: MonitorConfig, store: Store, slos: list[Slo],
                    current: Callable[[], MonitorConfig] | None = None) -> AlertingLoop:
    """The loop that evaluates ``slos`` (and anomalies, headroom) over ``store`` every
    evaluation interval; ``current`` gives the config in force (edits of the targets'
    capacity apply live), else ``config`` stays."""
    settings = config.alerting
    evaluator = SloEvaluator(slos, StoreSliSource(store), settle_seconds=config.settle_seconds)
    anomalies = (AnomalyMonitor(store, AnomalyParams(step_seconds=config.anomaly.step_seconds),
                                settle_seconds=config.settle_seconds,
                                history_seconds=config.anomaly.history_seconds,
                                page_on=frozenset(config.anomaly.page_on))
                 if config.anomaly.enabled else None)
    book = AlertBook(store, resend_seconds=settings.resend_seconds)
    delivery = (AlertDelivery(settings.alertmanager_urls) if settings.alertmanager_urls
                else None)
    return AlertingLoop(evaluator, book, delivery,
                        interval_seconds=settings.evaluation_interval_seconds,
                        external_url=settings.external_url, anomalies=anomalies,
                        headroom=HeadroomMonitor(store, current or (lambda: config)),
                        target_down=TargetDownMonitor(store, current or (lambda: config)))
