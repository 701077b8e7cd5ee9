"""How many targets the collector keeps on schedule with one core, and its CPU per sample
against a real Prometheus scraping the same targets in the same run.

N targets (bench.scale_targets: one vLLM V1 page generated from the metric catalog, served
at /t/<i>/metrics by a raw asyncio server in its own process pinned to core 1) are scraped by
the Collector in this process pinned to core 0, with a sink that only counts. Per N: one
warm-up interval (the FIRST scrapes), then a measured window of --window-intervals intervals:
CPU seconds of this process (time.process_time, parse threads included), samples scraped
(sample lines per page x good scrapes), CPU s per 1,000 samples. On schedule: every target
scraped its expected number of times (one fewer allowed at the window's edges, 99 % of all
expected overall), no DOWN scrape, CPU < --max-busy of one core, and no gap between two
scrapes of a target off the interval by more than 10 %. Larger N stop after the first N off
schedule. Then /usr/bin/prometheus (pinned to core 0 too, alone) scrapes the same N targets
at the same interval; its CPU is utime+stime of /proc/<pid>/stat over the same window length,
its samples sum_over_time(scrape_samples_scraped) over the window.

    python -m bench.collector_scale                # 15 s interval, N 10..2000, Prom 100, 1000
    python -m bench.collector_scale --quick        # 5 s interval, N 10,100,500, Prom 100
    python -m bench.collector_scale --interval 5 --targets 10,100 --prom-targets 100 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
from multiprocessing.context import SpawnProcess
import os
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.cpu_meter import BUSY_WARNING_CORES, OtherCpuMeter
from bench.scale_targets import build_page, serve
from exporters.sockets import free_port
from monitor.collect.collector import Collector
from monitor.collect.config import MonitorConfig
from monitor.collect.snapshot import Snapshot, TargetState

COLLECTOR_CORE, SERVER_CORE = 0, 1
LAG_TOLERANCE = 0.10  # of the interval
PROMETHEUS = "/usr/bin/prometheus"
PROM_DISCOVERY_SECONDS = 6.0  # the scrape manager applies new targets after up to ~5 s
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Settings:
    interval: float
    timeout: float
    window_intervals: int
    max_concurrent: int
    max_busy: float
    port: int
    samples_per_page: int

    @property
    def window(self) -> float:
        return self.interval * self.window_intervals


@dataclass(slots=True)
class Tally:
    """The sink: start time, state and end-to-end duration of every scrape."""

    starts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    down: list[float] = field(default_factory=list)
    durations: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)

    def __call__(self, snapshot: Snapshot) -> None:
        if snapshot.state is TargetState.DOWN:
            self.down.append(snapshot.end)
            return
        self.starts[snapshot.target].append(snapshot.end)
        self.durations.append((snapshot.end, time.time() - snapshot.end))


@dataclass(frozen=True, slots=True)
class Window:
    start: float
    end: float
    cpu_seconds: float
    other_cores: float | None
    server_cpu_seconds: float


@dataclass(frozen=True, slots=True)
class OursResult:
    targets: int
    scrapes: int
    expected_scrapes: int
    min_scrapes_per_target: int
    down: int
    samples: int
    cpu_seconds: float
    busy_fraction: float
    cpu_s_per_1k_samples: float
    max_gap_error_s: float
    p99_scrape_s: float
    server_busy_fraction: float
    other_cores: float | None
    on_schedule: bool


@dataclass(frozen=True, slots=True)
class ScraperResult:
    """What a scraping engine (Prometheus, vmagent) cost over the measured window."""

    targets: int
    scrapes: int
    expected_scrapes: int
    samples: int
    cpu_seconds: float
    busy_fraction: float
    cpu_s_per_1k_samples: float
    other_cores: float | None


# --- the target server -------------------------------------------------------------------

def start_server(port: int) -> SpawnProcess:
    process = multiprocessing.get_context("spawn").Process(
        target=serve, args=(port, SERVER_CORE), daemon=True, name="scale-targets")
    process.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/t/0/metrics", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError("the target server did not answer within 20 s")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# --- our collector -----------------------------------------------------------------------

def monitor_config(n: int, settings: Settings) -> MonitorConfig:
    targets = [{"name": f"t{i}", "url": f"http://127.0.0.1:{settings.port}/t/{i}/metrics",
                "engine": "vllm"} for i in range(n)]
    return MonitorConfig.model_validate({
        "defaults": {"scrape_interval_seconds": settings.interval,
                     "scrape_timeout_seconds": settings.timeout},
        "max_concurrent_scrapes": settings.max_concurrent, "targets": targets})


async def _measure_window(settings: Settings, server_pid: int) -> Window:
    start, cpu, server = time.time(), time.process_time(), process_cpu_seconds(server_pid)
    meter = OtherCpuMeter()
    await asyncio.sleep(settings.window)
    return Window(start, time.time(), time.process_time() - cpu, meter.cores(),
                  process_cpu_seconds(server_pid) - server)


async def _run_collector(n: int, settings: Settings, server_pid: int) -> tuple[Tally, Window]:
    tally, stop = Tally(), asyncio.Event()
    async with Collector(monitor_config(n, settings), tally) as collector:
        task = asyncio.create_task(collector.run(stop))
        await asyncio.sleep(settings.interval)  # warm-up: every target's FIRST scrape
        window = await _measure_window(settings, server_pid)
        stop.set()
        await task
    return tally, window


def _in_window(times: Sequence[float], window: Window) -> int:
    return sum(1 for t in times if window.start <= t < window.end)


def _max_gap_error(tally: Tally, interval: float) -> float:
    errors = [abs(b - a - interval) for starts in tally.starts.values()
              for a, b in zip(starts, starts[1:])]
    return max(errors, default=math.inf)


def _p99(values: list[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def judge_ours(n: int, tally: Tally, window: Window, settings: Settings) -> OursResult:
    per_target = [_in_window(tally.starts.get(f"t{i}", []), window) for i in range(n)]
    scrapes, expected = sum(per_target), n * settings.window_intervals
    down = _in_window(tally.down, window)
    samples = scrapes * settings.samples_per_page
    busy = window.cpu_seconds / (window.end - window.start)
    gap_error = _max_gap_error(tally, settings.interval)
    on_schedule = (min(per_target) >= settings.window_intervals - 1 and down == 0
                   and scrapes >= 0.99 * expected and busy < settings.max_busy
                   and gap_error <= LAG_TOLERANCE * settings.interval)
    durations = [d for start, d in tally.durations if window.start <= start < window.end]
    return OursResult(n, scrapes, expected, min(per_target), down, samples, window.cpu_seconds,
                      busy, 1000 * window.cpu_seconds / max(1, samples), gap_error,
                      _p99(durations), window.server_cpu_seconds / settings.window,
                      window.other_cores, on_schedule)


def run_ours(n: int, settings: Settings, server_pid: int) -> OursResult:
    tally, window = asyncio.run(_run_collector(n, settings, server_pid))
    return judge_ours(n, tally, window, settings)


# --- Prometheus --------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def prometheus_config(n: int, settings: Settings) -> dict[str, Any]:
    """One job; each target its own static group setting __metrics_path__ and a distinct
    ``target`` label (the address is shared, so the series need it to differ)."""
    interval, timeout = _ms(settings.interval), _ms(settings.timeout)
    groups = [{"targets": [f"127.0.0.1:{settings.port}"],
               "labels": {"__metrics_path__": f"/t/{i}/metrics", "target": f"t{i}"}}
              for i in range(n)]
    return {"global": {"scrape_interval": interval, "scrape_timeout": timeout,
                       "evaluation_interval": interval},
            "scrape_configs": [{"job_name": "scale", "static_configs": groups}]}


def _pin_to_collector_core() -> None:
    os.sched_setaffinity(0, {COLLECTOR_CORE})


def start_prometheus(workdir: Path, n: int,
                     settings: Settings) -> tuple[subprocess.Popen[bytes], str]:
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config(n, settings)), encoding="utf-8")
    address = f"127.0.0.1:{free_port()}"
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address={address}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_pin_to_collector_core)
    return process, f"http://{address}"


def wait_ready(process: subprocess.Popen[bytes], url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus at {url} not ready (exit code {process.poll()})")


def query_scalar(url: str, promql: str, at: float) -> float:
    body = httpx.get(f"{url}/api/v1/query", params={"query": promql, "time": f"{at:.3f}"},
                     timeout=30.0).json()
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


def measure_prometheus(process: subprocess.Popen[bytes], url: str, n: int,
                       settings: Settings) -> ScraperResult:
    time.sleep(PROM_DISCOVERY_SECONDS + settings.interval)  # warm-up: targets found, scraped
    start, cpu, meter = time.time(), process_cpu_seconds(process.pid), OtherCpuMeter()
    time.sleep(settings.window)
    end, cpu = time.time(), process_cpu_seconds(process.pid) - cpu
    others = meter.cores()
    # The range selector is left-open: (end - window, end] holds one window's scrapes.
    span = _ms(end - start)
    scrapes = query_scalar(url, f"sum(count_over_time(scrape_samples_scraped[{span}]))", end)
    samples = query_scalar(url, f"sum(sum_over_time(scrape_samples_scraped[{span}]))", end)
    return ScraperResult(n, int(scrapes), n * settings.window_intervals, int(samples), cpu,
                      cpu / (end - start), 1000 * cpu / max(1.0, samples), others)


def run_prometheus(n: int, settings: Settings) -> ScraperResult:
    workdir = Path(tempfile.mkdtemp(prefix="collector_scale_prom_"))
    try:
        process, url = start_prometheus(workdir, n, settings)
        try:
            wait_ready(process, url)
            return measure_prometheus(process, url, n, settings)
        finally:
            stop_process(process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- the run -----------------------------------------------------------------------------

def _fmt_cores(cores: float | None) -> str:
    if cores is None:
        return "n/a"
    return f"{cores:.2f}" + (" (!)" if cores > BUSY_WARNING_CORES else "")


def print_ours(result: OursResult) -> None:
    print(f"{result.targets:>6} {result.scrapes:>7}/{result.expected_scrapes:<7} "
          f"{result.min_scrapes_per_target:>4} {result.down:>5} {result.samples:>10} "
          f"{result.cpu_seconds:>8.2f} {result.busy_fraction:>6.2f} "
          f"{result.cpu_s_per_1k_samples:>10.4f} {result.max_gap_error_s:>8.3f} "
          f"{result.p99_scrape_s:>8.3f} {result.server_busy_fraction:>6.2f} "
          f"{_fmt_cores(result.other_cores):>9} {'yes' if result.on_schedule else 'NO':>4}",
          flush=True)


OURS_HEADER = (f"{'N':>6} {'scrapes/expected':>15} {'min':>4} {'down':>5} {'samples':>10} "
               f"{'cpu_s':>8} {'busy':>6} {'cpu_s/1k':>10} {'gap_err':>8} {'p99_scr':>8} "
               f"{'server':>6} {'others':>9} {'ok':>4}")


def print_prometheus(result: ScraperResult, ours: OursResult | None) -> None:
    ratio = (f"{ours.cpu_s_per_1k_samples / result.cpu_s_per_1k_samples:.2f}"
             if ours is not None and result.cpu_s_per_1k_samples > 0 else "n/a")
    print(f"{result.targets:>6} {result.scrapes:>7}/{result.expected_scrapes:<7} "
          f"{result.samples:>10} {result.cpu_seconds:>8.2f} {result.busy_fraction:>6.2f} "
          f"{result.cpu_s_per_1k_samples:>10.4f} {_fmt_cores(result.other_cores):>9} "
          f"{ratio:>12}", flush=True)


PROM_HEADER = (f"{'N':>6} {'scrapes/expected':>15} {'samples':>10} {'cpu_s':>8} {'busy':>6} "
               f"{'cpu_s/1k':>10} {'others':>9} {'ours/prom':>12}")


def run_all_ours(counts: Sequence[int], settings: Settings, server_pid: int) -> list[OursResult]:
    print(OURS_HEADER, flush=True)
    results: list[OursResult] = []
    for n in counts:
        results.append(run_ours(n, settings, server_pid))
        print_ours(results[-1])
        if not results[-1].on_schedule:
            print(f"  N={n} is off schedule: larger N skipped", flush=True)
            break
    return results


def run_all_prometheus(counts: Sequence[int], settings: Settings,
                       ours: Sequence[OursResult]) -> list[ScraperResult]:
    by_n = {result.targets: result for result in ours}
    print(PROM_HEADER, flush=True)
    results: list[ScraperResult] = []
    for n in counts:
        results.append(run_prometheus(n, settings))
        print_prometheus(results[-1], by_n.get(n))
    return results


def describe(settings: Settings, families: int) -> None:
    print(f"page: one vLLM V1 /metrics page GENERATED from the catalog's V1 rows "
          f"(vllm-catalog.csv; real names, types, label sets, bucket lists), {families} "
          f"families, {settings.samples_per_page} samples (= series, histogram buckets, _sum "
          f"and _count each counted), counters growing with time")
    print(f"interval {settings.interval:g} s, timeout {settings.timeout:g} s, warm-up 1 "
          f"interval, window {settings.window_intervals} intervals = {settings.window:g} s, "
          f"max_concurrent_scrapes {settings.max_concurrent}; collector and Prometheus on "
          f"core {COLLECTOR_CORE} (one at a time), target server on core {SERVER_CORE}")
    print("columns: min = fewest scrapes of one target in the window; busy = CPU s / wall s "
          "(one core = 1); gap_err = largest |gap between two scrapes of a target - interval| "
          "(s); p99_scr = p99 of fetch+parse per scrape (s); server = target server busy; "
          "others = cores used by other processes (OtherCpuMeter, incl. the target server)",
          flush=True)


def summary(ours: Sequence[OursResult], prom: Sequence[ScraperResult]) -> dict[str, Any]:
    good = [r.targets for r in ours if r.on_schedule]
    by_n = {r.targets: r for r in ours}
    ratios = {str(p.targets): by_n[p.targets].cpu_s_per_1k_samples / p.cpu_s_per_1k_samples
              for p in prom if p.targets in by_n and p.cpu_s_per_1k_samples > 0}
    return {"largest_n_on_schedule": max(good, default=None), "ours_over_prometheus": ratios}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--interval", type=float, default=15.0)
    parser.add_argument("--targets", default="10,100,500,1000,2000")
    parser.add_argument("--prom-targets", default="100,1000")
    parser.add_argument("--window-intervals", type=int, default=2)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--max-busy", type=float, default=0.9)
    parser.add_argument("--quick", action="store_true",
                        help="--interval 5 --targets 10,100,500 --prom-targets 100")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.interval, args.targets, args.prom_targets = 5.0, "10,100,500", "100"
    return args


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    page = build_page()
    settings = Settings(args.interval, min(5.0, args.interval / 2), args.window_intervals,
                        args.max_concurrent, args.max_busy, free_port(), page.num_samples)
    describe(settings, page.num_families)
    server = start_server(settings.port)
    os.sched_setaffinity(0, {COLLECTOR_CORE})
    try:
        ours = run_all_ours(_counts(args.targets), settings, server.pid or 0)
        prom = run_all_prometheus(_counts(args.prom_targets), settings, ours)
    finally:
        server.terminate()
        server.join(10)
    result = summary(ours, prom)
    print(f"largest N on schedule with one core: {result['largest_n_on_schedule']} "
          f"(of those run); ours/Prometheus CPU per sample: "
          + ", ".join(f"N={n}: {r:.2f}" for n, r in result["ours_over_prometheus"].items()))
    if args.json:
        args.json.write_text(json.dumps({"settings": asdict(settings), **result,
                                         "ours": [asdict(r) for r in ours],
                                         "prometheus": [asdict(p) for p in prom]}, indent=2))


if __name__ == "__main__":
    main()
