"""The evaluation loop: SLO evaluator, anomaly, headroom and target-down monitors -> alert
book -> Alertmanager, every interval.

The evaluator reads the store (blocking), so it ticks in a worker thread; the book and the
delivery queue live on the event loop. In ``run`` the anomaly monitor ticks in a thread of its
own and each round takes its latest conditions: its replay of stored history at start (tens of
seconds per target) never holds up the SLO pages. Without Alertmanager URLs, alerts are logged (and
still kept in the book and the store, for the API).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from urllib.parse import quote

from monitor.alerting.alertmanager import AmAlert
from monitor.alerting.book import AlertBook, Outgoing
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.target_down import TargetDownMonitor
from monitor.anomaly.monitor import ANOMALY_ALERT, AnomalyMonitor
from monitor.collect.target_down_config import TARGET_DOWN_ALERT
from monitor.headroom.config import HEADROOM_ALERT
from monitor.headroom.monitor import HeadroomMonitor
from monitor.slo.evaluator import AlertCondition, SloEvaluator, SloState, SloStatus
from monitor.store.fence import FencedOut

logger = logging.getLogger(__name__)


class AlertingLoop:
    def __init__(self, evaluator: SloEvaluator | None, book: AlertBook,
                 delivery: AlertDelivery | None, *, interval_seconds: float = 15.0,
                 external_url: str = "http://127.0.0.1:8080",
                 anomalies: AnomalyMonitor | None = None,
                 headroom: HeadroomMonitor | None = None,
                 target_down: TargetDownMonitor | None = None,
                 on_round: Callable[[float, bool], None] | None = None) -> None:
        self.evaluator = evaluator
        self.anomalies = anomalies
        self.headroom = headroom
        self.target_down = target_down
        self.book = book
        self.delivery = delivery
        self.interval_seconds = interval_seconds
        self.external_url = external_url.rstrip("/")
        self.statuses: list[SloStatus] = []
        self.last_tick_seconds = 0.0  # how long the latest evaluation took
        self.num_rounds = 0           # evaluation rounds run (the API is ready after one)
        # Told (seconds taken, failed) after each round of ``run``: the service's /metrics.
        self.on_round = on_round
        # The anomaly monitor's latest conditions and whether its latest tick failed; ``run``
        # ticks it in a task of its own (``_in_background``), ``evaluate`` alone inline.
        self._anomaly_conditions: list[AlertCondition] = []
        self._anomalies_failed = False
        self._in_background = False

    def evaluate(self, now: float) -> list[AmAlert]:
        """One round, synchronously: returns what is to be sent."""
        started = time.perf_counter()
        self.statuses = self.evaluator.tick(now) if self.evaluator is not None else []
        unreadable = {s.name for s in self.statuses if s.state is SloState.ERROR}
        # a split SLO's groups that could not be read: (SLO, its labels' values)
        unreadable_groups = {(s.name, g.group) for s in self.statuses for g in s.groups
                             if g.state is SloState.ERROR}
        conditions = [c for s in self.statuses for c in s.conditions]
        if self.anomalies is not None and not self._in_background:
            self._tick_anomalies(now)
        anomalies_failed = self._anomalies_failed
        if not anomalies_failed:  # else none: their alerts are frozen below
            conditions += self._anomaly_conditions
        headroom = self._tick_headroom(now)
        conditions += headroom or []
        down = self._tick_target_down(now)
        conditions += down or []
        self.last_tick_seconds = time.perf_counter() - started

        def frozen(labels: Mapping[str, str]) -> bool:  # alerts of what could not be read
            if labels.get("alertname") == ANOMALY_ALERT:
                return anomalies_failed
            if labels.get("alertname") == HEADROOM_ALERT:
                return headroom is None
            if labels.get("alertname") == TARGET_DOWN_ALERT:
                return down is None
            if labels.get("slo") in unreadable:
                return True
            return any(labels.get("slo") == name and all(labels.get(k) == v for k, v in group)
                       for name, group in unreadable_groups)

        self.book.update(now, conditions, frozen)
        self.num_rounds += 1
        return [self._to_alertmanager(o) for o in self.book.due(now)]

    def follow(self, now: float) -> None:
        """A standby's read-only round beside its SLO statuses: the headroom statuses, for
        its API and /metrics (their conditions are the active's to act on; nothing saved)."""
        self._tick_headroom(now)

    def _tick_headroom(self, now: float) -> list[AlertCondition] | None:
        """The headroom conditions; None when they could not be evaluated (their alerts are
        then kept as they are)."""
        if self.headroom is None:
            return []
        try:
            return self.headroom.tick(now)
        except Exception:
            logger.exception("headroom evaluation failed; its alerts are kept as they are")
            return None

    def _tick_target_down(self, now: float) -> list[AlertCondition] | None:
        """The target-down conditions; None when the store could not be read (their alerts
        are then kept as they are)."""
        if self.target_down is None:
            return []
        try:
            return self.target_down.tick(now)
        except Exception:
            logger.exception("target-down evaluation failed; its alerts are kept as they are")
            return None

    def _tick_anomalies(self, now: float) -> None:
        """Tick the anomaly monitor into ``_anomaly_conditions``; on failure the previous
        ones stay and its alerts are kept as they are while the SLO alerts go on."""
        assert self.anomalies is not None
        try:
            self._anomaly_conditions = self.anomalies.tick(now)
            self._anomalies_failed = False
        except Exception:
            logger.exception("anomaly evaluation failed; its alerts are kept as they are")
            self._anomalies_failed = True

    async def _run_anomalies(self, stop: asyncio.Event) -> None:
        assert self.anomalies is not None
        while not stop.is_set():
            now = time.time()
            await asyncio.to_thread(self._tick_anomalies, now)
            delay = self.interval_seconds - (time.time() - now)
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(delay, 0.0))
            except TimeoutError:
                pass

    async def run(self, stop: asyncio.Event) -> None:
        delivery_task = (asyncio.create_task(self.delivery.run())
                         if self.delivery is not None else None)
        anomaly_task = None
        if self.anomalies is not None:
            self._in_background = True
            anomaly_task = asyncio.create_task(self._run_anomalies(stop))
        try:
            while not stop.is_set():
                now = time.time()
                failed = False
                try:
                    alerts = await asyncio.to_thread(self.evaluate, now)
                except FencedOut as exc:  # lost the lock, not yet noticed: send nothing
                    logger.warning("%s; this round sends nothing", exc)
                    alerts, failed = [], True
                except Exception:
                    logger.exception("SLO evaluation failed; retrying next interval")
                    alerts, failed = [], True
                if self.on_round is not None:
                    self.on_round(time.time() - now, failed)
                self._send(alerts)
                delay = self.interval_seconds - (time.time() - now)
                try:
                    await asyncio.wait_for(stop.wait(), timeout=max(delay, 0.0))
                except TimeoutError:
                    pass
        finally:
            if self.delivery is not None:
                lost = await self.delivery.aclose()
                if lost:
                    logger.warning("%d alerts were not delivered before shutdown; they are "
                                   "kept in the store and resent at the next start", lost)
            if delivery_task is not None:
                await asyncio.gather(delivery_task, return_exceptions=True)
            if anomaly_task is not None:
                await asyncio.gather(anomaly_task, return_exceptions=True)

    def _send(self, alerts: Sequence[AmAlert]) -> None:
        # The book logs each change; without an Alertmanager the log is the receiver, so every
        # announcement (resends included) is logged at INFO, else at DEBUG.
        level = logging.DEBUG if self.delivery is not None else logging.INFO
        for alert in alerts:
            state = "resolved" if alert.is_resolved() else "firing"
            logger.log(level, "%s %s %s: %s", state, alert.labels.get("alertname"),
                        ",".join(f"{k}={v}" for k, v in sorted(alert.labels.items())
                                 if k != "alertname"),
                        alert.annotations.get("summary", ""))
        if self.delivery is not None and alerts:
            self.delivery.submit(alerts)

    def _to_alertmanager(self, out: Outgoing) -> AmAlert:
        if out.labels.get("alertname") in (ANOMALY_ALERT, HEADROOM_ALERT, TARGET_DOWN_ALERT):
            target = quote(out.labels.get("target", ""))
            source = f"{self.external_url}/api/v1/targets/{target}"
        else:
            source = f"{self.external_url}/api/v1/slos/{quote(out.labels.get('slo', ''))}"
        return AmAlert(
            labels=out.labels, annotations=out.annotations,
            starts_at=datetime.fromtimestamp(out.starts_at, UTC),
            ends_at=datetime.fromtimestamp(out.ends_at, UTC),
            generator_url=source)
