"""The demo's fault: when, how long, how strong, and a refusal said plainly."""

import asyncio

import httpx
import pytest

from monitor.stack.faults import FaultError, FaultPlan, inject
from monitor.stack.receiver import AlertReceiver


@pytest.mark.parametrize("run_seconds, at, duration", [
    (600, 210, 60), (120, 42, 30), (300, 105, 30), (1200, 420, 60)],
    ids=["default-10-min", "2-min", "5-min", "20-min"])
def test_by_default_the_fault_comes_at_35_percent_for_a_tenth_of_the_run(run_seconds, at,
                                                                          duration):
    plan = FaultPlan.for_run("error_rate", run_seconds)
    assert (plan.at_seconds, plan.duration_seconds, plan.value) == pytest.approx(
        (at, duration, 0.5))


def test_what_is_given_wins_over_the_defaults():
    plan = FaultPlan.for_run("latency", 70, at_seconds=20, duration_seconds=25, value=0.2)
    assert plan == FaultPlan("latency", 0.2, 20, 25)
    assert plan.describe() == "latency 0.2 for 25 s"
    assert plan.body() == {"kind": "latency", "value": 0.2, "duration_seconds": 25}
    assert FaultPlan.for_run("stall", 600).describe() == "stall for 60 s"


@pytest.mark.parametrize("kind, at, duration", [("meltdown", 1, 1), ("latency", -1, 1),
                                                ("latency", 1, 0)],
                         ids=["unknown-kind", "before-the-start", "no-duration"])
def test_a_fault_that_cannot_be_is_refused(kind, at, duration):
    with pytest.raises(ValueError):
        FaultPlan(kind, 0.1, at, duration)


def test_a_server_that_refuses_the_fault_is_a_fault_error():
    server = AlertReceiver().start()  # a real HTTP server without /admin/faults: 404
    plan = FaultPlan.for_run("error_rate", 600)

    async def attempt() -> None:
        async with httpx.AsyncClient() as client:
            await inject(client, server.url, "token", plan)

    try:
        with pytest.raises(FaultError, match=r"POST http://127.0.0.1:\d+/admin/faults: 404"):
            asyncio.run(attempt())
    finally:
        server.stop()
