"""One real Prometheus scraping every recorded engine page through the generated scrape jobs
and rule files, for tests/exporters/test_promconfig_prometheus.py."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from exporters.adapters import detect_engines, normalize_engines
from exporters.exposition import parse_page
from exporters.promconfig import engine_plan, rules_text, scrape_config_text
from monitor.stack.prometheus import prometheus_config, start_prometheus

# A sample as compared: name, labels without job/instance, value.
Series = tuple[str, tuple[tuple[str, str], ...]]
_TARGET_LABELS = ("job", "instance")
# What Prometheus cannot give of a vLLM page (README.md, "What the generated configuration
# cannot reproduce"): value_from_label, vLLM's cache_config_info carries the figures as labels.
VLLM_VALUE_FROM_LABEL = frozenset({
    "only bridge: gen_ai_server_kv_cache_block_size_tokens{}",
    "only bridge: gen_ai_server_kv_cache_blocks_capacity{}",
})


@dataclass(frozen=True)
class Page:
    name: str  # file name under tests/fixtures/engines
    job: str
    engines: tuple[str, ...]
    served: str  # what the HTTP server answers: the page less its non-exposition lines
    bridge: dict[Series, float]  # what the bridge's normalization makes of it


def load_page(path: Path) -> Page | None:
    """The page, or None if no adapter reads it."""
    return page_of(path.name, path.read_text(encoding="utf-8"))


def page_of(name: str, text: str) -> Page | None:
    parsed = parse_page(text, name)
    engines = tuple(detect_engines(parsed))
    if not engines:
        return None
    normalized = normalize_engines(parsed, engines)
    bridge = {(s.name, _key(s.labels)): s.value for f in normalized.families for s in f.samples}
    return Page(name, re.sub(r"[^a-zA-Z0-9_]", "_", name.removesuffix(".prom")), engines,
                _served(text, parsed.problems), bridge)


def _served(text: str, problems: list[Any]) -> str:
    """The recorded page without the lines that are no exposition at all (shell prompts, "..."
    elisions of the docs), which would fail Prometheus' whole scrape; refused values (DCGM's
    sentinels) stay, for the generated rules to refuse."""
    drop = {p.line for p in problems if "sentinel" not in p.message}
    return "".join(line for number, line in enumerate(text.splitlines(keepends=True), start=1)
                   if number not in drop)


@contextmanager
def serving(pages: Mapping[str, str]) -> Iterator[str]:
    """An HTTP server answering /<name>/metrics with ``pages[name]``; yields host:port."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            body = pages.get(self.path.strip("/").removesuffix("/metrics"))
            if body is None:
                self.send_error(404)
                return
            data = body.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def write_config(pages: list[Page], address: str, workdir: Path) -> dict[str, Any]:
    """prometheus.yml: one job per page (the generated job, its path set), the generated
    rule file of each engine; the files the generator writes, as a user would load them."""
    rule_files = []
    for engine in sorted({engine for page in pages for engine in page.engines}):
        path = workdir / f"{engine}-rules.yml"
        path.write_text(rules_text(engine_plan(engine)), encoding="utf-8")
        rule_files.append(str(path))
    config = prometheus_config({}, interval_seconds=1, rule_files=rule_files)
    for page in pages:
        text = scrape_config_text(engine_plan(page.engines[0]), page.job, [address])
        job = yaml.safe_load(text)["scrape_configs"][0]
        job["metrics_path"] = f"/{page.name}/metrics"
        config["scrape_configs"].append(job)
    return config


@contextmanager
def running_prometheus(binary: str, workdir: Path, config: dict[str, Any]) -> Iterator[str]:
    service = start_prometheus(binary, workdir, config)
    try:
        yield service.url
    finally:
        service.stop()


def wait_evaluated(url: str, num_jobs: int, timeout: float = 30.0,
                   scraped_after: datetime | None = None) -> None:
    """Until every target was scraped (with ``scraped_after``: a scrape that started after
    it), then until every rule group evaluated after that."""
    deadline = time.monotonic() + timeout
    all_up: datetime | None = None
    while time.monotonic() < deadline:
        if all_up is None:
            targets = httpx.get(f"{url}/api/v1/targets", timeout=5).json()["data"]
            scraped = [t for t in targets["activeTargets"] if t["health"] == "up"
                       and (scraped_after is None or _time(t["lastScrape"]) > scraped_after)]
            if len(scraped) == num_jobs:
                all_up = datetime.now(UTC)
        else:
            groups = httpx.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"]
            if all(_time(g["lastEvaluation"]) > all_up for g in groups):
                return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus at {url}: targets or rules not ready in {timeout} s; "
                         f"targets: {httpx.get(f'{url}/api/v1/targets', timeout=5).text}")


def _time(text: str) -> datetime:
    """An RFC 3339 time of the API (nanoseconds cut to what datetime holds)."""
    text = re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text)


def prometheus_series(url: str, job: str) -> dict[Series, float]:
    """Every series of ``job`` in the schema (neither raw nor Prometheus' own)."""
    query = f'{{job="{job}", __name__!~"inferwatch_raw:.*|up|scrape_.*"}}'
    result = httpx.get(f"{url}/api/v1/query", params={"query": query},
                       timeout=5).json()["data"]["result"]
    series = {}
    for item in result:
        labels = {k: v for k, v in item["metric"].items() if k not in _TARGET_LABELS}
        name = labels.pop("__name__")
        series[(name, _key(labels))] = float(item["value"][1])
    return series


def differences(bridge: dict[Series, float], prometheus: dict[Series, float]) -> set[str]:
    """Series only one side has, or with other values, as "only bridge: name{...}" etc."""
    out = {f"only bridge: {_describe(s)}" for s in bridge.keys() - prometheus.keys()}
    out |= {f"only prometheus: {_describe(s)}" for s in prometheus.keys() - bridge.keys()}
    out |= {f"value: {_describe(s)}: bridge {bridge[s]!r}, prometheus {prometheus[s]!r}"
            for s in bridge.keys() & prometheus.keys()
            if not math.isclose(bridge[s], prometheus[s], rel_tol=1e-9, abs_tol=1e-12)}
    return out


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _describe(series: Series) -> str:
    name, labels = series
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
