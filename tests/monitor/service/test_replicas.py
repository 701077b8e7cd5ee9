"""Two `inferwatch serve` services on one PostgreSQL store, in process: the standby serves
reads (the active's alerts, its own readiness), refuses runs naming the active, says its role
on /metrics and /api/v1/status/ha, and takes over when the active stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import yaml

from exporters.sockets import free_port
from monitor.alerting.alertmanager import AmAlert
from monitor.collect.config import ConfigWatcher
from monitor.service.leader import Role
from monitor.service.process import MonitorService, ServeSettings
from monitor.slo.evaluator import AlertCondition
from monitor.store import open_store
from tests.monitor.store.databases import Database

TOKEN = "a-token-of-16-chars-or-more"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


POLL_SECONDS = 0.2


def _service(tmp_path: Path, url: str, replica_id: str,
             alertmanager_urls: list[str] | None = None) -> MonitorService:
    config = tmp_path / f"{replica_id}.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"url": url}, "targets": [],
        "alerting": {"evaluation_interval_seconds": 0.5,
                     "alertmanager_urls": alertmanager_urls or []},
        "anomaly": {"enabled": False},
        "ha": {"poll_seconds": POLL_SECONDS, "replica_id": replica_id}}), encoding="utf-8")
    store = open_store(url)
    store.migrate()
    return MonitorService(ConfigWatcher(config), [], store, ServeSettings(port=0, token=TOKEN))


@contextlib.asynccontextmanager
async def _running(service: MonitorService) -> AsyncIterator[tuple[str, asyncio.Event]]:
    stop, sock = asyncio.Event(), service.bind()
    urls: list[str] = []
    task = asyncio.create_task(service.run(stop, sock, urls.append))
    try:
        while not urls:
            await asyncio.sleep(0.01)
        yield urls[0], stop
    finally:
        stop.set()
        await task
        sock.close()
        service.store.close()


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.05)


@pytest.mark.integration
@pytest.mark.slow
def test_the_standby_serves_reads_refuses_runs_and_takes_over(postgres: Database,
                                                                tmp_path: Path) -> None:
    a, b = (_service(tmp_path, postgres.url, name) for name in ("replica-a", "replica-b"))

    async def scenario() -> None:
        async with _running(a) as (url_a, stop_a), _running(b) as (url_b, stop_b), \
                httpx.AsyncClient(timeout=10.0) as http:
            await _until(lambda: Role.ACTIVE in (a.replica.role, b.replica.role))
            await asyncio.sleep(0.5)
            active, standby = (a, b) if a.replica.role is Role.ACTIVE else (b, a)
            assert standby.replica.role is Role.STANDBY
            url_active, url_standby = (url_a, url_b) if active is a else (url_b, url_a)

            ha = (await http.get(f"{url_standby}/api/v1/status/ha")).json()
            assert ha["role"] == "standby" and ha["elected"] is True
            assert ha["active_replica_id"] == active.replica.replica_id
            assert ha["poll_seconds"] == 0.2

            ready = await http.get(f"{url_standby}/readyz")
            assert ready.status_code == 200 and ready.json()["role"] == "standby"

            refused = await http.post(f"{url_standby}/api/v1/sweeps", headers=AUTH, json={
                "url": "http://127.0.0.1:9", "model": "tiny"})
            assert refused.status_code == 503
            assert active.replica.replica_id in refused.json()["error"]["message"]

            metrics = (await http.get(f"{url_active}/metrics")).text
            assert "inferwatch_ha_is_active 1.0" in metrics
            assert 'inferwatch_ha_role{role="active"} 1.0' in metrics
            assert 'inferwatch_snapshots_rejected_total{reason="overlap"} 0.0' in metrics
            metrics = (await http.get(f"{url_standby}/metrics")).text
            assert 'inferwatch_ha_role{role="standby"} 1.0' in metrics

            # What the active decides, the standby shows (read from the store each poll).
            condition = AlertCondition({"alertname": "Test", "slo": "x"}, {}, True, 0.0, 1.0)
            await asyncio.to_thread(active.alerting.book.update, time.time(), [condition])

            async def standby_alerts() -> list[str]:
                body = (await http.get(f"{url_standby}/api/v1/alerts")).json()
                return [item["labels"]["alertname"] for item in body["items"]]

            deadline = time.monotonic() + 5.0
            while await standby_alerts() != ["Test"]:
                assert time.monotonic() < deadline, "the standby never showed the alert"
                await asyncio.sleep(0.1)

            # The active stops: the standby takes over within about a poll.
            (stop_a if active is a else stop_b).set()
            await _until(lambda: standby.replica.role is Role.ACTIVE, 5.0)
            ha = (await http.get(f"{url_standby}/api/v1/status/ha")).json()
            assert ha["role"] == "active"
            assert ha["active_replica_id"] == standby.replica.replica_id
            assert ha["leader_changes"] == 1
            # It reloaded the book: the alert the other decided is its own now.
            assert [al.name for al in standby.alerting.book.alerts()] == ["Test"]

    asyncio.run(scenario())


@pytest.mark.integration
@pytest.mark.slow
def test_an_active_cut_from_its_lock_steps_down_and_serves_on_as_a_standby(
        postgres: Database, tmp_path: Path) -> None:
    a, b = (_service(tmp_path, postgres.url, name) for name in ("replica-a", "replica-b"))

    async def scenario() -> None:
        async with _running(a) as (url_a, _), _running(b) as (url_b, _), \
                httpx.AsyncClient(timeout=10.0) as http:
            await _until(lambda: Role.ACTIVE in (a.replica.role, b.replica.role))
            active, standby = (a, b) if a.replica.role is Role.ACTIVE else (b, a)
            await _until(lambda: active.live.collector is not None)
            await asyncio.to_thread(
                postgres.admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE application_name = 'inferwatch:{active.replica.replica_id}'")
            await _until(lambda: standby.replica.role is Role.ACTIVE, 5.0)
            await _until(lambda: active.replica.role is Role.STANDBY, 5.0)
            # Its duties stopped: no collector, no writes; it answers as a standby.
            await _until(lambda: active.live.collector is None and not active.recorder.active)
            url = url_a if active is a else url_b
            ha = (await http.get(f"{url}/api/v1/status/ha")).json()
            assert ha["role"] == "standby" and ha["leader_changes"] == 2
            assert ha["active_replica_id"] == standby.replica.replica_id
            assert (await http.get(f"{url}/readyz")).status_code == 200
            assert standby.live.collector is not None and standby.recorder.active

    asyncio.run(scenario())


@pytest.mark.integration
@pytest.mark.slow
def test_an_active_cut_from_its_lock_sends_nothing_after_its_next_poll(
        postgres: Database, tmp_path: Path) -> None:
    """The split-brain window: once its lock check fails (within a poll), the old active drops
    its undelivered alerts and ignores its last rounds; the new active announces them all."""
    down = [f"http://127.0.0.1:{free_port()}"]  # nothing listens: alerts stay pending
    a, b = (_service(tmp_path, postgres.url, name, down) for name in ("replica-a", "replica-b"))

    async def scenario() -> None:
        async with _running(a), _running(b):
            await _until(lambda: Role.ACTIVE in (a.replica.role, b.replica.role))
            active, standby = (a, b) if a.replica.role is Role.ACTIVE else (b, a)
            await _until(lambda: active.live.collector is not None)
            condition = AlertCondition({"alertname": "Test", "slo": "x"}, {}, True, 0.0, 1.0)
            await asyncio.to_thread(active.alerting.book.update, time.time(), [condition])
            delivery = active.alerting.delivery
            assert delivery is not None
            await _until(lambda: delivery.pending_count > 0)
            await asyncio.to_thread(
                postgres.admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE application_name = 'inferwatch:{active.replica.replica_id}'")
            await _until(lambda: active.replica.role is Role.STANDBY, POLL_SECONDS + 0.3)
            assert delivery.pending_count == 0
            delivery.submit([AmAlert({"alertname": "Late"})])  # a round still in flight
            assert delivery.pending_count == 0
            await _until(lambda: standby.replica.role is Role.ACTIVE, 5.0)
            # The new active sends every announced alert again.
            assert standby.alerting.delivery is not None
            await _until(lambda: standby.alerting.delivery is not None
                         and standby.alerting.delivery.pending_count > 0)

    asyncio.run(scenario())
