"""AlertDelivery against real Alertmanagers that are down, come up, or refuse a payload."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.alerting.alertmanager import AlertmanagerClient, AmAlert
from monitor.alerting.delivery import AlertDelivery
from tests.processes import free_port
from tests.monitor.alertmanager_fixture import (
    RunningAlertmanager,
    running_alertmanager,
)



def fast_delivery(urls: str | list[str], batch_size: int = 100) -> AlertDelivery:
    """Backoff and timeouts short enough for tests."""
    return AlertDelivery(urls, batch_size=batch_size, initial_backoff=0.05, max_backoff=0.2,
                         timeout=1.0)


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.02)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


async def listed(url: str, *matchers: str) -> dict[str, AmAlert]:
    """The active alerts of the Alertmanager at ``url`` by fingerprint."""
    async with AlertmanagerClient(url) as client:
        return {a.fingerprint: a.alert for a in await client.list_alerts(matchers)}


def rejected_by_alertmanager(labels: dict[str, str]) -> AmAlert:
    """An alert Alertmanager answers 400 for (AmAlert's own checks are bypassed to make it)."""
    start = datetime.now(UTC)
    alert = AmAlert(labels, starts_at=start)
    object.__setattr__(alert, "ends_at", start - timedelta(hours=1))
    return alert


@pytest.fixture(scope="module")
def shared_am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAlertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as am:
        yield am


# --- queueing (no Alertmanager) ------------------------------------------------------------

def test_latest_version_replaces_older_but_a_resolve_is_kept() -> None:
    delivery = AlertDelivery(f"http://127.0.0.1:{free_port()}")
    [target] = delivery.targets
    v1 = AmAlert({"alertname": "A"}, {"summary": "v1"})
    delivery.submit([v1])
    first_start = target._pending[v1.fingerprint].latest.starts_at  # type: ignore[union-attr]
    assert first_start is not None  # the submit time, kept across an outage
    delivery.submit([replace(v1, annotations={"summary": "v2"})])
    slot = target._pending[v1.fingerprint]
    assert slot.resolve is None and slot.latest is not None
    assert slot.latest.annotations["summary"] == "v2" and slot.latest.starts_at == first_start

    resolve = slot.latest.resolved()
    delivery.submit([resolve])
    assert target._pending[v1.fingerprint] == (resolve, None)
    again = AmAlert({"alertname": "A"}, starts_at=datetime.now(UTC) + timedelta(seconds=1))
    delivery.submit([again])
    assert target._pending[v1.fingerprint] == (resolve, again)  # resolve first, then firing
    assert delivery.pending_count == 1


def test_backoff_doubles_to_the_cap_with_jitter() -> None:
    delivery = AlertDelivery("http://127.0.0.1:9", initial_backoff=0.5, max_backoff=30.0,
                             rng=random.Random(1))
    [target] = delivery.targets
    for ceiling in (0.5, 1, 2, 4, 8, 16, 30, 30, 30):
        before = time.monotonic()
        delivery._failed(target, "down")
        assert ceiling / 2 <= target._retry_at - before <= ceiling + 0.01
    assert target.failed_attempts_total == 9 and delivery.last_error == "down"


# --- against real Alertmanagers ------------------------------------------------------------

@pytest.mark.integration
def test_alerts_submitted_while_down_arrive_when_it_comes_up(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    early = datetime.now(UTC) - timedelta(minutes=10)

    async def scenario() -> None:
        delivery = fast_delivery(url)
        task = asyncio.create_task(delivery.run())
        a = AmAlert({"alertname": "Down", "slo": "a"})  # no start: the submit time
        b, c, d1 = (AmAlert({"alertname": "Down", "slo": slo}, starts_at=early)
                    for slo in "bcd")
        delivery.submit([a, b, c, d1])
        submitted = datetime.now(UTC)
        delivery.submit([c.resolved()])  # c stopped firing
        d1_end = d1.resolved()
        delivery.submit([d1_end])  # d stopped and fired again: both must arrive
        # The new episode starts after the old one ended (Alertmanager merges an alert into an
        # episode whose end it overlaps: d2 made before d1's resolve overlapped it by a few
        # microseconds, and the test failed when they fell in different milliseconds).
        assert d1_end.ends_at is not None
        d2 = replace(d1, starts_at=d1_end.ends_at + timedelta(seconds=1))
        delivery.submit([d2])
        await wait_until(lambda: delivery.failed_attempts_total >= 3)
        assert delivery.pending_count == 4 and delivery.delivered_total == 0
        assert delivery.last_error and url in delivery.last_error
        assert "cannot connect (Connection refused)" in delivery.last_error

        with ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running_alertmanager(tmp_path,
                                                                              port=port))
            await wait_until(lambda: delivery.pending_count == 0)
            assert delivery.delivered_total == 5  # a, b, c's resolve, d's resolve, d2
            assert delivery.last_error is None and delivery.rejected_total == 0
            active = await listed(url, "alertname=Down")
            assert set(active) == {a.fingerprint, b.fingerprint, d2.fingerprint}
            assert active[b.fingerprint].starts_at == b.starts_at
            start_a = active[a.fingerprint].starts_at
            assert start_a is not None and start_a <= submitted  # not the delivery time
            assert active[d2.fingerprint].starts_at == d2.starts_at  # a new episode
            assert await delivery.aclose() == 0
            await task
            await asyncio.to_thread(stack.close)

    run(scenario)


@pytest.mark.integration
def test_rejected_alert_is_dropped_and_counted_not_retried(
        shared_am: RunningAlertmanager, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        delivery = fast_delivery(shared_am.url, batch_size=10)
        task = asyncio.create_task(delivery.run())
        good = [AmAlert({"alertname": "Batch", "n": str(i)}) for i in range(5)]
        bad = rejected_by_alertmanager({"alertname": "Batch", "n": "bad"})
        delivery.submit([*good[:2], bad, *good[2:]])
        await wait_until(lambda: delivery.pending_count == 0)
        assert delivery.rejected_total == 1 and delivery.delivered_total == 5
        assert delivery.failed_attempts_total == 0 and delivery.last_error is None
        assert set(await listed(shared_am.url, "alertname=Batch")) == {
            g.fingerprint for g in good}
        later = AmAlert({"alertname": "Batch", "n": "later"})  # the queue is not stuck
        delivery.submit([later])
        await wait_until(lambda: delivery.pending_count == 0)
        assert later.fingerprint in await listed(shared_am.url, "alertname=Batch")
        assert delivery.rejected_total == 1
        await delivery.aclose()
        await task

    with caplog.at_level(logging.ERROR, logger="monitor.alerting.delivery"):
        run(scenario)
    [record] = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert "'n': 'bad'" in record.getMessage()
    assert "start time must be before end time" in record.getMessage()


@pytest.mark.integration
def test_wrong_endpoint_is_retried_not_dropped(shared_am: RunningAlertmanager,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """A 404 says the URL is wrong, not the alerts: keep them, report, retry."""
    async def scenario() -> None:
        delivery = fast_delivery(f"{shared_am.url}/wrong-prefix")
        delivery.submit([AmAlert({"alertname": "Misrouted"})])
        assert not await delivery.flush()
        assert delivery.rejected_total == 0 and delivery.pending_count == 1
        assert delivery.failed_attempts_total == 1
        assert delivery.last_error and "HTTP 404" in delivery.last_error
        assert await delivery.aclose(timeout=1.0) == 1  # lost at close, and said so

    with caplog.at_level(logging.ERROR, logger="monitor.alerting.delivery"):
        run(scenario)
    assert any("1 alerts undelivered" in r.getMessage() and "Misrouted" in r.getMessage()
               for r in caplog.records)


@pytest.mark.integration
def test_close_delivers_what_is_pending(shared_am: RunningAlertmanager) -> None:
    async def scenario() -> None:
        delivery = fast_delivery(shared_am.url)
        alert = AmAlert({"alertname": "AtClose"})
        delivery.submit([alert])
        assert await delivery.aclose() == 0
        assert alert.fingerprint in await listed(shared_am.url, "alertname=AtClose")
        with pytest.raises(RuntimeError):
            delivery.submit([alert])

    run(scenario)


@pytest.mark.integration
def test_an_abandoned_delivery_sends_nothing_more(shared_am: RunningAlertmanager) -> None:
    """A replica that lost its leadership: what is pending is dropped, later rounds ignored."""
    async def scenario() -> None:
        delivery = fast_delivery(shared_am.url)
        pending, late = AmAlert({"alertname": "Abandoned"}), AmAlert({"alertname": "Late"})
        delivery.submit([pending])
        assert delivery.abandon() == 1
        delivery.submit([late])  # an evaluation round that finished after the step-down
        assert delivery.pending_count == 0
        assert await delivery.aclose() == 0
        assert await listed(shared_am.url, "alertname=~Abandoned|Late") == {}

    run(scenario)


@pytest.mark.integration
def test_ha_pair_each_alertmanager_gets_every_alert(shared_am: RunningAlertmanager,
                                                    tmp_path: Path) -> None:
    port = free_port()
    second = f"http://127.0.0.1:{port}"

    async def scenario() -> None:
        delivery = fast_delivery([shared_am.url, second])
        task = asyncio.create_task(delivery.run())
        alert = AmAlert({"alertname": "Pair"})
        delivery.submit([alert])
        up, down = delivery.targets
        await wait_until(lambda: up.pending_count == 0 and down.failed_attempts_total >= 2)
        assert delivery.pending_count == 1  # not delivered until both have it
        assert alert.fingerprint in await listed(shared_am.url, "alertname=Pair")
        with ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running_alertmanager(tmp_path,
                                                                              port=port))
            await wait_until(lambda: delivery.pending_count == 0)
            assert alert.fingerprint in await listed(second, "alertname=Pair")
            assert up.delivered_total == down.delivered_total == 1
            await delivery.aclose()
            await task
            await asyncio.to_thread(stack.close)

    run(scenario)
