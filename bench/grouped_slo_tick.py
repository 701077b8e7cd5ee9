"""Tick time of one SLO split per tenant (``grouping: [tenant]``) against the same SLO as a
whole, over the same store (issue 20).

A SQLite store holds the gateway's goodput counters (``inferwatch_gateway_requests_total``
and ``inferwatch_gateway_good_requests_total``, labelled by tenant) for ``--tenants`` tenants:
1-hour rows for ``--days`` days, 1-minute rows for the last ``--minute-days`` days, written by
the store's own writer (as ``bench.slo_store``), then raw 15-second scrapes for the steady
ticks. Two evaluators read it: the checked-in per-tenant SLO
(``alerts/slos/gateway-tenants.yaml``), judged per tenant, and the same SLO unsplit. Each loads
its history on its first tick, then both are ticked every 15 s of simulated time, interleaved;
the store statements of each tick are counted.

    .venv/bin/python -m bench.grouped_slo_tick --tenants 50 --ticks 40
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import delete, event, insert

from bench.slo_store import END, HOUR, MINUTE, _write
from monitor.collect.snapshot import SeriesKey, Snapshot, TargetState, series_key
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.loaders import load_slos
from monitor.slo.source import StoreSliSource
from monitor.store import Store, TargetInfo, by_target
from monitor.store.db import open_store
from monitor.store.models import RollupWatermark
from monitor.store.writes import write_transaction

ROOT = Path(__file__).resolve().parent.parent
TARGET = "gateway"
_BATCH = 500


def snapshots(rng: np.random.Generator, tenants: int, start: float, end: float,
              seconds: int) -> Iterator[Snapshot]:
    """The gateway's counters per tenant: ~20 requests a minute each, 0.2% of them bad."""
    num = int((end - start) // seconds)
    requests = rng.poisson(20 * seconds / MINUTE, (num, tenants)).astype(np.float64)
    bad = rng.binomial(requests.astype(np.int64), 0.002).astype(np.float64)
    for k in range(num):
        t = start + (k + 1) * seconds
        counters: dict[SeriesKey, float] = {}
        for j in range(tenants):
            labels = {"model": "tiny", "tenant": f"tenant-{j:03d}", "slo_class": "interactive"}
            counters[series_key("inferwatch_gateway_requests_total",
                                {**labels, "outcome": "ok"})] = requests[k, j]
            counters[series_key("inferwatch_gateway_good_requests_total", labels)] = (
                requests[k, j] - bad[k, j])
        yield Snapshot(TARGET, t - seconds, t, TargetState.UP, counters=counters)


def fill(store: Store, tenants: int, days: float, minute_days: float) -> None:
    rng = np.random.default_rng(11)
    store.register_target(TargetInfo(TARGET, f"http://{TARGET}/metrics", "gateway", {}))
    minutes_from = END - round(minute_days * 1440) * MINUTE
    for resolution, start in ((HOUR, END - round(days * 24) * HOUR), (MINUTE, minutes_from)):
        batch: list[Snapshot] = []
        for snapshot in snapshots(rng, tenants, start, END, resolution):
            batch.append(snapshot)
            if len(batch) == _BATCH:
                _write(store, batch, resolution)
                batch = []
        _write(store, batch, resolution)
    with write_transaction(store.engine) as conn:
        conn.execute(delete(RollupWatermark))
        conn.execute(insert(RollupWatermark), [{"resolution": r, "watermark": END}
                                               for r in (MINUTE, HOUR)])


class Counter:
    """Statements run on the store: through SQLAlchemy, and the bulk reads' SQLite cursor."""

    def __init__(self, store: Store) -> None:
        self.n = 0
        batches = by_target._batches

        def counted(conn: Any, stmt: Any) -> Any:
            self.n += 1
            return batches(conn, stmt)

        def count(*args: Any) -> None:
            if args[2].strip().upper() != "BEGIN":
                self.n += 1

        by_target._batches = counted
        event.listen(store.engine, "before_cursor_execute", count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--minute-days", type=float, default=3.5)
    args = parser.parse_args()
    (split,) = load_slos(ROOT / "alerts" / "slos" / "gateway-tenants.yaml")
    whole = split.model_copy(update={"name": f"{split.name}-whole", "grouping": ()})
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/grouped.db")
        store.migrate()
        started = time.perf_counter()
        fill(store, args.tenants, args.days, args.minute_days)
        rng = np.random.default_rng(12)
        store.write(list(snapshots(rng, args.tenants, END, END + 15 * args.ticks + 60, 15)))
        print(f"filled {args.tenants} tenants x {args.days:g} days in "
              f"{time.perf_counter() - started:.1f} s")
        counter = Counter(store)
        evaluators: dict[str, SloEvaluator] = {
            "whole": SloEvaluator([whole], StoreSliSource(store)),
            "split": SloEvaluator([split], StoreSliSource(store))}
        times: dict[str, list[float]] = {name: [] for name in evaluators}
        statements: dict[str, list[int]] = {name: [] for name in evaluators}
        paging: dict[str, int] = {}
        for k in range(args.ticks + 1):
            now = END + 15 * k
            for name, evaluator in evaluators.items():
                before = counter.n
                started = time.perf_counter()
                (status,) = evaluator.tick(now)
                times[name].append(time.perf_counter() - started)
                statements[name].append(counter.n - before)
                assert status.error is None, status.error
                paging[name] = len(status.groups)
        print(f"{'SLO':<6} {'groups':>6} {'first tick':>11} {'statements':>10} "
              f"{'mean tick':>10} {'p99 tick':>9} {'statements/tick':>15}")
        for name in evaluators:
            steady = times[name][1:]
            p99 = float(np.percentile(steady, 99))
            print(f"{name:<6} {paging[name]:>6} {times[name][0]:>10.3f}s "
                  f"{statements[name][0]:>10} {statistics.mean(steady) * 1000:>8.1f}ms "
                  f"{p99 * 1000:>7.1f}ms {statistics.mean(statements[name][1:]):>15.1f}")
        ratio_first = times["split"][0] / times["whole"][0]
        ratio_mean = statistics.mean(times["split"][1:]) / statistics.mean(times["whole"][1:])
        print(f"split / whole: first tick {ratio_first:.2f}x, mean tick {ratio_mean:.2f}x")
        store.close()


if __name__ == "__main__":
    main()
