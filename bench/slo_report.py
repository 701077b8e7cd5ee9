"""Time of the 30-day SLO report, JSON and HTML, with 1, 100 and 1,000 SLOs configured.

    python -m bench.slo_report [--targets 4] [--sample 10] [--counts 1 100 1000]

A SQLite store filled by the store's writer (``bench.slo_store``) with what a month of
scraping --targets targets leaves: minute rows for 34 days (the report reads its range in
minutes, with a lead-in of the longest alert window), hour rows beside them, raw 15-second
scrapes from the last whole hour to now. The service's API app (``monitor.api.create_app``)
over that store with N SLOs configured (the kinds of ``bench.slo_store.store_slos``:
availability, TTFT and end-to-end latency, by target or by pool); for each N, the reports of
--sample SLOs spread over the N (every one for N <= sample) are fetched with
``GET /api/v1/slos/{name}/report?format=json|html`` (default range: the SLO's 30-day period
up to now) through an in-process client. Printed per N and format: the median and the slowest
report, wall and CPU time of this process (the machine is shared: CPU time is what the
report itself costs), and PASS/FAIL against 1 s per report (the slowest wall time counts).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from bench.cpu_meter import OtherCpuMeter
from bench.slo_store import HOUR, Fill, fill, store_slos, write_raw
from bench.stack import sqlite_store
from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver
from monitor.api.runs import RunManager
from monitor.collect.config import MonitorConfig, parse_config
from monitor.store import Store

TARGET_SECONDS = 1.0
FORMATS = ("json", "html")


def app_client(store: Store, num_slos: int, num_targets: int) -> tuple[TestClient, list[str]]:
    slos = store_slos(num_slos, "30d", num_targets)
    config: MonitorConfig = parse_config("anomaly: {enabled: false}\n", "bench.yaml")
    state = ServiceState(store, lambda: config, slos, MonitorMetrics(),
                         ScrapeObserver(lambda _s: None, MonitorMetrics()),
                         RunManager(store.engine))
    return TestClient(create_app(state)), [s.name for s in slos]


def sample(names: list[str], size: int) -> list[str]:
    if len(names) <= size:
        return names
    return [names[round(k * (len(names) - 1) / (size - 1))] for k in range(size)]


def time_reports(client: TestClient, names: list[str]
                 ) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each report by format; CPU: this process's, all threads."""
    times: dict[str, list[tuple[float, float]]] = {f: [] for f in FORMATS}
    for name in names:
        for fmt in FORMATS:
            started, cpu = time.perf_counter(), time.process_time()
            response = client.get(f"/api/v1/slos/{name}/report", params={"format": fmt})
            times[fmt].append((time.perf_counter() - started, time.process_time() - cpu))
            if response.status_code != 200:
                raise RuntimeError(f"{name} {fmt}: {response.status_code} {response.text}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--sample", type=int, default=10, help="reports timed per count")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()

    now = time.time()
    spec = Fill(args.targets, 35, 34, end=math.floor(now / HOUR) * HOUR)
    with tempfile.TemporaryDirectory() as work, sqlite_store(Path(work) / "slo.db") as store:
        started = time.perf_counter()
        written = fill(store, spec)
        write_raw(store, spec, math.floor((time.time() - spec.end) / 15) * 15)
        print(f"store: {args.targets} targets, {written:,} snapshots written "
              f"({time.perf_counter() - started:.0f} s), "
              f"{(Path(work) / 'slo.db').stat().st_size / 1e6:.0f} MB")
        meter = OtherCpuMeter()
        results = {}
        first_html = math.nan
        for count in args.counts:
            client, names = app_client(store, count, args.targets)
            with client:
                started = time.perf_counter()  # the first HTML report imports matplotlib
                client.get(f"/api/v1/slos/{names[0]}/report", params={"format": "html"})
                if math.isnan(first_html):
                    first_html = time.perf_counter() - started
                results[count] = time_reports(client, sample(names, args.sample))
        others = meter.cores()

    print(f"30-day report per SLO (GET /api/v1/slos/NAME/report), {args.targets} targets; "
          f"the service's first HTML report (imports matplotlib, not timed below): "
          f"{first_html:.2f} s")
    print(f"{'SLOs':>6} {'format':>6} {'reports':>8} {'median':>9} {'slowest':>9} "
          f"{'median CPU':>11} {'slowest CPU':>12}  target < 1 s")
    for count, times in results.items():
        for fmt, values in times.items():
            walls, cpus = [w for w, _ in values], [c for _, c in values]
            slowest = max(walls)
            print(f"{count:>6} {fmt:>6} {len(values):>8} {statistics.median(walls):>8.3f}s "
                  f"{slowest:>8.3f}s {statistics.median(cpus):>10.3f}s {max(cpus):>11.3f}s  "
                  f"{'PASS' if slowest < TARGET_SECONDS else 'FAIL'}")
    print(f"others (cores used by other processes): "
          f"{'n/a' if others is None else f'{others:.2f}'}")


if __name__ == "__main__":
    main()
