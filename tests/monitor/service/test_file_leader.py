"""One writer per SQLite store (monitor/service/file_leader.py): of the processes on one
database file the one holding ``<database>.lock`` is active; the others stand by naming it,
say so once, and take over within a poll when it stops or is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.service.file_leader import FileLeadership, lock_path
from monitor.service.leader import Role, SingleReplica, replica_for
from monitor.stack.monitor_service import listening_url
from tests.monitor.api.test_serve import eventually, serve

POLL = 0.2
MARGIN = 1.5  # a loaded 2-core machine: threads take their time
PROCESS_MARGIN = 3.0  # and processes answering HTTP on it more (as tests/monitor/collect's)
STANDING_BY = "standing by: the SQLite store"


async def _until(probe: Callable[[], Any], timeout: float = 10.0) -> None:
    """The repo's ``eventually`` off the event loop, which runs the electors meanwhile."""
    await asyncio.to_thread(eventually, probe, timeout)


def _standby_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if STANDING_BY in r.getMessage()]


def test_a_sqlite_file_gets_a_file_lock_and_memory_a_single_replica(tmp_path: Path) -> None:
    replica = replica_for(f"sqlite:///{tmp_path / 'store.db'}", replica_id="a",
                          poll_seconds=1.0)
    assert isinstance(replica, FileLeadership) and replica.elected
    database = tmp_path.resolve() / "store.db"  # the URL's path, resolved
    assert replica.path == database.with_name("store.db.lock") == lock_path(database)
    assert replica.role is Role.STANDBY  # until its run takes the lock
    memory = replica_for("sqlite://", replica_id="solo", poll_seconds=1.0)
    assert isinstance(memory, SingleReplica) and memory.role is Role.ACTIVE


