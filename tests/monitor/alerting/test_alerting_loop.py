"""Evaluator -> alert book -> real Alertmanager: one page per incident, across a monitor
restart, and a resolve that arrives."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np

from monitor.alerting.alertmanager import SyncAlertmanagerClient
from monitor.alerting.book import AlertBook
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from monitor.store import Store
from tests.monitor.alertmanager_fixture import (
    running_alertmanager,
    webhook_config,
    webhook_receiver,
)

SLO = Slo.model_validate({"name": "chat-availability", "service": "chat", "objective": 0.999,
                          "sli": {"kind": "availability"},
                          "alerting": {"runbook_url": "https://runbooks.example/chat"}})


def source(now: float, failing_minutes: int) -> MinuteArraySource:
    """Two days of 100 requests a minute up to now; the last ``failing_minutes`` all fail."""
    end = int(now // 60) * 60
    n = 2 * 1440
    total = np.full(n, 100.0)
    good = total.copy()
    if failing_minutes:
        good[-failing_minutes:] = 0.0
    return MinuteArraySource(end - n * 60, {SLO.name: (good, total, np.ones(n, dtype=bool))})


def round_trip(store: Store, am_url: str, now: float, failing_minutes: int) -> AlertingLoop:
    """A fresh monitor (as after a restart): evaluate once and deliver what is due."""
    loop = AlertingLoop(SloEvaluator([SLO], source(now, failing_minutes), settle_seconds=0),
                        AlertBook(store, resend_seconds=1), AlertDelivery(am_url))

    async def once() -> None:
        assert loop.delivery is not None
        loop.delivery.submit(loop.evaluate(now))
        assert await loop.delivery.flush()
        await loop.delivery.aclose()

    asyncio.run(once())
    return loop


def test_a_page_survives_a_monitor_restart_without_paging_twice(tmp_path: Path,
                                                                  store: Store) -> None:
    with webhook_receiver() as hook, running_alertmanager(
            tmp_path, webhook_config(hook.url, group_by=["slo"])) as am:
        client = SyncAlertmanagerClient(am.url)
        first = round_trip(store, am.url, time.time(), failing_minutes=3)
        (status,) = first.statuses
        assert status.state == "burning"
        pages = client.list_alerts(["slo=chat-availability", "severity=page"])
        assert {a.labels["window"] for a in pages} == {"1h/5m", "6h/30m"}
        assert pages[0].annotations["runbook_url"] == "https://runbooks.example/chat"
        hook.wait_for(lambda n: len(n) >= 1)

        time.sleep(1.5)  # past resend_seconds: the restarted monitor re-announces
        round_trip(store, am.url, time.time(), failing_minutes=3)
        time.sleep(2.5)  # group_wait + group_interval: a second page would have arrived
        firing = hook.alerts("firing")
        assert len(hook.notifications) == 1, hook.notifications
        assert {a["labels"]["window"] for a in firing} >= {"1h/5m"}

        # The errors stop and the short windows clear (a fresh two days without failures):
        # the alerts resolve in Alertmanager and the receiver hears it.
        round_trip(store, am.url, time.time(), failing_minutes=0)
        assert client.list_alerts(["slo=chat-availability"]) == []
        hook.wait_for(lambda n: any(a["status"] == "resolved"
                                    for x in n for a in x["alerts"]), timeout=10)
        client.close()
