"""CPU per sample and targets per core: vmagent (the generated vLLM relabelings, remote-writing
into VictoriaMetrics) against the embedded collector (engine: vllm) on the same pages.

The targets and the collector's run are bench.collector_scale's: N targets serving one vLLM V1
page generated from the catalog, at /t/<i>/metrics, from a process pinned to core 1; the
Collector pinned to core 0. Then one vmagent, pinned to core 0 alone, scrapes the same N
targets at the same interval with the job `inferwatch scrape-config --engine vllm` generates
(its metric_relabel_configs: normalization, everything unmapped dropped) and remote-writes to
a VictoriaMetrics pinned to core 1 (storage is not counted, as the collector's sink stores
nothing). vmagent's CPU is utime+stime of /proc/<pid>/stat over the window, its scrapes and
samples the increase of vm_promscrape_scraped_samples_count and _sum over the same window.
A third run ("raw") is the same vmagent without the relabelings (every sample written):
what normalization costs it. Targets per core = N / busy (cores), meaningful where the run
kept its schedule (scrapes = due). "others" = cores used by every other process, the target
server and VictoriaMetrics on core 1 included (the meter counts all but this process; the
vmagent's own CPU is taken out).

    python -m bench.scale_shards                   # 5 s interval, N 100,500,1000
    python -m bench.scale_shards --interval 15 --targets 500,2000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.collector_scale import (
    COLLECTOR_CORE,
    PROM_DISCOVERY_SECONDS,
    SERVER_CORE,
    OursResult,
    Settings,
    process_cpu_seconds,
    run_ours,
    start_server,
    stop_process,
)
from bench.cpu_meter import OtherCpuMeter
from bench.scale_targets import build_page
from exporters.promconfig import engine_plan, scrape_job
from exporters.sockets import free_port
from monitor.stack.processes import find_binary

_SAMPLES_RE = re.compile(r"^vm_promscrape_scraped_samples_(sum|count) (\S+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class VmagentResult:
    targets: int
    scrapes: int
    expected_scrapes: int
    samples: int
    cpu_seconds: float
    busy_fraction: float
    cpu_s_per_1k_samples: float
    other_cores: float | None


def vmagent_config(n: int, settings: Settings, relabel: bool = True) -> dict[str, Any]:
    """The generated vLLM job, its targets one static group each (distinct path and a
    ``target`` label: the address is shared, and vmagent's sharding hashes the labels);
    without ``relabel``, the job less its metric_relabel_configs (every sample kept)."""
    ms = f"{round(settings.interval * 1000)}ms"
    job = scrape_job(engine_plan("vllm"), "scale", [])
    if not relabel:
        del job["metric_relabel_configs"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{settings.port}"],
                              "labels": {"__metrics_path__": f"/t/{i}/metrics", "target": f"t{i}"}}
                             for i in range(n)]
    return {"global": {"scrape_interval": ms,
                       "scrape_timeout": f"{round(settings.timeout * 1000)}ms"},
            "scrape_configs": [job]}


def _pinned(core: int) -> Any:
    return lambda: os.sched_setaffinity(0, {core})


def _start(argv: list[str], core: int, log: Path, health: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, preexec_fn=_pinned(core))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(health, timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_process(process)
    raise RuntimeError(f"{argv[0]} not healthy at {health}; see {log}")


def _scraped(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {kind: float(value) for kind, value in _SAMPLES_RE.findall(text)}


def run_vmagent(n: int, settings: Settings, binaries: dict[str, str],
                relabel: bool = True) -> VmagentResult:
    with tempfile.TemporaryDirectory(prefix="scale_shards_") as tmp:
        work = Path(tmp)
        config = vmagent_config(n, settings, relabel)
        (work / "vmagent.yml").write_text(yaml.safe_dump(config))
        vm_port, agent_port = free_port(), free_port()
        vm = _start([binaries["victoria-metrics"], f"-storageDataPath={work / 'vm'}",
                     f"-httpListenAddr=127.0.0.1:{vm_port}"], SERVER_CORE, work / "vm.log",
                    f"http://127.0.0.1:{vm_port}/health")
        try:
            url = f"http://127.0.0.1:{agent_port}"
            agent = _start([binaries["vmagent"], f"-promscrape.config={work / 'vmagent.yml'}",
                            f"-remoteWrite.url=http://127.0.0.1:{vm_port}/api/v1/write",
                            f"-remoteWrite.tmpDataPath={work / 'buffer'}",
                            f"-httpListenAddr=127.0.0.1:{agent_port}"], COLLECTOR_CORE,
                           work / "vmagent.log", f"{url}/health")
            try:
                return _measure(agent, url, n, settings)
            finally:
                stop_process(agent)
        finally:
            stop_process(vm)


def _measure(agent: subprocess.Popen[bytes], url: str, n: int,
             settings: Settings) -> VmagentResult:
    time.sleep(PROM_DISCOVERY_SECONDS + settings.interval)  # warm-up: every target scraped
    before, cpu, meter, start = (_scraped(url), process_cpu_seconds(agent.pid), OtherCpuMeter(),
                                 time.time())
    time.sleep(settings.window)
    after, cpu = _scraped(url), process_cpu_seconds(agent.pid) - cpu
    wall, others = time.time() - start, meter.cores()
    scrapes = int(after["count"] - before["count"])
    samples = int(after["sum"] - before["sum"])
    # The meter counts every process but this one: vmagent's own CPU is not "others".
    others = None if others is None else max(0.0, others - cpu / wall)
    return VmagentResult(n, scrapes, n * settings.window_intervals, samples, cpu, cpu / wall,
                         1000 * cpu / max(1, samples), others)


def _per_core(targets: int, busy: float) -> float:
    return targets / busy if busy > 0 else float("inf")


Row = tuple[OursResult, VmagentResult, VmagentResult]


def report(runs: Sequence[Row]) -> list[dict[str, Any]]:
    rows = []
    print(f"{'N':>6} {'who':>9} {'scrapes/due':>13} {'samples':>9} {'cpu_s':>6} {'busy':>5} "
          f"{'cpu_s/1k':>9} {'targets/core':>12} {'samples/s/core':>14} {'others':>6}")
    for our, their, raw in runs:
        results: tuple[tuple[str, OursResult | VmagentResult], ...] = (
            ("collector", our), ("vmagent", their), ("raw", raw))
        for who, r in results:
            per_core = _per_core(r.targets, r.busy_fraction)
            rate = r.samples / max(1e-9, r.cpu_seconds)
            others = "n/a" if r.other_cores is None else f"{r.other_cores:.2f}"
            print(f"{r.targets:>6} {who:>9} {r.scrapes:>6}/{r.expected_scrapes:<6} "
                  f"{r.samples:>9} {r.cpu_seconds:>6.2f} {r.busy_fraction:>5.2f} "
                  f"{r.cpu_s_per_1k_samples:>9.4f} {per_core:>12.0f} {rate:>14.0f} "
                  f"{others:>6}", flush=True)
            rows.append({"who": who, "targets_per_core": per_core,
                         "samples_per_cpu_second": rate, **asdict(r)})
        print(f"{'':>6} collector/vmagent CPU per sample: "
              f"{our.cpu_s_per_1k_samples / their.cpu_s_per_1k_samples:.2f}x", flush=True)
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--targets", default="100,500,1000")
    parser.add_argument("--window-intervals", type=int, default=3)
    parser.add_argument("--max-concurrent", type=int, default=64)
    parser.add_argument("--json", type=Path)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    names = ("victoria-metrics", "vmagent")
    found = {name: find_binary((name,)) for name in names}
    binaries = {name: path for name, path in found.items() if path is not None}
    if len(binaries) < len(names):
        raise SystemExit("scale_shards: needs victoria-metrics and vmagent "
                         "(apt-get install victoria-metrics)")
    page = build_page()
    settings = Settings(args.interval, min(5.0, args.interval / 2), args.window_intervals,
                        args.max_concurrent, 0.9, free_port(), page.num_samples)
    print(f"page: {page.num_families} families, {settings.samples_per_page} samples; interval "
          f"{settings.interval:g} s, window {settings.window:g} s; collector, then vmagent, on "
          f"core {COLLECTOR_CORE}; targets and VictoriaMetrics on core {SERVER_CORE}", flush=True)
    server = start_server(settings.port)
    os.sched_setaffinity(0, {COLLECTOR_CORE})
    runs: list[Row] = []
    try:
        for n in (int(part) for part in args.targets.split(",")):
            runs.append((run_ours(n, settings, server.pid or 0),
                         run_vmagent(n, settings, binaries),
                         run_vmagent(n, settings, binaries, relabel=False)))
    finally:
        server.terminate()
        server.join(10)
    rows = report(runs)
    if args.json:
        args.json.write_text(json.dumps({"settings": asdict(settings), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
