"""Alert delivery that survives Alertmanager being down: queue, retry with backoff, drop nothing.

``submit()`` never blocks and never fails for an unreachable Alertmanager: it records the
latest version of each alert (keyed by Alertmanager's fingerprint of its labels) and ``run()``
posts what is pending, backing off exponentially with jitter while Alertmanager is down
(0.5 s doubling to 30 s by default) and delivering everything once it answers again.

Coalescing keeps the queue bounded by the number of distinct alerts without losing what
matters: a newer version of an alert replaces an older undelivered one, except that an
undelivered resolve is kept and sent before a newer firing version of the same alert, so a
"resolved, then firing again" is never turned into "firing all along", and a resolve is never
dropped in favour of nothing.

With several Alertmanagers (an HA pair, which does not replicate alerts) each URL has its own
queue and backoff: an alert is delivered once every URL has accepted it, and a down peer does
not delay the other. A batch that Alertmanager refuses as malformed (400, 413, 422) is split
to isolate the bad alerts, which are logged with their labels, counted and dropped so they do
not block the queue. Other 4xx (401, 403, 404...) say the endpoint is wrong, not the alerts;
dropping would lose every alert until someone fixes the URL, so those are retried like an
outage and shown in ``last_error``.

Call ``submit()`` from the event loop's thread (asyncio primitives are not thread-safe).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import islice
from typing import Final, NamedTuple

from monitor.alerting.alertmanager import (
    DEFAULT_TIMEOUT,
    AlertmanagerClient,
    AlertmanagerError,
    AlertmanagerRejected,
    AmAlert,
)

logger = logging.getLogger(__name__)

# Statuses that condemn the payload, not the endpoint: splitting the batch can isolate them.
_PAYLOAD_REJECTIONS: Final = frozenset({400, 413, 422})
_LOGGED_LABELS: Final = 5  # undelivered alerts named in the log at close


class _Slot(NamedTuple):
    """What is pending for one fingerprint: an older episode's resolve (sent first) and/or
    the latest version. The members are compared by identity to know what was sent."""

    resolve: AmAlert | None
    latest: AmAlert | None

    def alerts(self) -> list[AmAlert]:
        return [a for a in (self.resolve, self.latest) if a is not None]


class DeliveryTarget:
    """One Alertmanager's queue, backoff and counters (read them for the monitor's /metrics)."""

    def __init__(self, client: AlertmanagerClient) -> None:
        self.client = client
        self.url = client.url
        self.delivered_total = 0  # alerts it accepted
        self.failed_attempts_total = 0  # posts that failed and will be retried
        self.rejected_total = 0  # alerts it refused as malformed: dropped
        self.consecutive_failures = 0
        self.last_error: str | None = None  # None once a post succeeds again
        self.last_error_at: datetime | None = None
        self._pending: dict[str, _Slot] = {}
        self._retry_at = 0.0  # time.monotonic() before which the run loop does not post
        self._lock = asyncio.Lock()  # one post at a time: run() and flush() share the queue
        self._wake = asyncio.Event()

    @property
    def pending_count(self) -> int:
        """Alerts (fingerprints) this Alertmanager has not yet accepted."""
        return len(self._pending)

    def _put(self, alert: AmAlert, resolved: bool) -> None:
        slot = self._pending.get(alert.fingerprint)
        if resolved:
            self._pending[alert.fingerprint] = _Slot(alert, None)
        else:
            self._pending[alert.fingerprint] = _Slot(slot.resolve if slot else None, alert)
        self._wake.set()

    def _done(self, sent: Sequence[tuple[str, _Slot]]) -> None:
        """Forget what was sent (accepted or dropped), keeping what was submitted meanwhile."""
        for key, slot in sent:
            current = self._pending.get(key)
            if current is None:
                continue
            left = _Slot(None if current.resolve is slot.resolve else current.resolve,
                         None if current.latest is slot.latest else current.latest)
            if left.resolve is None and left.latest is None:
                del self._pending[key]
            else:
                self._pending[key] = left


class AlertDelivery:
    """Reliable, coalescing delivery of alerts to one or more Alertmanagers.

    Use: ``task = asyncio.create_task(delivery.run())``, ``delivery.submit(alerts)`` as often
    as needed, ``await delivery.aclose()`` at shutdown (it stops ``run()`` and makes a last
    attempt). Without ``run()``, call ``await delivery.flush()`` yourself.
    """

    def __init__(self, urls: str | Sequence[str], *, batch_size: int = 100,
                 initial_backoff: float = 0.5, max_backoff: float = 30.0,
                 timeout: float = DEFAULT_TIMEOUT, rng: random.Random | None = None) -> None:
        unique = list(dict.fromkeys([urls] if isinstance(urls, str) else urls))
        if not unique:
            raise ValueError("AlertDelivery needs at least one Alertmanager URL")
        if batch_size < 1 or not 0 < initial_backoff <= max_backoff:
            raise ValueError("batch_size must be >= 1 and 0 < initial_backoff <= max_backoff")
        self.targets = tuple(DeliveryTarget(AlertmanagerClient(u, timeout=timeout))
                             for u in unique)
        self.batch_size = batch_size
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._rng = rng or random.Random()
        self._closing = False
        self._closed = False
        self._abandoned = False

    # --- the caller's side ---

    def submit(self, alerts: Sequence[AmAlert]) -> None:
        """Queue alerts for every Alertmanager; returns at once.

        A firing alert without ``starts_at`` gets the time of its first submission, so that a
        delivery delayed by an outage does not move its start. An alert whose ``ends_at`` is
        not in the future is a resolve.
        """
        if self._abandoned:
            return
        if self._closing:
            raise RuntimeError("AlertDelivery.submit() after aclose()")
        now = datetime.now(UTC)
        for alert in alerts:
            resolved = alert.is_resolved(now)
            if alert.starts_at is None and not resolved:
                alert = replace(alert, starts_at=self._pending_start(alert.fingerprint) or now)
            for target in self.targets:
                target._put(alert, resolved)

    def _pending_start(self, key: str) -> datetime | None:
        for target in self.targets:
            slot = target._pending.get(key)
            if slot and slot.latest:  # latest is only ever a firing version
                return slot.latest.starts_at
        return None

    @property
    def pending_count(self) -> int:
        """Alerts not yet accepted by every Alertmanager."""
        return len(set().union(*(t._pending for t in self.targets)))

    @property
    def delivered_total(self) -> int:
        """Alerts accepted, summed over the Alertmanagers (per URL: ``targets``)."""
        return sum(t.delivered_total for t in self.targets)

    @property
    def failed_attempts_total(self) -> int:
        return sum(t.failed_attempts_total for t in self.targets)

    @property
    def rejected_total(self) -> int:
        """Alerts refused as malformed and dropped, summed over the Alertmanagers."""
        return sum(t.rejected_total for t in self.targets)

    @property
    def last_error(self) -> str | None:
        """The latest error of an Alertmanager that has not accepted a post since; else None."""
        failing = [t for t in self.targets if t.last_error is not None]
        if not failing:
            return None
        return max(failing, key=lambda t: t.last_error_at or datetime.min.replace(tzinfo=UTC)
                   ).last_error

    # --- delivering ---

    async def run(self) -> None:
        """Deliver until ``aclose()``: each Alertmanager in its own loop."""
        await asyncio.gather(*(self._run_target(t) for t in self.targets))

    async def flush(self) -> bool:
        """Try to post everything pending now, ignoring backoff; True when nothing is left."""
        await asyncio.gather(*(self._attempt(t) for t in self.targets))
        return self.pending_count == 0

    async def aclose(self, timeout: float = 5.0) -> int:
        """Stop ``run()``, make a last attempt within ``timeout`` seconds, close the clients.
        Returns the number of alerts some Alertmanager never accepted (logged as lost)."""
        self._closing = True
        for target in self.targets:
            target._wake.set()
        if not self._closed:
            try:
                await asyncio.wait_for(self.flush(), timeout)
            except TimeoutError:
                pass
            self._closed = True
            for target in self.targets:
                await target.client.aclose()
        lost = self.pending_count
        if lost:
            labels = [dict(s.alerts()[-1].labels) for t in self.targets
                      for s in islice(t._pending.values(), _LOGGED_LABELS)][:_LOGGED_LABELS]
            logger.error("closing with %d alerts undelivered (%s); e.g. %s", lost,
                         self.last_error, labels)
        return lost

    def abandon(self) -> int:
        """Send nothing more, not even what is pending (a replica that lost its leadership:
        the new active announces every alert again); later submits are ignored. Returns the
        number of alerts dropped. ``aclose()`` still closes the clients."""
        dropped = self.pending_count
        self._abandoned = self._closing = True
        for target in self.targets:
            target._pending.clear()
            target._wake.set()
        return dropped

    async def _run_target(self, target: DeliveryTarget) -> None:
        while not self._closing:
            target._wake.clear()  # before looking, so that a submit from now on wakes us
            wait: float | None = None
            if target._pending:
                wait = target._retry_at - time.monotonic()
                if wait <= 0:
                    await self._attempt(target)
                    continue
            try:
                await asyncio.wait_for(target._wake.wait(), wait)
            except TimeoutError:
                pass

    async def _attempt(self, target: DeliveryTarget) -> None:
        """Post all that is pending in batches; on failure schedule the next try."""
        async with target._lock:
            try:
                while target._pending:
                    await self._post(target, list(islice(target._pending.items(),
                                                         self.batch_size)))
            except AlertmanagerError as exc:
                self._failed(target, str(exc))
            except Exception as exc:  # a bug must not stop delivery: log it, retry later
                logger.exception("delivering alerts to %s failed unexpectedly", target.url)
                self._failed(target, f"{type(exc).__name__}: {exc}")
            else:
                if target.consecutive_failures:
                    logger.info("Alertmanager %s accepts alerts again after %d failed "
                                "attempts", target.url, target.consecutive_failures)
                target.consecutive_failures = 0
                target.last_error = None
                target._retry_at = 0.0

    async def _post(self, target: DeliveryTarget, batch: list[tuple[str, _Slot]]) -> None:
        alerts = [a for _, slot in batch for a in slot.alerts()]
        try:
            await target.client.post_alerts(alerts)
        except AlertmanagerRejected as exc:
            if exc.status not in _PAYLOAD_REJECTIONS:
                raise
            if len(batch) > 1:  # find the bad ones; Alertmanager already kept the good ones
                half = len(batch) // 2
                await self._post(target, batch[:half])
                await self._post(target, batch[half:])
                return
            for alert in alerts:
                logger.error("Alertmanager %s rejected alert %s, dropped: %s", target.url,
                             dict(alert.labels), exc)
            target.rejected_total += len(alerts)
        else:
            target.delivered_total += len(alerts)
        target._done(batch)

    def _failed(self, target: DeliveryTarget, error: str) -> None:
        target.failed_attempts_total += 1
        target.consecutive_failures += 1
        ceiling = min(self.max_backoff,
                      self.initial_backoff * 2 ** min(target.consecutive_failures - 1, 30))
        delay = self._rng.uniform(ceiling / 2, ceiling)  # jitter: HA monitors do not align
        target._retry_at = time.monotonic() + delay
        changed = error != target.last_error
        target.last_error, target.last_error_at = error, datetime.now(UTC)
        logger.log(logging.WARNING if changed else logging.DEBUG,
                   "%d alerts pending for %s; retrying in %.1f s (attempt %d failed): %s",
                   target.pending_count, target.url, delay, target.consecutive_failures, error)
