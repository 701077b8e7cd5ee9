"""What the anomaly monitor costs: replaying stored history at start, and one live step.

    python -m bench.anomaly_cost [--days 7] [--targets 2]

Writes ``--days`` of one-minute snapshots per target (requests, tokens, in-flight gauges, KV
usage, a TTFT histogram) into a fresh SQLite store, then times ``AnomalyMonitor.tick``: the
first tick replays all of it through every detector of every target (what a restart does),
the next ones each process one new minute.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from exporters import schema
from monitor.anomaly.monitor import AnomalyMonitor
from monitor.collect.snapshot import GaugeStats, HistogramDelta, Snapshot, TargetState, series_key
from monitor.store import Store, open_store

T0 = 1_800_000_000.0
MODEL = {"model": "tiny"}
TTFT_BOUNDS = schema.get_spec(schema.TIME_TO_FIRST_TOKEN).buckets or ()


def snapshot(target: str, end: float, rng: np.random.Generator) -> Snapshot:
    minute_of_day = (end // 60) % 1440
    load = 10 * (0.6 + 0.4 * math.sin(2 * math.pi * minute_of_day / 1440)) * (
        1 + 0.05 * rng.standard_normal())
    requests = 60 * load
    counts = rng.multinomial(int(requests), [0.5, 0.3, 0.15, 0.05])
    buckets = [0.0] * (len(TTFT_BOUNDS) + 1)
    for k, bound in enumerate((0.05, 0.1, 0.2, 0.5)):
        buckets[TTFT_BOUNDS.index(bound)] = float(counts[k])

    def gauge(v: float) -> GaugeStats:
        return GaugeStats(v, 4 * v, 4, v, v)
    return Snapshot(target, end - 60, end, TargetState.UP, counters={
        series_key("gen_ai_server_requests_total", {**MODEL, "finish_reason": "stop"}): requests,
        series_key("gen_ai_server_generation_tokens_total", MODEL): 100 * requests,
    }, gauges={
        series_key(schema.REQUESTS_RUNNING, MODEL): gauge(load),
        series_key(schema.REQUESTS_WAITING, MODEL): gauge(0.0),
        series_key(schema.BATCH_SIZE_MAX, MODEL): gauge(32.0),
        series_key(schema.KV_CACHE_USAGE_RATIO, MODEL): gauge(0.03 * load),
    }, histograms={series_key(schema.TIME_TO_FIRST_TOKEN, MODEL): HistogramDelta(
        TTFT_BOUNDS, tuple(buckets), 0.0, float(sum(buckets)))})


def fill(store: Store, targets: int, minutes: int) -> None:
    rng = np.random.default_rng(0)
    for k in range(0, minutes, 1440):
        store.write([snapshot(f"t{i}", T0 + 60 * (m + 1), rng) for m in
                     range(k, min(k + 1440, minutes)) for i in range(targets)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--targets", type=int, default=2)
    parser.add_argument("--live-steps", type=int, default=30)
    args = parser.parse_args()
    minutes = int(args.days * 1440)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'cost.db'}")
        store.migrate()
        fill(store, args.targets, minutes + args.live_steps)
        monitor = AnomalyMonitor(store, settle_seconds=0)
        now = T0 + 60 * minutes
        started = time.perf_counter()
        monitor.tick(now)
        replay = time.perf_counter() - started
        live = []
        for k in range(1, args.live_steps + 1):
            started = time.perf_counter()
            monitor.tick(now + 60 * k)
            live.append(time.perf_counter() - started)
        store.close()
    per_target_day = replay / args.targets / args.days
    print(f"{args.targets} targets x {args.days:g} days of one-minute history")
    print(f"replay at start: {replay:.1f} s ({per_target_day:.2f} s per target-day; "
          f"{1e6 * replay / (args.targets * minutes):.0f} us per target-step)")
    print(f"live step: mean {1e3 * float(np.mean(live)):.1f} ms, max "
          f"{1e3 * float(np.max(live)):.1f} ms for {args.targets} targets "
          f"({1e3 * float(np.mean(live)) / args.targets:.1f} ms per target)")


if __name__ == "__main__":
    main()
