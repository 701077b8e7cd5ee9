"""Snapshots for the store tests, shaped like the collector's (normalized schema names)."""

from __future__ import annotations

import random

from monitor.collect.snapshot import GaugeStats, HistogramDelta, Snapshot, TargetState, series_key

T0 = 1_800_000_000.0  # a whole number of hours since the epoch
SCRAPE_SECONDS = 15.0
BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

REQUESTS = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
ERRORS = series_key("gen_ai_server_request_errors_total",
                    {"model": "tiny", "error_type": "timeout"})
KV_USAGE = series_key("gen_ai_server_kv_cache_usage_ratio", {"model": "tiny"})
TTFT_NAME = "gen_ai_server_time_to_first_token_seconds"
TTFT = series_key(TTFT_NAME, {"model": "tiny"})


def up(target: str, end: float, *, requests: float = 10.0, errors: float = 0.0,
       kv_usage: float = 0.5, ttft_counts: tuple[float, ...] = (1, 2, 3, 2, 1, 1, 0),
       bounds: tuple[float, ...] = BOUNDS, duration: float = SCRAPE_SECONDS) -> Snapshot:
    return Snapshot(
        target, end - duration, end, TargetState.UP,
        counters={REQUESTS: requests, ERRORS: errors},
        gauges={KV_USAGE: GaugeStats.of(kv_usage)},
        histograms={TTFT: HistogramDelta(bounds, ttft_counts, 0.3 * sum(ttft_counts),
                                         sum(ttft_counts))})


def down(target: str, end: float, error: str = "connection refused",
         duration: float = SCRAPE_SECONDS) -> Snapshot:
    return Snapshot(target, end - duration, end, TargetState.DOWN, error)


def random_run(target: str, start: float, end: float, seed: int) -> list[Snapshot]:
    """Raw snapshots every 15 s ending in (start, end], with integer counts that vary."""
    rng = random.Random(seed)
    snapshots, t = [], start + SCRAPE_SECONDS
    while t <= end:
        counts = tuple(float(rng.randint(0, 20)) for _ in range(len(BOUNDS) + 1))
        snapshots.append(up(target, t, requests=float(rng.randint(50, 150)),
                            errors=float(rng.randint(0, 5)), kv_usage=rng.random(),
                            ttft_counts=counts))
        t += SCRAPE_SECONDS
    return snapshots
