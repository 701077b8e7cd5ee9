"""One Prometheus shard's CPU per sample on bench.scale_shards' pages, next to vmagent's in
the same run: N targets serving the generated vLLM V1 page (bench.collector_scale's server,
pinned to core 1); Prometheus pinned to core 0 alone, scraping them with the job
`inferwatch scrape-config --engine vllm` generates (the same job vmagent gets), storing in
its own TSDB (counted: a Prometheus shard stores what it scrapes, where vmagent's
VictoriaMetrics is not counted). Scrapes are the increase of
prometheus_target_interval_length_seconds_count over the window; samples are scrapes x
the page's samples (every target serves the same page), as vmagent counts them before
relabeling.

    python -m bench.scale_prometheus                    # 5 s interval, N 100,500
    python -m bench.scale_prometheus --targets 100,500,1000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import httpx
import yaml

from bench.collector_scale import (
    COLLECTOR_CORE,
    PROM_DISCOVERY_SECONDS,
    SERVER_CORE,
    ScraperResult,
    Settings,
    process_cpu_seconds,
    start_server,
    stop_process,
)
from bench.scale_shards import _start, run_vmagent, vmagent_config
from bench.scale_targets import build_page
from exporters.sockets import free_port
from monitor.stack.processes import find_binary

_SCRAPES_RE = re.compile(r"^prometheus_target_interval_length_seconds_count\{[^}]*\} (\S+)$",
                         re.MULTILINE)


def _scrapes(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(value) for value in _SCRAPES_RE.findall(text))


def _check_scraped(url: str, n: int, samples_per_page: int) -> None:
    """Every target up, with the whole page read and part of it stored: else the CPU figure
    would be that of failed scrapes."""
    def value(promql: str) -> float:
        result = httpx.get(f"{url}/api/v1/query", params={"query": promql},
                           timeout=10).json()["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0
    up, scraped = value('sum(up{job="scale"})'), value('sum(scrape_samples_scraped{job="scale"})')
    stored = value('sum(scrape_samples_post_metric_relabeling{job="scale"})')
    print(f"prometheus: {up:.0f} of {n} up, {scraped / n:.0f} samples scraped and "
          f"{stored / n:.0f} kept per target (page: {samples_per_page})", flush=True)
    if up != n or scraped != n * samples_per_page:
        raise RuntimeError("prometheus did not scrape every page whole")


def run_prometheus(n: int, settings: Settings, binary: str) -> ScraperResult:
    """Prometheus' figures, in vmagent's result type (the same columns)."""
    with tempfile.TemporaryDirectory(prefix="scale_prometheus_") as tmp:
        work = Path(tmp)
        (work / "prometheus.yml").write_text(yaml.safe_dump(vmagent_config(n, settings)))
        url = f"http://127.0.0.1:{free_port()}"
        prometheus = _start([binary, f"--config.file={work / 'prometheus.yml'}",
                             f"--storage.tsdb.path={work / 'tsdb'}",
                             f"--web.listen-address={url.removeprefix('http://')}"],
                            COLLECTOR_CORE, work / "prometheus.log", f"{url}/-/ready")
        try:
            time.sleep(PROM_DISCOVERY_SECONDS + settings.interval)  # every target scraped
            before, cpu, start = _scrapes(url), process_cpu_seconds(prometheus.pid), time.time()
            time.sleep(settings.window)
            scrapes = int(_scrapes(url) - before)
            cpu, wall = process_cpu_seconds(prometheus.pid) - cpu, time.time() - start
            _check_scraped(url, n, settings.samples_per_page)
        finally:
            stop_process(prometheus)
    samples = scrapes * settings.samples_per_page
    return ScraperResult(n, scrapes, n * settings.window_intervals, samples, cpu, cpu / wall,
                         1000 * cpu / max(1, samples), None)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="100,500")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window-intervals", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    names = ("prometheus", "victoria-metrics", "vmagent", "vmalert")
    binaries = {name: find_binary((name,)) for name in names}
    if any(path is None for path in binaries.values()):
        raise SystemExit(f"scale_prometheus: needs {', '.join(names)}")
    found = {name: path for name, path in binaries.items() if path is not None}
    page = build_page()
    settings = Settings(args.interval, min(5.0, args.interval / 2), args.window_intervals,
                        100, 0.9, free_port(), page.num_samples)
    server = start_server(settings.port)
    os.sched_setaffinity(0, {SERVER_CORE})
    rows = []
    try:
        for n in (int(part) for part in args.targets.split(",")):
            prometheus = run_prometheus(n, settings, found["prometheus"])
            vmagent, _ = run_vmagent(n, settings, found)
            for who, r in (("prometheus", prometheus), ("vmagent", vmagent)):
                print(f"N {n:>5} {who:>10}: scrapes {r.scrapes}/{r.expected_scrapes}, CPU "
                      f"{r.cpu_seconds:.2f} s, busy {r.busy_fraction:.2f} cores, "
                      f"{r.cpu_s_per_1k_samples:.4f} CPU s per 1,000 samples", flush=True)
                rows.append({"who": who, **asdict(r)})
    finally:
        server.terminate()
        server.join(10)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
