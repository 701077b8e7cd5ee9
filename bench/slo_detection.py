"""End to end: fault injected into the reference server -> page in a real Alertmanager.

    python -m bench.slo_detection [--rate 3] [--scrape-interval 5]

Starts the reference server (fault injection on), a real Alertmanager, the collector into a
SQLite store, the SLO evaluator with its alert book, and a steady Poisson load. Two SLOs, both
99.9% over 30 days with the workbook's windows: availability, and TTFT <= 250 ms.

The workbook's detection time assumes every window is full of steady traffic (with less
history, the 6h/30m page would fire first, its 6 h window holding only what there is), so
after a clean phase the store is given six hours of history at the rate the clean phase
measured (the same per-interval counts, written as earlier scrapes) before the evaluator
starts. Then, with the evaluator running:

1. clean: no page may be raised;
2. 100% errors injected: time until the availability page is active in Alertmanager;
3. errors cleared, then every engine step slowed so TTFT passes 250 ms: time until the TTFT
   page is active.

Each measured time is printed beside the workbook's: budget_consumed x period x (1 -
objective) / error ratio (51.8 s for a 2% / 1 h page at 99.9%), plus one scrape interval.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from monitor.alerting.alertmanager import AlertmanagerClient
from monitor.alerting.book import AlertBook
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from bench.stack import collecting, sqlite_store
from monitor.demo import reference_server
from monitor.loadgen import RequestSpec, send_requests
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT, burn_windows
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState
from monitor.store import Selector, Store, window
from monitor.store.models import RAW_RESOLUTION, Interval
from sqlalchemy import func, select

TARGET = "reference-0"
AVAILABILITY = Slo.model_validate({
    "name": "e2e-availability", "service": "chat", "objective": 0.999,
    "sli": {"kind": "availability"}})
TTFT = Slo.model_validate({
    "name": "e2e-ttft", "service": "chat", "objective": 0.999,
    "sli": {"kind": "latency", "metric": "ttft", "threshold_seconds": 0.25}})
HISTORY_SECONDS = 6 * 3600.0  # the longest page window (6h/30m) full, as the workbook assumes


@dataclass(frozen=True, slots=True)
class Detection:
    slo: str
    fault: str
    measured_seconds: float
    paged_windows: str
    theoretical_seconds: float  # workbook detection time + one scrape interval
    events_in_long_window: float  # at injection: the 1 h window should hold 1 h of traffic


@dataclass(frozen=True, slots=True)
class Result:
    clean_pages: list[str]
    detections: list[Detection]
    requests_per_second: float


async def run(*, alertmanager_url: str, rate: float = 3.0, scrape_interval: float = 5.0,
              evaluation_interval: float = 2.0, clean_seconds: float = 45.0,
              clean_check_seconds: float = 20.0, fault_timeout: float = 180.0,
              workdir: Path) -> Result:
    token = secrets.token_hex(8)
    with reference_server(["--enable-fault-injection", "--admin-token", token,
                           "--num-threads", "1"], 180.0) as base_url, \
            sqlite_store(workdir / "e2e.db") as store:
        async with _steady_load(base_url, rate), \
                collecting(store, TARGET, base_url, scrape_interval, "e2e") as stop:
            tasks: list[asyncio.Task[None]] = []
            try:
                await asyncio.sleep(clean_seconds)
                measured_rate = _seed_history(store, time.time() - clean_seconds)
                slos = [AVAILABILITY, TTFT]
                loop = AlertingLoop(
                    SloEvaluator(slos, StoreSliSource(store),
                                 settle_seconds=2 * scrape_interval),
                    AlertBook(store, resend_seconds=30), AlertDelivery(alertmanager_url),
                    interval_seconds=evaluation_interval)
                tasks.append(asyncio.create_task(loop.run(stop)))
                am = AlertmanagerClient(alertmanager_url)
                await asyncio.sleep(clean_check_seconds)
                clean_pages = [a.labels["slo"]
                               for a in await am.list_alerts([f"alertname={BURN_ALERT}"])]
                detections = []
                for slo, fault, value in ((AVAILABILITY, "error_rate", 1.0),
                                          (TTFT, "latency", 0.3)):
                    status = next(s for s in loop.statuses if s.name == slo.name)
                    long_events = next(b.events for b in status.burn_rates if b.window == "1h")
                    seconds, windows = await _time_to_page(base_url, token, am, slo, fault, value,
                                                  fault_timeout)
                    page = burn_windows(slo)[0]
                    detections.append(Detection(
                        slo.name, f"{fault}={value:g}", seconds, ",".join(windows),
                        page.detection_seconds(1.0, slo.error_budget) + scrape_interval,
                        long_events))
                await am.aclose()
            finally:
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
    return Result(clean_pages, detections, measured_rate)


async def _time_to_page(base_url: str, token: str, am: AlertmanagerClient, slo: Slo,
                        fault: str, value: float, timeout: float
                        ) -> tuple[float, list[str]]:
    """Seconds from injecting the fault until a page of ``slo`` is active in Alertmanager,
    and the windows of the pages active then."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as admin:
        injected = time.time()
        response = await admin.post("/admin/faults", json={
            "kind": fault, "value": value, "duration_seconds": timeout})
        response.raise_for_status()
        try:
            while time.time() - injected < timeout:
                pages = await am.list_alerts([f"alertname={BURN_ALERT}", f"slo={slo.name}",
                                              "severity=page"])
                if pages:
                    return time.time() - injected, sorted(p.labels["window"] for p in pages)
                await asyncio.sleep(0.25)
            return math.inf, []
        finally:
            await admin.delete("/admin/faults")


