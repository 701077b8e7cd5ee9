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

from monitor.collect.config import ConfigWatcher
from monitor.service.leader import Role
from monitor.service.process import MonitorService, ServeSettings
from monitor.slo.evaluator import AlertCondition
from monitor.store import open_store
from tests.monitor.store.databases import Database

TOKEN = "a-token-of-16-chars-or-more"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _service(tmp_path: Path, url: str, replica_id: str) -> MonitorService:
    config = tmp_path / f"{replica_id}.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"url": url}, "targets": [],
        "alerting": {"evaluation_interval_seconds": 0.5},
        "anomaly": {"enabled": False},
        "ha": {"poll_seconds": 0.2, "replica_id": replica_id}}), encoding="utf-8")
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
