"""What the PromQL source costs on VictoriaMetrics with a fleet's history: N simulated targets,
D days of one-minute normalized series (4 per target: finished requests, rejections, tokens,
queue depth) imported through /api/v1/import, then ``PromQLSource.snapshot`` (what
``inferwatch serve`` runs per target for a ``promql_selector`` target: two raw-sample
queries, the window and the baseline) over windows of 1 hour, 1 day and the whole range, for
every target (the 1-hour window) or a sample of them (longer windows), timed per target.

    python -m bench.promql_source_cost --targets 1000 --days 30
    python -m bench.promql_source_cost --targets 100 --days 30 --sample 10 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import numpy as np

from monitor.collect.promql import PromQLSource
from monitor.collect.snapshot import TargetState
from monitor.stack.victoriametrics import start_victoria_metrics, victoria_metrics_binaries

STEP_MS = 60_000
SERIES_PER_TARGET = 4
BATCH_TARGETS = 25  # targets per import request


@dataclass(frozen=True, slots=True)
class WindowCost:
    window: str
    targets_read: int
    seconds_per_target: float
    samples_per_target: int
    extrapolated_all_targets_seconds: float


def _target_lines(k: int, timestamps: str, points: int, rng: np.random.Generator) -> str:
    labels = {"job": "engine", "instance": f"e{k}:8000"}
    per_minute = rng.poisson(600, points)
    series = {
        ("gen_ai_server_requests_total", "finish_reason", "stop"): np.cumsum(per_minute),
        ("gen_ai_server_request_errors_total", "error_type", "rejected"):
            np.cumsum(rng.poisson(0.5, points)),
        ("gen_ai_server_generation_tokens_total", "", ""): np.cumsum(per_minute * 100),
        ("gen_ai_server_requests_waiting", "", ""): rng.poisson(3, points),
    }
    lines = []
    for (name, label, value), values in series.items():
        metric = {"__name__": name, **labels, **({label: value} if label else {})}
        numbers = ",".join(map(str, values.tolist()))
        lines.append(f'{{"metric":{json.dumps(metric)},"values":[{numbers}],'
                     f'"timestamps":{timestamps}}}')
    return "\n".join(lines) + "\n"


def backfill(url: str, num_targets: int, end_ms: int, days: float) -> tuple[int, float]:
    """Import the fleet's history; (samples, seconds)."""
    points = int(days * 86_400_000 // STEP_MS)
    stamps = end_ms - STEP_MS * np.arange(points - 1, -1, -1, dtype=np.int64)
    timestamps = "[" + ",".join(map(str, stamps.tolist())) + "]"
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    with httpx.Client(timeout=600) as client:
        for first in range(0, num_targets, BATCH_TARGETS):
            body = "".join(_target_lines(k, timestamps, points, rng)
                           for k in range(first, min(first + BATCH_TARGETS, num_targets)))
            client.post(f"{url}/api/v1/import", content=body).raise_for_status()
        client.get(f"{url}/internal/force_flush").raise_for_status()  # searchable now
    return num_targets * SERIES_PER_TARGET * points, time.perf_counter() - started


async def read_windows(url: str, targets: Sequence[int], start: float, end: float) -> float:
    """Seconds for ``PromQLSource.snapshot`` of each target in turn."""
    async with httpx.AsyncClient() as http:
        started = time.perf_counter()
        for k in targets:
            source = PromQLSource(url, http, 600.0, f'job="engine",instance="e{k}:8000"')
            snapshot = await source.snapshot(f"e{k}", start, end)
            if snapshot.state is not TargetState.UP:
                raise RuntimeError(f"e{k}: {snapshot.state} {snapshot.error}")
        return time.perf_counter() - started


def measure(url: str, num_targets: int, days: float, end: float, sample: int
            ) -> list[WindowCost]:
    costs = []
    windows = (("1h", 3600.0), ("1d", 86_400.0), (f"{days:g}d", (days - 0.01) * 86_400))
    for name, seconds in windows:
        read = num_targets if seconds <= 3600 else min(sample, num_targets)
        elapsed = asyncio.run(read_windows(url, range(read), end - seconds, end))
        per_target = elapsed / read
        costs.append(WindowCost(name, read, per_target,
                                SERIES_PER_TARGET * int(seconds * 1000 // STEP_MS),
                                per_target * num_targets))
    return costs


def _data_size_bytes(url: str) -> float:
    """VictoriaMetrics' own count of its compressed data (vm_data_size_bytes, all parts)."""
    httpx.get(f"{url}/internal/force_flush", timeout=60).raise_for_status()
    text = httpx.get(f"{url}/metrics", timeout=60).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vm_data_size_bytes{"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--sample", type=int, default=10,
                        help="targets read for the windows longer than an hour")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    binaries = victoria_metrics_binaries()
    if binaries is None:
        raise SystemExit("victoria-metrics is not installed (apt-get install victoria-metrics)")
    with tempfile.TemporaryDirectory() as workdir:
        vm = start_victoria_metrics(binaries["victoria-metrics"], Path(workdir), timeout=60)
        try:
            end_ms = int(time.time() * 1000) // STEP_MS * STEP_MS
            num_samples, import_seconds = backfill(vm.url, args.targets, end_ms, args.days)
            print(f"imported {num_samples:,} samples in {import_seconds:.1f} s "
                  f"({num_samples / import_seconds:,.0f} samples/s)")
            costs = measure(vm.url, args.targets, args.days, end_ms / 1000 + 1, args.sample)
            disk = _data_size_bytes(vm.url)
        finally:
            vm.stop()
    print(f"VictoriaMetrics data: {disk / 2**20:.1f} MiB")
    print("| window | targets read | s per target | samples per target | all targets (s) |")
    print("|---|--:|--:|--:|--:|")
    for c in costs:
        print(f"| {c.window} | {c.targets_read} | {c.seconds_per_target:.3f} | "
              f"{c.samples_per_target:,} | {c.extrapolated_all_targets_seconds:,.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"samples": num_samples, "import_s": import_seconds,
                                         "disk_bytes": disk,
                                         "windows": [asdict(c) for c in costs]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
