"""Anomaly detection and the stored canary judgement, two sources, the same traffic: what
`inferwatch serve` decides from VictoriaMetrics (targets with ``promql_selector``, read by
PromQLTargetSource) equals what it decides from its own scrapes of the same engines.

Three simulated engines (tests/exporters/schema_engines.py) run 40 steps of 15 s; from step
31 one of them answers first tokens five times slower and refuses 60% of its requests.
Time is driven, not waited for: each step's pages are scraped by the embedded scraper at the
step's end and imported into a real VictoriaMetrics two seconds before it (the scrape engine's
own timestamp), an hour in the past; the PromQL source reads each window 30 s late
(``promql_delay_seconds``), as serve does. Each store holds what serve's recorder had written
by each evaluation round, and the evaluation loop serve builds from each config (the anomaly
monitor, the alert book) runs its rounds, the first replaying the history as at a start.

Asserted: every window's snapshot is the same both ways (histogram sums to VictoriaMetrics'
precision); every round's anomaly states and alerts are the same, the alerts' times 30 s later
from VictoriaMetrics (its minutes close the PromQL delay later: MonitorConfig.settle_seconds);
the faulty engine pages once and nothing else alerts; the canary judgement of the faulty
engine against a healthy one fails, of two healthy ones passes, the same on both stores.
Elsewhere: SLO statuses (test_sharded_slo_equivalence.py, which also covers normalization by
vmagent and vmalert; the pages here are in the schema already)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from monitor.alerting.alertmanager import AmAlert
from monitor.anomaly.monitor import ANOMALY_ALERT
from monitor.canary.config import load_judge_config
from monitor.canary.judge import Outcome
from monitor.canary.run import judge_stored
from monitor.collect.config import MonitorConfig
from monitor.collect.snapshot import Snapshot, TargetState
from monitor.collect.sources import source_for
from monitor.service.evaluation import evaluation_loop
from monitor.stack.processes import Service
from monitor.stack.victoriametrics import start_victoria_metrics, victoria_metrics_binaries
from monitor.store import Store, open_store
from tests.exporters.schema_engines import Fault, SchemaEngines, serving
from tests.integration import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NUM_ENGINES: Final = 3
FAULT: Final = Fault(faulty=2, fault_step=31)
NUM_STEPS: Final = 40
FIRST_ROUND: Final = 30  # the anomaly monitor's first tick replays the steps before
ROUND_STEPS: Final = 2  # serve's evaluation interval, in steps
STEP: Final = 15.0
SCRAPE_OFFSET: Final = 2.0  # the scrape engine's samples are stamped this long before the end
JOB: Final = "schema-engines"
PATHS: Final = ("embedded", "victoria-metrics")


@pytest.fixture(scope="module")
def victoria_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    binaries = victoria_metrics_binaries()
    if binaries is None:
        unavailable("victoria-metrics is not installed (apt-get install victoria-metrics)")
    vm = start_victoria_metrics(binaries["victoria-metrics"],
                                tmp_path_factory.mktemp("victoria-metrics"))
    try:
        yield vm
    finally:
        vm.stop()


def configs(engines_url: str, vm_url: str) -> dict[str, MonitorConfig]:
    """inferwatch.yaml both ways: the same targets, scraped or read from VictoriaMetrics."""
    # Paging on tokens/s is the operator's choice (anomalies are tickets by default): on here.
    common = {"defaults": {"scrape_interval_seconds": STEP},
              "anomaly": {"step_seconds": STEP, "page_on": ["tokens_per_second"]},
              "alerting": {"evaluation_interval_seconds": STEP * ROUND_STEPS}}
    names = [f"engine-{i}" for i in range(NUM_ENGINES)]
    return {
        "embedded": MonitorConfig.model_validate({**common, "targets": [
            {"name": n, "url": f"{engines_url}/{n}/metrics"} for n in names]}),
        "victoria-metrics": MonitorConfig.model_validate({**common, "targets": [
            {"name": n, "url": vm_url, "promql_selector": f'job="{JOB}",instance="{n}"'}
            for n in names]}),
    }


@dataclass(frozen=True)
class Traffic:
    """Each path's snapshots per step (step 0: the first reading), and the steps' end times."""

    snapshots: dict[str, list[list[Snapshot]]]
    ends: list[float]


def run_traffic(vm_url: str, every: dict[str, MonitorConfig], engines: SchemaEngines,
                t0: float) -> Traffic:
    ends = [t0 + STEP * k for k in range(NUM_STEPS + 1)]

    async def go() -> dict[str, list[list[Snapshot]]]:
        async with httpx.AsyncClient(timeout=10) as client:
            sources = {path: [source_for(t, lambda: client, lambda: 10 * 2**20)
                              for t in config.targets] for path, config in every.items()}
            scraped = []
            for k, end in enumerate(ends):
                if k:
                    engines.advance()
                await _import_pages(client, vm_url, engines, end - SCRAPE_OFFSET)
                start = ends[k - 1] if k else None
                scraped.append(list(await asyncio.gather(
                    *(s.snapshot(start, end) for s in sources["embedded"]))))
            (await client.get(f"{vm_url}/internal/force_flush")).raise_for_status()
            delay = every["victoria-metrics"].targets[0].promql_delay_seconds
            read = []
            for k, end in enumerate(ends):  # each window read `delay` after it ends
                start = ends[k - 1] + delay if k else None
                read.append(list(await asyncio.gather(
                    *(s.snapshot(start, end + delay) for s in sources["victoria-metrics"]))))
            return {"embedded": scraped, "victoria-metrics": read}

    return Traffic(asyncio.run(go()), ends)


async def _import_pages(client: httpx.AsyncClient, vm_url: str, engines: SchemaEngines,
                        at: float) -> None:
    for index in range(NUM_ENGINES):
        response = await client.post(
            f"{vm_url}/api/v1/import/prometheus", content=engines.page(index).encode(),
            params={"timestamp": str(round(at * 1000)),
                    "extra_label": [f"job={JOB}", f"instance=engine-{index}"]})
        response.raise_for_status()


@dataclass(frozen=True)
class Round:
    """What one evaluation round decided, times relative to the round's ``now``."""

    anomalies: dict[str, tuple[Any, ...]]
    sent: list[tuple[Any, ...]]


