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
vmagent's own CPU is taken out). Then vmalert (core 0) evaluates the generated recording
rules over what that vmagent wrote, every interval: its mean iteration time, missed
iterations, its CPU and VictoriaMetrics' extra CPU (against a window without vmalert).

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
    ScraperResult,
    Settings,
    process_cpu_seconds,
    run_ours,
    start_server,
    stop_process,
)
from bench.cpu_meter import OtherCpuMeter
from bench.scale_targets import build_page
from exporters.promconfig import engine_plan, rules_text, scrape_job
from exporters.sockets import free_port
from monitor.stack.processes import find_binary

_SAMPLES_RE = re.compile(r"^vm_promscrape_scraped_samples_(sum|count) (\S+)$", re.MULTILINE)
_ITERATION_RE = re.compile(r"^vmalert_iteration_(duration_seconds_sum|duration_seconds_count|"
                           r"missed_total)\{group=\"inferwatch-normalize-vllm\"[^}]*\} (\S+)$",
                           re.MULTILINE)


@dataclass(frozen=True, slots=True)
class RulesResult:
    """vmalert evaluating the generated vLLM rules over what the vmagent wrote."""

    targets: int
    iterations: int
    missed: int
    mean_iteration_s: float
    vmalert_cpu_seconds: float
    victoria_metrics_extra_cpu_seconds: float  # over the same window without vmalert


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
                relabel: bool = True) -> tuple[ScraperResult, RulesResult | None]:
    """vmagent's figures; with ``relabel``, also vmalert's on the rules over what it wrote."""
    with tempfile.TemporaryDirectory(prefix="scale_shards_") as tmp:
        work = Path(tmp)
        config = vmagent_config(n, settings, relabel)
        (work / "vmagent.yml").write_text(yaml.safe_dump(config))
        vm_port, agent_port = free_port(), free_port()
        # Samples visible at once (by default queries leave out the last 30 s: vmalert would
        # find nothing of a vmagent started seconds ago).
        vm = _start([binaries["victoria-metrics"], f"-storageDataPath={work / 'vm'}",
                     f"-httpListenAddr=127.0.0.1:{vm_port}", "-search.latencyOffset=0s"],
                    SERVER_CORE, work / "vm.log", f"http://127.0.0.1:{vm_port}/health")
        try:
            url = f"http://127.0.0.1:{agent_port}"
            agent = _start([binaries["vmagent"], f"-promscrape.config={work / 'vmagent.yml'}",
                            f"-remoteWrite.url=http://127.0.0.1:{vm_port}/api/v1/write",
                            f"-remoteWrite.tmpDataPath={work / 'buffer'}",
                            f"-httpListenAddr=127.0.0.1:{agent_port}"], COLLECTOR_CORE,
                           work / "vmagent.log", f"{url}/health")
            try:
                result = _measure(agent, url, n, settings)
                rules = (_measure_rules(binaries["vmalert"], work, vm, vm_port, n, settings)
                         if relabel else None)
                return result, rules
            finally:
                stop_process(agent)
        finally:
            stop_process(vm)