def _seed_history(store: Store, clean_start: float) -> float:
    """Write one hour of scrapes before the first live one, each the clean phase's mean
    interval: the long window full of steady traffic, as the workbook assumes."""
    live = window(store, Selector(TARGET), clean_start, time.time())
    with store.engine.connect() as conn:  # the span the increases were measured over
        duration = float(conn.scalar(
            select(func.sum(Interval.end_time - Interval.start_time)).where(
                Interval.resolution == RAW_RESOLUTION, Interval.state == TargetState.UP.value,
                Interval.end_time > clean_start)) or 0.0)
    step = 15.0
    scale = step / duration
    seeded = []
    t = live.start - HISTORY_SECONDS
    while t + step <= live.start + 1e-9:
        seeded.append(Snapshot(
            TARGET, t, t + step, TargetState.UP,
            counters={k: v * scale for k, v in live.counters.items()},
            histograms={k: _scaled(h, scale) for k, h in live.histograms.items()}))
        t += step
    store.write(seeded)
    requests = sum(v for k, v in live.counters.items()
                   if k.startswith("gen_ai_server_requests_total"))
    return requests / duration


def _scaled(delta: HistogramDelta, scale: float) -> HistogramDelta:
    return HistogramDelta(delta.bounds, tuple(c * scale for c in delta.counts),
                          delta.sum * scale, delta.count * scale)


@contextlib.asynccontextmanager
async def _steady_load(base_url: str, rate: float) -> AsyncIterator[None]:
    """Poisson arrivals of short completions until the block exits."""
    import numpy as np

    rng = np.random.default_rng(0)

    async def forever() -> None:
        while True:
            gaps = rng.exponential(1.0 / rate, 200)
            specs = [RequestSpec(float(a), "the quick brown fox jumps", 8)
                     for a in np.cumsum(gaps) - gaps[0]]
            await send_requests(base_url, "tiny", specs, timeout_seconds=60.0)

    task = asyncio.create_task(forever())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--scrape-interval", type=float, default=5.0)
    parser.add_argument("--evaluation-interval", type=float, default=2.0)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    from tests.monitor.alertmanager_fixture import running_alertmanager

    with tempfile.TemporaryDirectory() as tmp, running_alertmanager(Path(tmp)) as am:
        result = asyncio.run(run(alertmanager_url=am.url, rate=args.rate,
                                 scrape_interval=args.scrape_interval,
                                 evaluation_interval=args.evaluation_interval,
                                 workdir=Path(tmp)))
    print(f"steady load: {result.requests_per_second:.2f} req/s; scrape every "
          f"{args.scrape_interval:g} s, evaluate every {args.evaluation_interval:g} s")
    print(f"pages during the clean phase: {result.clean_pages or 'none'}")
    print(f"{'SLO':<18} {'fault':<16} {'1h events':>10} {'page window':>12} {'measured':>10} "
          f"{'workbook+scrape':>16} {'ratio':>7}")
    for d in result.detections:
        print(f"{d.slo:<18} {d.fault:<16} {d.events_in_long_window:>10.0f} "
              f"{d.paged_windows:>12} "
              f"{d.measured_seconds:>9.1f}s {d.theoretical_seconds:>15.1f}s "
              f"{d.measured_seconds / d.theoretical_seconds:>7.2f}")
    if args.json:
        args.json.write_text(json.dumps({
            "clean_pages": result.clean_pages, "rate": result.requests_per_second,
            "detections": [dataclasses.asdict(d) for d in result.detections]}, indent=2))


if __name__ == "__main__":
    main()
