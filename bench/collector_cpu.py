"""The embedded collector's CPU per sample against Prometheus's, same targets, one run.

N targets serve bench.scale_targets' generated vLLM V1 page (419 samples) from a process
pinned to core 1 (bench.collector_scale's server). Per N, in this order, each pinned to core 0
alone:

- Prometheus (the real binary) scraping them with the job `inferwatch scrape-config --engine
  vllm` generates (its metric_relabel_configs), storing in its own TSDB: bench.scale_prometheus;
- the real ``Collector.run`` (``engine: vllm``) in this process, with a sink that only counts:
  two warm-up intervals (the FIRST scrape, then the one that plans the page's shape), then the
  window. It fetches with aiohttp (monitor/collect/http.py);
- the same collector fetching through one httpx client per target ("httpx": the collector as
  it was before monitor/collect/http.py, and as it still is with a proxy in the environment);
- with ``--uvloop``, the collector on uvloop's event loop instead of asyncio's (needs uvloop);
- the same collector with the page plans turned off: every page parsed and normalized the full
  way, as before monitor/collect/page_plan.py;
- and with the plans off and one HTTP client shared by all targets: the collector as it was
  before both changes (``--no-before`` skips these two runs).

CPU is utime+stime of Prometheus' process, and this process's time.process_time (parse threads
included) for the collector, over windows of the same length; samples are good scrapes x the
page's samples. Then the ratios, and the load: `others` is the cores every other process used
during the collector's window (the target server on core 1 included).

    python -m bench.collector_cpu                         # 5 s interval, N 100,500 (~5 min)
    python -m bench.collector_cpu --targets 100,300 --no-before --repeat 2   # (~5 min)
    python -m bench.collector_cpu --targets 200 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.collector_scale import (
    COLLECTOR_CORE,
    SERVER_CORE,
    OursResult,
    Settings,
    Tally,
    Window,
    _measure_window,
    judge_ours,
    monitor_config,
    start_server,
)
from bench.scale_prometheus import run_prometheus
from bench.scale_targets import build_page
from exporters.sockets import free_port
from monitor.collect.collector import Collector, ScrapeClient, default_http_client
from monitor.collect.page_plan import PageReader
from monitor.stack.processes import find_binary

WARM_UP_INTERVALS = 2


async def _run_collector(n: int, settings: Settings, server_pid: int, shared_client: bool,
                         scrape_client: ScrapeClient) -> tuple[Tally, Window]:
    tally, stop = Tally(), asyncio.Event()
    factory = None
    if shared_client:
        client = default_http_client()
        factory = lambda: client  # noqa: E731 - every target on one pool, as before
    async with Collector(monitor_config(n, settings), tally, http_client_factory=factory,
                         scrape_client=scrape_client) as collector:
        task = asyncio.create_task(collector.run(stop))
        await asyncio.sleep(WARM_UP_INTERVALS * settings.interval)
        window = await _measure_window(settings, server_pid)
        stop.set()
        await task
    return tally, window


def run_collector(n: int, settings: Settings, server_pid: int, shared_client: bool = False,
                  scrape_client: ScrapeClient = "aiohttp", uvloop: bool = False) -> OursResult:
    run = asyncio.run
    if uvloop:
        import uvloop as uvloop_module  # an option of this script, not a dependency
        run = uvloop_module.run
    tally, window = run(_run_collector(n, settings, server_pid, shared_client, scrape_client))
    return judge_ours(n, tally, window, settings)


@contextmanager
def full_path_only() -> Iterator[None]:
    """Page plans off: every page read the full way (parse, normalize, read_page)."""
    planned = PageReader.read_planned
    PageReader.read_planned = lambda self, text, max_bytes: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        PageReader.read_planned = planned  # type: ignore[method-assign]


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text(encoding="ascii").split()[:3])


def measure(n: int, settings: Settings, prometheus: str, server_pid: int,
            before: bool, uvloop: bool) -> dict[str, Any]:
    print(f"N {n}: load average {_loadavg()}", flush=True)
    theirs = run_prometheus(n, settings, prometheus)
    ours = run_collector(n, settings, server_pid)
    row: dict[str, Any] = {"targets": n, "prometheus": asdict(theirs), "collector": asdict(ours)}
    results: list[tuple[str, float, int, int, float, float | None]] = [
        ("prometheus", theirs.cpu_s_per_1k_samples, theirs.scrapes, theirs.expected_scrapes,
         theirs.busy_fraction, None),
        ("collector", ours.cpu_s_per_1k_samples, ours.scrapes, ours.expected_scrapes,
         ours.busy_fraction, ours.other_cores)]
    variants = [("httpx", run_collector(n, settings, server_pid, scrape_client="httpx"))]
    if uvloop:
        variants.append(("uvloop", run_collector(n, settings, server_pid, uvloop=True)))
    if before:
        with full_path_only():
            variants += [("plans off", run_collector(n, settings, server_pid)),
                         ("before", run_collector(n, settings, server_pid, shared_client=True,
                                                  scrape_client="httpx"))]
    for who, result in variants:
        row[f"collector_{who.replace(' ', '_')}"] = asdict(result)
        results.append((who, result.cpu_s_per_1k_samples, result.scrapes,
                        result.expected_scrapes, result.busy_fraction, result.other_cores))
    for who, per_1k, scrapes, due, busy, others in results:
        load = "" if others is None else f", others {others:.2f} cores"
        print(f"N {n:>5} {who:>10}: scrapes {scrapes}/{due}, busy {busy:.2f} cores, "
              f"{per_1k:.4f} CPU s per 1,000 samples{load}", flush=True)
    for who, per_1k, *_ in results[1:]:
        ratio = per_1k / theirs.cpu_s_per_1k_samples
        row[f"{who.replace(' ', '_')}_over_prometheus"] = ratio
        print(f"N {n:>5} {who} / Prometheus CPU per sample: {ratio:.2f}x (goal <= 2x)",
              flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--targets", default="100,500")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window-intervals", type=int, default=3)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--no-before", action="store_true",
                        help="skip the collector runs with the page plans off")
    parser.add_argument("--uvloop", action="store_true",
                        help="also run the collector on uvloop's event loop")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure every N this many times, in turn (the spread)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    prometheus = find_binary(("prometheus",))
    if prometheus is None:
        raise SystemExit("collector_cpu: needs the prometheus binary")
    page = build_page()
    settings = Settings(args.interval, min(5.0, args.interval / 2), args.window_intervals,
                        args.max_concurrent, 0.9, free_port(), page.num_samples)
    print(f"page: {page.num_families} families, {settings.samples_per_page} samples; interval "
          f"{settings.interval:g} s, window {settings.window:g} s; each scraper on core "
          f"{COLLECTOR_CORE} alone, targets on core {SERVER_CORE}", flush=True)
    server = start_server(settings.port)
    os.sched_setaffinity(0, {COLLECTOR_CORE})
    rows = []
    try:
        for _ in range(args.repeat):
            for n in (int(part) for part in args.targets.split(",")):
                rows.append(measure(n, settings, prometheus, server.pid or 0,
                                    not args.no_before, args.uvloop))
    finally:
        server.terminate()
        server.join(10)
    print(f"load average at the end: {_loadavg()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"settings": asdict(settings), "rows": rows},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
