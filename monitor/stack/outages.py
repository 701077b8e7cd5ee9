"""Outages of what the replicas depend on, in the middle of an incident: PostgreSQL restarted
under them, and Alertmanager down. Shared by their tests (tests/monitor/stack/test_outages.py)
and bench/outages.py; the stack is monitor/stack/failover.py's.

PostgreSQL restarted: the page fired and was notified; the server is stopped (every session
ends: the active loses its lock and HOLDS, scraping on into its buffer), stays down
``down_seconds`` and starts again. Exactly one replica must become active again, neither may
crash, the snapshots scraped while the server was down must reach the store, and the page
must still be notified once (firing and resolved).

Alertmanager down: it is stopped before the fault, stays down ``down_seconds`` while the page
fires inside the replicas (their deliveries retry with backoff), then starts again on its
port: the page must arrive then, once, and its resolve after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from monitor.stack.failover import SCRAPE_SECONDS, SLO_NAME, FailoverStack, ScenarioError
from monitor.stack.postgres import PrivatePostgres

TARGET: Final = "reference-0"

_RAW_ENDS: Final = ("SELECT count(*) FROM intervals i JOIN targets t ON t.id = i.target_id "
                    "WHERE t.name = :target AND i.resolution = 0 "
                    "AND i.end_time > :down AND i.end_time < :up")


@dataclass(frozen=True)
class OutageTrial:
    down_seconds: float      # how long the dependency was away
    recovered_seconds: float  # it returned -> one replica active (PostgreSQL) / page (AM)
    firing: int              # firing notifications of the page
    resolved: int            # resolved notifications of the page
    others: int              # notifications of any other alert
    snapshots_in_outage: int  # raw snapshots stored ending while PostgreSQL was down
    replicas_alive: int      # replicas still running at the end

    @property
    def lost(self) -> int:
        return int(self.firing == 0) + int(self.resolved == 0)

    @property
    def duplicated(self) -> int:
        return max(self.firing - 1, 0) + max(self.resolved - 1, 0) + self.others


def _alive(stack: FailoverStack) -> int:
    return sum(r.service is not None and r.service.child.alive() for r in stack.replicas)


def _one_active_for(stack: FailoverStack, seconds: float) -> None:
    """Exactly one replica says it is active, and stays so for ``seconds`` (raises on two)."""
    first = stack.active()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stack.active() is not first:
            raise ScenarioError(f"the active changed from {first.replica_id} unasked")
        time.sleep(0.2)


def restart_postgres(stack: FailoverStack, server: PrivatePostgres, down_seconds: float, *,
                     say: Callable[[str], None] = lambda _s: None) -> OutageTrial:
    started = time.monotonic()

    def note(what: str) -> None:
        say(f"[{time.monotonic() - started:5.1f} s] {what}")

    before_page, before_other = len(stack.page_notices()), len(stack.other_notices())
    stack.start_incident()
    note("fault injected; page notified")
    down_at = time.time()
    server.restart(down_seconds)
    up_at = time.time()
    note(f"PostgreSQL stopped and started again ({up_at - down_at:.1f} s down)")
    stack.active(timeout=60.0)
    recovered = time.time() - up_at
    note(f"{stack.active().replica_id} active {recovered:.2f} s after PostgreSQL returned")
    _one_active_for(stack, 3.0)
    # The holder's buffer is written with the writer's backoff (1, 2, 4... s) after the outage.
    expected = max(1, int(0.5 * down_seconds / SCRAPE_SECONDS))
    stored = 0
    deadline = time.monotonic() + 60.0
    while stored < expected and time.monotonic() < deadline:
        stored = int(server.sql(_RAW_ENDS, target=TARGET, down=down_at, up=up_at)[0][0])
        time.sleep(0.5)
    note(f"{stored} snapshots of the outage stored")
    firing, resolved, others = stack.resolve(before_page, before_other, note)
    trial = OutageTrial(up_at - down_at, recovered, firing, resolved, others, stored,
                        _alive(stack))
    note(f"resolve notified; {trial}")
    return trial


def alertmanager_down(stack: FailoverStack, down_seconds: float, *,
                      say: Callable[[str], None] = lambda _s: None) -> OutageTrial:
    started = time.monotonic()

    def note(what: str) -> None:
        say(f"[{time.monotonic() - started:5.1f} s] {what}")

    before_page, before_other = len(stack.page_notices()), len(stack.other_notices())
    stack.stop_alertmanager()
    down_at = time.monotonic()
    stack.start_incident(page=False)
    note("Alertmanager stopped; fault injected")
    _wait_for_firing(stack, 60.0)
    note("the page fires in the active replica (Alertmanager still down)")
    time.sleep(max(0.0, down_at + down_seconds - time.monotonic()))
    if stack.page_notices()[before_page:]:
        raise ScenarioError("a notification came while Alertmanager was down")
    up_at = time.monotonic()  # its start counts: the retries may reach it before it is ready
    stack.restart_alertmanager()
    note(f"Alertmanager started again after {up_at - down_at:.0f} s")
    stack.wait_until(lambda: any(n.status == "firing" for n in stack.page_notices()[before_page:]),
                90.0, "the page was not notified after Alertmanager returned")
    recovered = time.monotonic() - up_at
    note(f"page notified {recovered:.1f} s after Alertmanager returned")
    firing, resolved, others = stack.resolve(before_page, before_other, note)
    trial = OutageTrial(up_at - down_at, recovered, firing, resolved, others, 0, _alive(stack))
    note(f"resolve notified; {trial}")
    return trial


def _wait_for_firing(stack: FailoverStack, timeout: float) -> None:
    def firing() -> bool:
        alerts = stack.alerts(stack.active())
        return any(a["labels"].get("slo") == SLO_NAME and a.get("state") == "firing"
                   for a in alerts)

    stack.wait_until(firing, timeout, "the page did not fire in the active replica")


__all__ = ["OutageTrial", "alertmanager_down", "restart_postgres"]