def evaluate(config: MonitorConfig, ends: list[float], snapshots: list[list[Snapshot]],
             store: Store, lag: float) -> list[Round]:
    """A round per step at the step's end plus the settle time, the store holding what serve's
    recorder had written by then: windows that arrived ``lag`` after their end."""
    loop = evaluation_loop(config, store, [])  # SLOs: test_sharded_slo_equivalence.py
    assert loop.anomalies is not None
    pending = list(zip(ends, snapshots, strict=True))
    rounds = []
    for end in ends[FIRST_ROUND::ROUND_STEPS]:
        now = end + config.settle_seconds
        arrived = [snaps for window_end, snaps in pending if window_end + lag <= now]
        pending = pending[len(arrived):]
        store.write([s for snaps in arrived for s in snaps])
        sent = loop.evaluate(now)
        rounds.append(Round(
            {t: (s.level, s.score, sorted(s.active)) for t, s in loop.anomalies.states.items()},
            [_relative(alert, now) for alert in sent]))
    return rounds


def _relative(alert: AmAlert, now: float) -> tuple[Any, ...]:
    assert alert.starts_at is not None and alert.ends_at is not None
    return (dict(alert.labels), dict(alert.annotations),
            alert.starts_at.timestamp() - now, alert.ends_at.timestamp() - now)


def assert_same_snapshots(traffic: Traffic) -> None:
    scraped, read = traffic.snapshots["embedded"], traffic.snapshots["victoria-metrics"]
    for a, b in zip(scraped[0], read[0], strict=True):  # the first reading: its gauges
        assert (a.state, b.state) == (TargetState.FIRST, TargetState.FIRST)
        assert (b.start, b.end, b.gauges) == (a.start, a.end, a.gauges), a.target
        assert a.gauges and not b.counters and not b.histograms
    for ours, theirs in zip(scraped[1:], read[1:], strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert (a.state, b.state) == (TargetState.UP, TargetState.UP), b.error
            assert (b.start, b.end) == (a.start, a.end)
            assert b.counters == a.counters, a.target
            assert b.gauges == a.gauges, a.target
            assert {k: replace(h, sum=0.0) for k, h in b.histograms.items()} \
                == {k: replace(h, sum=0.0) for k, h in a.histograms.items()}, a.target
            # VictoriaMetrics stores a float as a decimal of about 12 significant digits: a
            # histogram's running sum (thousands of seconds here) comes back rounded at about
            # 1e-9 s, and so does a window's increase of it. Counts are exact.
            for key, h in a.histograms.items():
                assert b.histograms[key].sum == pytest.approx(h.sum, rel=0, abs=1e-8), key


def pages(rounds: list[Round]) -> set[tuple[str, float]]:
    """(target, start) of each anomaly page sent firing; a resend keeps its start."""
    return {(labels["target"], starts + k * STEP * ROUND_STEPS)
            for k, r in enumerate(rounds) for labels, _, starts, ends in r.sent
            if labels["alertname"] == ANOMALY_ALERT and labels["severity"] == "page"
            and ends > 0}


def test_anomalies_and_canaries_from_victoria_metrics_equal_the_embedded_collectors(
        victoria_metrics: Service, tmp_path: Path) -> None:
    engines = SchemaEngines(NUM_ENGINES, FAULT)
    t0 = math.floor((time.time() - 3600) / 60) * 60  # an hour ago: history, not live
    with serving(engines) as engines_url:
        every = configs(engines_url, victoria_metrics.url)
        traffic = run_traffic(victoria_metrics.url, every, engines, t0)
    assert_same_snapshots(traffic)

    delay = every["victoria-metrics"].targets[0].promql_delay_seconds
    assert every["victoria-metrics"].settle_seconds == every["embedded"].settle_seconds + delay
    stores = {path: open_store(f"sqlite:///{tmp_path / f'{path}.db'}") for path in PATHS}
    try:
        for store in stores.values():
            store.migrate()
        rounds = {path: evaluate(every[path], traffic.ends, traffic.snapshots[path],
                                 stores[path], lag=delay if path == "victoria-metrics" else 0.0)
                  for path in PATHS}
        # Times are relative to each round's now: from VictoriaMetrics every alert starts
        # (and is resent, and ends) `delay` later, all else the same.
        for k, (ours, theirs) in enumerate(zip(*rounds.values(), strict=True)):
            assert theirs == ours, f"round {k + 1}"
        faulty = f"engine-{FAULT.faulty}"
        assert [target for target, _ in pages(rounds["embedded"])] == [faulty]
        assert {alert[0]["target"] for r in rounds["embedded"] for alert in r.sent} == {faulty}

        config = load_judge_config(None)
        start, end = traffic.ends[FAULT.fault_step - 1], traffic.ends[-1]
        for canary, outcome in ((faulty, Outcome.FAIL), ("engine-1", Outcome.PASS)):
            judged = {path: judge_stored(store, "engine-0", canary, start, end, STEP, config)
                      for path, store in stores.items()}
            assert judged["embedded"].judgement.outcome is outcome, \
                judged["embedded"].judgement.format()
            assert judged["victoria-metrics"].to_json() == judged["embedded"].to_json()
    finally:
        for store in stores.values():
            store.close()