def _measure_rules(binary: str, work: Path, vm: subprocess.Popen[bytes], vm_port: int, n: int,
                   settings: Settings) -> RulesResult:
    """VictoriaMetrics' CPU over a window, then vmalert's and VictoriaMetrics' with vmalert
    evaluating the normalization rules every interval (pinned to core 0 beside vmagent)."""
    vm_idle = process_cpu_seconds(vm.pid)
    time.sleep(settings.window)
    vm_idle = process_cpu_seconds(vm.pid) - vm_idle
    (work / "rules.yml").write_text(rules_text(engine_plan("vllm")))
    port, base = free_port(), f"http://127.0.0.1:{vm_port}"
    url = f"http://127.0.0.1:{port}"
    vmalert = _start([binary, f"-rule={work / 'rules.yml'}", f"-datasource.url={base}",
                      f"-remoteWrite.url={base}", f"-httpListenAddr=127.0.0.1:{port}",
                      f"-evaluationInterval={round(settings.interval * 1000)}ms"],
                     COLLECTOR_CORE, work / "vmalert.log", f"{url}/health")
    try:
        time.sleep(2 * settings.interval)  # warm-up: the first evaluations
        before, cpu, vm_cpu = (_iterations(url), process_cpu_seconds(vmalert.pid),
                               process_cpu_seconds(vm.pid))
        time.sleep(settings.window)
        after = _iterations(url)
        cpu, vm_cpu = (process_cpu_seconds(vmalert.pid) - cpu,
                       process_cpu_seconds(vm.pid) - vm_cpu)
    finally:
        stop_process(vmalert)
    count = after["duration_seconds_count"] - before["duration_seconds_count"]
    seconds = after["duration_seconds_sum"] - before["duration_seconds_sum"]
    return RulesResult(n, int(count), int(after["missed_total"] - before["missed_total"]),
                       seconds / max(1.0, count), cpu, vm_cpu - vm_idle)


def _iterations(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = {kind: float(value) for kind, value in _ITERATION_RE.findall(text)}
    return {kind: found.get(kind, 0.0) for kind in
            ("duration_seconds_sum", "duration_seconds_count", "missed_total")}


def _measure(agent: subprocess.Popen[bytes], url: str, n: int,
             settings: Settings) -> ScraperResult:
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
    return ScraperResult(n, scrapes, n * settings.window_intervals, samples, cpu, cpu / wall,
                         1000 * cpu / max(1, samples), others)


def _per_core(targets: int, busy: float) -> float:
    return targets / busy if busy > 0 else float("inf")


Row = tuple[OursResult, ScraperResult, ScraperResult]


def report(runs: Sequence[Row]) -> list[dict[str, Any]]:
    rows = []
    print(f"{'N':>6} {'who':>9} {'scrapes/due':>13} {'samples':>9} {'cpu_s':>6} {'busy':>5} "
          f"{'cpu_s/1k':>9} {'targets/core':>12} {'samples/s/core':>14} {'others':>6}")
    for our, their, raw in runs:
        results: tuple[tuple[str, OursResult | ScraperResult], ...] = (
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


def report_rules(results: Sequence[RulesResult], settings: Settings) -> None:
    print(f"{'N':>6} {'iterations':>10} {'missed':>6} {'mean_iter_s':>11} {'vmalert_busy':>12} "
          f"{'vm_extra_busy':>13}")
    for r in results:
        print(f"{r.targets:>6} {r.iterations:>10} {r.missed:>6} {r.mean_iteration_s:>11.2f} "
              f"{r.vmalert_cpu_seconds / settings.window:>12.2f} "
              f"{r.victoria_metrics_extra_cpu_seconds / settings.window:>13.2f}", flush=True)


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
    names = ("victoria-metrics", "vmagent", "vmalert")
    found = {name: find_binary((name,)) for name in names}
    binaries = {name: path for name, path in found.items() if path is not None}
    if len(binaries) < len(names):
        raise SystemExit("scale_shards: needs victoria-metrics, vmagent and vmalert "
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
    rules: list[RulesResult] = []
    try:
        for n in (int(part) for part in args.targets.split(",")):
            ours = run_ours(n, settings, server.pid or 0)
            theirs, rule_result = run_vmagent(n, settings, binaries)
            raw, _ = run_vmagent(n, settings, binaries, relabel=False)
            runs.append((ours, theirs, raw))
            rules += [rule_result] if rule_result is not None else []
    finally:
        server.terminate()
        server.join(10)
    rows = report(runs)
    report_rules(rules, settings)
    if args.json:
        args.json.write_text(json.dumps({"settings": asdict(settings), "rows": rows,
                                         "rules": [asdict(r) for r in rules]}, indent=2))


if __name__ == "__main__":
    main()
