"""The pieces of a live monitoring stack for the dashboard test: recorded engine pages on a
static HTTP server, `inferwatch bridge` in front of them, and a real Prometheus scraping every
target each second with the SLO recording and alerting rules loaded."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from exporters.bridge import Bridge, BridgeConfig, serve_metrics
from monitor.collect.config import parse_config
from monitor.headroom.capacity import Capacity, headroom
from monitor.headroom.metrics import HeadroomCollector
from monitor.headroom.monitor import HeadroomMonitor, TargetHeadroom
from monitor.loadgen.dimensions import Dimension
from monitor.stack.prometheus import prometheus_config, start_prometheus
from tests.exporters.engine_fixtures import catalog, read_fixture
from tests.http_thread import serving_handler
from tests.monitor.prometheus_fixture import RunningPrometheus, prometheus_binary

# Two GPUs of an 80 GB H100 under load, in DCGM's units (MiB, percent, W, C, MHz).
_DCGM_VALUES = {
    "DCGM_FI_DEV_FB_USED": 61440.0, "DCGM_FI_DEV_FB_FREE": 18944.0,
    "DCGM_FI_DEV_FB_RESERVED": 640.0, "DCGM_FI_DEV_GPU_UTIL": 87.0,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 42.0, "DCGM_FI_DEV_POWER_USAGE": 512.5,
    "DCGM_FI_DEV_GPU_TEMP": 64.0, "DCGM_FI_DEV_SM_CLOCK": 1980.0,
}


def headroom_page() -> str:
    """The monitor's /metrics headroom series, written by its own collector for a target at
    half its request capacity and 30% of its prompt-token capacity."""
    store: Any = None  # the statuses are set here; the store is never read
    monitor = HeadroomMonitor(store, lambda: parse_config("", "inferwatch.yaml"))
    load = {Dimension.REQUESTS: 2.0, Dimension.PROMPT_TOKENS: 700.0}
    capacity = Capacity({Dimension.REQUESTS: 4.0, Dimension.PROMPT_TOKENS: 1000.0},
                        Dimension.PROMPT_TOKENS, "configured")
    monitor.statuses = {"reference": TargetHeadroom(
        "reference", 0.0, "ok", headroom(load, capacity.values), capacity, 0.2)}
    registry = CollectorRegistry()
    registry.register(HeadroomCollector(monitor))
    return generate_latest(registry).decode()


def dcgm_page() -> str:
    """A dcgm-exporter page with every default field for GPUs 0 and 1.

    The recorded page (tests/fixtures/engines/dcgm-exporter.prom) shows only clock and
    temperature fields, and the dashboards need memory and utilization: so, as the adapter
    tests do, the page is assembled from the exporter's default counter catalog, with the
    recorded page's label names and GPU 0's UUID, and values chosen above."""
    recorded = read_fixture("dcgm-exporter.prom")
    uuid = re.search(r'gpu="0", UUID="([^"]+)"', recorded)
    assert uuid is not None, "dcgm-exporter.prom: no GPU 0 sample"
    uuids = (uuid[1], "GPU-0a1b2c3d-0000-4000-8000-000000000001")
    lines = []
    for row in catalog("dcgm"):
        if row.type not in ("gauge", "counter"):
            continue  # DCGM_FI_DRIVER_VERSION is a label, not a metric
        lines.append(f"# TYPE {row.name} {row.type}")
        for gpu, gpu_uuid in enumerate(uuids):
            value = _DCGM_VALUES.get(row.name, 1.0)
            lines.append(f'{row.name}{{gpu="{gpu}", UUID="{gpu_uuid}"}} {value!r}')
    return "\n".join(lines) + "\n"


class _PageHandler(BaseHTTPRequestHandler):
    pages: Mapping[str, str] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = self.pages.get(self.path)
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def static_pages(pages: Mapping[str, str]) -> Iterator[str]:
    """Serve each text at its path; yield the base URL."""
    handler = type("Pages", (_PageHandler,), {"pages": dict(pages)})
    with serving_handler(handler) as url:
        yield url


@contextmanager
def running_bridge(target: str, engine: str) -> Iterator[str]:
    """`inferwatch bridge` (its Bridge and HTTP server, in threads) scraping ``target`` every
    second; yield its host:port."""
    registry = CollectorRegistry()
    stop = threading.Event()
    with httpx.Client(trust_env=False) as client:
        bridge = Bridge(BridgeConfig(target=target, engine=engine, interval_seconds=1.0),
                        registry, client)
        assert bridge.scrape_once(), f"the bridge could not read {target}"
        thread = threading.Thread(target=bridge.run, args=(stop,), daemon=True)
        thread.start()
        server, url = serve_metrics(registry, "127.0.0.1", 0)
        try:
            yield url.removeprefix("http://")
        finally:
            stop.set()
            thread.join(10)
            server.shutdown()
            server.server_close()


def fast_rules(source: Path, destination: Path, interval: str = "1s") -> Path:
    """The rule file with every group evaluated each ``interval`` (1m and 5m in the file), so
    that the recorded series and alerts exist within seconds; the rules are unchanged."""
    rules = yaml.safe_load(source.read_text())
    for group in rules["groups"]:
        group["interval"] = interval
    destination.write_text(yaml.safe_dump(rules, sort_keys=False, width=1_000_000))
    return destination


@contextmanager
def prometheus_with_rules(workdir: Path, jobs: Mapping[str, str],
                          rule_file: Path) -> Iterator[RunningPrometheus]:
    """Prometheus (the demo's launcher) scraping each job's host:port every second,
    evaluating ``rule_file``."""
    binary = prometheus_binary()
    config = prometheus_config({job: f"http://{address}" for job, address in jobs.items()},
                               interval_seconds=1.0, rule_files=[str(rule_file)])
    service = start_prometheus(binary, workdir, config)
    try:
        yield RunningPrometheus(service.url, service.child.process,
                                workdir / "prometheus.log")
    finally:
        service.stop()
