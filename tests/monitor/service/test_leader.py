"""Leadership against a real PostgreSQL: one active replica, a standby that takes over within a
poll when the active's session ends, an active that steps down when its session is killed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from monitor.collect.config import ConfigError, parse_config
from monitor.service.leader import Leadership, Role, SingleReplica, replica_for
from monitor.service.reload import restart_required
from monitor.stack.postgres import PostgresUnavailable, PrivatePostgres
from tests.integration import unavailable
from tests.monitor.store.databases import Database

POLL = 0.2
MARGIN = 1.5  # a loaded 2-core machine: threads and connections take their time


async def _until(condition: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``condition()`` holds; fails after ``timeout``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"not within {timeout} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def _with_two(url: str, scenario: Callable[[dict[str, Leadership],
                                                  dict[str, asyncio.Event]], Awaitable[None]]
                    ) -> None:
    replicas = {name: Leadership(url, replica_id=name, poll_seconds=POLL) for name in "ab"}
    stops = {name: asyncio.Event() for name in replicas}
    tasks = [asyncio.create_task(r.run(stops[n])) for n, r in replicas.items()]
    try:
        await scenario(replicas, stops)
    finally:
        for stop in stops.values():
            stop.set()
        await asyncio.gather(*tasks)


def _active(replicas: dict[str, Leadership]) -> list[str]:
    return [n for n, r in replicas.items() if r.role is Role.ACTIVE]


@pytest.mark.integration
def test_exactly_one_of_two_replicas_is_active_and_both_name_it(postgres: Database) -> None:
    async def scenario(replicas: dict[str, Leadership], _: dict[str, asyncio.Event]) -> None:
        await _until(lambda: len(_active(replicas)) == 1, 5.0)
        await asyncio.sleep(5 * POLL)  # and it stays so
        (active,) = _active(replicas)
        standby = next(n for n in replicas if n != active)
        assert replicas[standby].role is Role.STANDBY
        assert await asyncio.to_thread(replicas[standby].active_replica) == active
        assert replicas[active].active_replica() == active
        assert replicas[active].changes == 1 and replicas[standby].changes == 0

    asyncio.run(_with_two(postgres.url, scenario))


@pytest.mark.integration
def test_when_the_active_session_ends_the_standby_takes_over_within_a_poll(
        postgres: Database) -> None:
    async def scenario(replicas: dict[str, Leadership],
                       stops: dict[str, asyncio.Event]) -> None:
        await _until(lambda: len(_active(replicas)) == 1, 5.0)
        (active,) = _active(replicas)
        standby = next(n for n in replicas if n != active)
        stops[active].set()  # its run ends and closes the lock connection
        await _until(lambda: replicas[active].role is Role.STANDBY, 5.0)
        took = await _until(lambda: replicas[standby].role is Role.ACTIVE, POLL + MARGIN)
        assert took <= POLL + MARGIN
        assert replicas[standby].became_active.is_set()
        assert not replicas[standby].became_standby.is_set()

    asyncio.run(_with_two(postgres.url, scenario))


@pytest.mark.integration
def test_an_active_whose_session_is_killed_steps_down_and_the_other_takes_over(
        postgres: Database) -> None:
    async def scenario(replicas: dict[str, Leadership], _: dict[str, asyncio.Event]) -> None:
        await _until(lambda: len(_active(replicas)) == 1, 5.0)
        (active,) = _active(replicas)
        standby = next(n for n in replicas if n != active)
        await asyncio.to_thread(postgres.admin, "SELECT pg_terminate_backend(pid) FROM "
                                f"pg_stat_activity WHERE application_name = 'inferwatch:{active}'")
        await _until(lambda: replicas[active].role is Role.STANDBY, POLL + MARGIN)
        await _until(lambda: replicas[standby].role is Role.ACTIVE, POLL + MARGIN)
        await asyncio.sleep(5 * POLL)
        # The one that stepped down reconnected and competes again, as a standby.
        assert _active(replicas) == [standby]
        assert replicas[active].changes == 2  # became active, stepped down
        assert await asyncio.to_thread(replicas[active].active_replica) == standby

    asyncio.run(_with_two(postgres.url, scenario))


def test_on_in_memory_sqlite_the_one_replica_is_always_active() -> None:
    # A SQLite file has a file lock instead (tests/monitor/service/test_file_leader.py).
    replica = replica_for("sqlite://", replica_id="solo", poll_seconds=1.0)
    assert isinstance(replica, SingleReplica)
    assert replica.role is Role.ACTIVE and not replica.elected
    assert replica.active_replica() == "solo" and replica.changes == 0


def test_the_ha_section_is_read_and_applies_at_the_next_start() -> None:
    old = parse_config("targets: []\n", "inferwatch.yaml")
    new = parse_config("ha: {poll_seconds: 0.5, replica_id: monitor-a}\n", "inferwatch.yaml")
    assert (old.ha.poll_seconds, old.ha.replica_id) == (1.0, None)
    assert (new.ha.poll_seconds, new.ha.replica_id) == (0.5, "monitor-a")
    assert "ha" in restart_required(old, new)
    with pytest.raises(ConfigError, match="ha.poll_seconds"):
        parse_config("ha: {poll_seconds: 0}\n", "inferwatch.yaml")


@pytest.mark.integration
@pytest.mark.slow
def test_an_active_that_loses_the_database_holds_until_it_answers() -> None:
    """PostgreSQL stopped under the replicas: the active steps down and HOLDS (its collector
    scrapes on into its buffer) while nobody can hold the lock; once the server is back, one
    replica is active again and neither holds."""
    try:
        server = PrivatePostgres().start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))

    async def scenario(replicas: dict[str, Leadership], _: dict[str, asyncio.Event]) -> None:
        await _until(lambda: len(_active(replicas)) == 1, 5.0)
        (active,) = _active(replicas)
        standby = next(n for n in replicas if n != active)
        await asyncio.to_thread(server.stop_server)
        await _until(lambda: replicas[active].role is Role.STANDBY, POLL + MARGIN)
        await asyncio.sleep(5 * POLL)  # several failed polls: it holds on, the other never did
        assert replicas[active].holding and not replicas[standby].holding
        assert _active(replicas) == []
        await asyncio.to_thread(server.start_server)
        await _until(lambda: len(_active(replicas)) == 1, 5.0 + MARGIN)
        await _until(lambda: not replicas[active].holding, POLL + MARGIN)
        assert not replicas[standby].holding

    try:
        asyncio.run(_with_two(server.url, scenario))
    finally:
        server.close()
