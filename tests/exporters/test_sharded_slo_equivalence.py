"""One SLO, two sources, the same traffic: the monitor's evaluator on snapshots read back from
VictoriaMetrics (vmagent shards + vmalert's recording rules, PromQLTargetSource) gives the
status it gives on the embedded collector's own scrapes of the same engines (ScrapeSource).

The engines' counters are frozen at both ends of the window and storage has caught up with
them before each end is taken, so both paths see exactly the same increases: any difference
is one of normalization (relabeling and rules vs the bridge) or of reading."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from monitor.collect.config import TargetConfig
from monitor.collect.snapshot import Snapshot, TargetState
from monitor.collect.sources import PromQLTargetSource, ScrapeSource, TargetSource
from monitor.slo.evaluator import SloEvaluator, SloStatus
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.stack.alertmanager import alertmanager_binary
from monitor.stack.victoriametrics import victoria_metrics_binaries
from monitor.store import open_store
from tests.exporters.sharded_stack import (
    ShardedStack,
    running_sharded_stack,
    storage_lag,
    wait_until,
)
from tests.integration import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NUM_ENGINES = 3
FAULTY = 1
SLO = Slo.model_validate({"name": "availability", "objective": 0.99, "window": "1d",
                          "sli": {"kind": "availability", "errors": ["rejected"]}})


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardedStack]:
    binaries, alertmanager = victoria_metrics_binaries(), alertmanager_binary()
    if binaries is None or alertmanager is None:
        unavailable("victoria-metrics (vmagent, vmalert) or Alertmanager is not installed "
                    "(apt-get install victoria-metrics prometheus-alertmanager)")
    workdir: Path = tmp_path_factory.mktemp("equivalence")
    with running_sharded_stack(workdir, NUM_ENGINES, binaries, alertmanager) as running:
        yield running


def sources(stack: ShardedStack) -> dict[str, list[TargetSource]]:
    """Per path, one source per engine, under the same target names."""
    def http() -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=10)

    addresses = stack.fleet.addresses
    embedded: list[TargetSource] = [
        ScrapeSource(TargetConfig(name=f"engine-{i}", url=f"http://{a}/metrics",
                                  engine="vllm"), http, lambda: 10 * 2**20)
        for i, a in enumerate(addresses)]
    via_vm: list[TargetSource] = [
        PromQLTargetSource(TargetConfig(name=f"engine-{i}", url=stack.victoria_metrics_url,
                                        promql_selector=f'job="vllm", instance="{a}"',
                                        promql_delay_seconds=0), http)
        for i, a in enumerate(addresses)]
    return {"embedded": embedded, "victoria-metrics": via_vm}


def take(every: dict[str, list[TargetSource]], start: float | None,
         end: float) -> dict[str, list[Snapshot]]:
    async def go(path_sources: list[TargetSource]) -> list[Snapshot]:
        return list(await asyncio.gather(*(s.snapshot(start, end) for s in path_sources)))

    return {path: asyncio.run(go(path_sources)) for path, path_sources in every.items()}


def settled(stack: ShardedStack) -> tuple[int, float]:
    """Freeze the engines and wait until storage holds their pages: (the tick, the time)."""
    tick = stack.fleet.freeze()
    wait_until(lambda: storage_lag(stack, tick), 30)
    return tick, time.time()


def evaluate(snapshots: list[Snapshot], store_path: Path, now: float) -> SloStatus:
    store = open_store(f"sqlite:///{store_path}")
    try:
        store.migrate()
        store.write(snapshots)
        (status,) = SloEvaluator([SLO], StoreSliSource(store), settle_seconds=0).tick(now)
        return status
    finally:
        store.close()


def test_the_slo_status_from_victoria_metrics_equals_the_embedded_collectors(
        stack: ShardedStack, tmp_path: Path) -> None:
    every = sources(stack)
    tick0, t0 = settled(stack)
    first = take(every, None, t0)
    assert {s.state for path in first.values() for s in path} == {TargetState.FIRST}
    stack.fleet.thaw()
    stack.fleet.start_fault(FAULTY)
    time.sleep(6)
    tick1, t1 = settled(stack)
    window = take(every, t0, t1)
    stack.fleet.thaw()

    embedded, via_vm = window["embedded"], window["victoria-metrics"]
    for ours, theirs in zip(embedded, via_vm, strict=True):
        assert (ours.state, theirs.state) == (TargetState.UP, TargetState.UP), theirs.error
        assert theirs.counters == ours.counters, ours.target
        assert theirs.histograms == ours.histograms, ours.target

    now = t1 + 1
    statuses = {path: evaluate(snaps, tmp_path / f"{path}.db", now)
                for path, snaps in window.items()}
    scraped, stored = statuses["embedded"], statuses["victoria-metrics"]
    # Worked out from the pages: every engine finished 10 requests a tick, the faulty one
    # also rejected 50 a tick since the fault.
    traffic = stack.fleet.traffic
    rejected = traffic.rejections(FAULTY, tick1) - traffic.rejections(FAULTY, tick0)
    events = NUM_ENGINES * traffic.requests_per_tick * (tick1 - tick0) + rejected
    assert rejected > 0
    assert scraped.events == stored.events == events
    assert math.isclose(scraped.sli, 1 - rejected / events)
    assert stored.sli == scraped.sli
    assert stored.budget_remaining == scraped.budget_remaining
    assert stored.burn_rates == scraped.burn_rates
    assert stored.state == scraped.state
    assert stored.conditions == scraped.conditions