def test_the_second_elector_stands_by_naming_the_first_and_takes_over_within_a_poll(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    database = tmp_path / "store.db"
    first, second = (FileLeadership(database, replica_id=name, poll_seconds=POLL)
                     for name in ("first", "second"))

    async def scenario() -> None:
        stop_first, stop_second = asyncio.Event(), asyncio.Event()
        running_first = asyncio.create_task(first.run(stop_first))
        await _until(lambda: first.role is Role.ACTIVE)
        running_second = asyncio.create_task(second.run(stop_second))
        try:
            await _until(lambda: second.active_replica() == "first")
            assert second.role is Role.STANDBY and second.changes == 0
            assert first.active_replica() == "first"

            stop_first.set()  # its run ends and gives the lock up
            await running_first
            await _until(lambda: second.role is Role.ACTIVE, POLL + MARGIN)
            assert second.active_replica() == "second" and second.changes == 1
            assert second.became_active.is_set() and not second.became_standby.is_set()
        finally:
            stop_first.set()
            stop_second.set()
            await asyncio.gather(running_first, running_second)

    asyncio.run(scenario())
    (line,) = _standby_lines(caplog)
    assert "replica second: standing by" in line and "in use by replica first" in line
    assert str(database) in line and str(lock_path(database)) in line
    assert lock_path(database).read_text() == ""  # a clean stop names no holder


def test_a_standby_says_who_holds_the_store_once_however_often_it_polls(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    database = tmp_path / "store.db"
    first, second, third = (FileLeadership(database, replica_id=name, poll_seconds=POLL)
                            for name in ("first", "second", "third"))
    assert first._poll()
    assert not any(third._poll() for _ in range(5))
    assert len(_standby_lines(caplog)) == 1
    first.close()
    assert second._poll()  # a new holder: said again
    assert not any(third._poll() for _ in range(5))
    assert [("in use by replica first" in line, "in use by replica second" in line)
            for line in _standby_lines(caplog)] == [(True, False), (False, True)]
    second.close()


def test_an_active_whose_lock_file_is_replaced_steps_down_for_the_new_holder(
        tmp_path: Path) -> None:
    """Deleting or replacing the lock file lets another process lock a new one: the active
    notices at its next poll and stands by rather than write beside it."""
    database = tmp_path / "store.db"
    first = FileLeadership(database, replica_id="first", poll_seconds=POLL)
    other = FileLeadership(tmp_path / "elsewhere.db", replica_id="other")

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(first.run(stop))
        try:
            await _until(lambda: first.role is Role.ACTIVE)
            assert other._poll()  # it holds its own file, moved over the active's
            os.replace(other.path, lock_path(database))
            await _until(lambda: first.role is Role.STANDBY, POLL + MARGIN)
            assert first.active_replica() == "other"
        finally:
            stop.set()
            await running
            other.close()

    asyncio.run(scenario())


def test_a_lock_file_that_cannot_be_opened_keeps_the_replica_standing_by_saying_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    replica = FileLeadership(tmp_path / "missing" / "store.db", replica_id="a")
    assert not replica._poll() and not replica._poll()
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "cannot use the lock file" in error.getMessage()
    assert str(tmp_path / "missing" / "store.db.lock") in error.getMessage()
    assert replica.active_replica() is None


# --- real processes: `inferwatch serve` children (tests/monitor/api/test_serve.py) ---

def _config(tmp: Path, database: Path, replica_id: str) -> Path:
    config = tmp / f"{replica_id}.yaml"
    config.write_text(f'store: {{url: "sqlite:///{database}"}}\ntargets: []\n'
                      "anomaly: {enabled: false}\n"
                      f"ha: {{poll_seconds: {POLL}, replica_id: {replica_id}}}\n")
    return config


def _ha(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/api/v1/status/ha", timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _active(url: str) -> bool:
    return bool(_ha(url)["role"] == "active")


def _standing_by_behind(url: str, holder: str) -> dict[str, Any] | None:
    ha = _ha(url)
    return ha if ha["active_replica_id"] == holder else None


def _stop(proc: subprocess.Popen[str] | None) -> str:
    """SIGTERM unless it is gone already; what it printed."""
    if proc is None:
        return ""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return out


@pytest.mark.integration
def test_an_elector_stands_by_behind_a_serve_process_and_takes_over_when_it_is_killed(
        tmp_path: Path) -> None:
    database = tmp_path / "store.db"
    child = serve("--config", str(_config(tmp_path, database, "child")), "--port", "0")
    elector = FileLeadership(database, replica_id="here", poll_seconds=POLL)

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(elector.run(stop))
        try:
            await _until(lambda: elector.active_replica() == "child")
            assert elector.role is Role.STANDBY
            child.kill()  # SIGKILL: the kernel frees its lock as the process dies
            await _until(lambda: elector.role is Role.ACTIVE, POLL + PROCESS_MARGIN)
        finally:
            stop.set()
            await running

    try:
        url = listening_url(child)
        eventually(lambda: _active(url))  # it has the lock (taken just after listening)
        asyncio.run(scenario())
    finally:
        _stop(child)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.integration
@pytest.mark.slow
def test_a_second_serve_on_the_same_sqlite_file_stands_by_and_takes_over_from_a_kill_9(
        tmp_path: Path) -> None:
    """The issue's case: a second `inferwatch serve` on the same store (another port) is a
    standby that names the first on its API and, once, in its log; SIGKILL the first and the
    second is active within a poll."""
    database = tmp_path / "store.db"
    first = serve("--config", str(_config(tmp_path, database, "first")), "--port", "0")
    second: subprocess.Popen[str] | None = None
    try:
        url_first = listening_url(first)
        eventually(lambda: _active(url_first))
        second = serve("--config", str(_config(tmp_path, database, "second")), "--port", "0")
        url_second = listening_url(second)
        ha = eventually(lambda: _standing_by_behind(url_second, "first"))
        assert (ha["role"], ha["elected"], ha["leader_changes"]) == ("standby", True, 0)
        ready = httpx.get(f"{url_second}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["role"] == "standby"
        assert _ha(url_first)["role"] == "active"

        first.kill()  # SIGKILL
        eventually(lambda: _active(url_second), POLL + PROCESS_MARGIN)
        assert _ha(url_second)["active_replica_id"] == "second"
    finally:
        _stop(first)
        out = _stop(second)
    assert second is not None and second.returncode == 0, out
    assert out.count(STANDING_BY) == 1, out
    assert "replica second: standing by" in out and "in use by replica first (" in out, out
    assert "replica second is now active" in out, out
