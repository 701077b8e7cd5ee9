"""The bridge exporter: scrape an engine's /metrics, map it onto the schema, serve the result.

Every interval the bridge fetches the target's page (explicit timeout, body size limit), parses
it leniently, normalizes it with the engine's mapping table and swaps the result into a
Collector on the registry it was given. Its own health series sit beside the engine's:

    inferwatch_bridge_up{target}                        1 if the last scrape gave a page, else 0
    inferwatch_bridge_scrape_errors_total{target,reason}
    inferwatch_bridge_scrape_duration_seconds{target}   of the last scrape
    inferwatch_bridge_page_problems_total{target}       lines skipped, values refused, resets
    inferwatch_bridge_last_success_timestamp_seconds{target}
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from exporters.adapters import (
    NormalizedFamily,
    NormalizedPage,
    check_extra_labels,
    load_tables,
    normalize_engines,
)
from exporters.exposition import DEFAULT_MAX_BYTES, PageProblem, parse_page
from exporters.fetch import (
    AUTO,
    SCRAPE_ERROR_REASONS,
    ScrapeError,
    engines_for,
    fetch_page,
    require_samples,
)
from exporters.schema import MetricType

logger = logging.getLogger(__name__)

# A series of a counter or histogram: its family and labels (without le).
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The last normalized page with when it was read and since when each of its counter and
    histogram series counts: first seen by the bridge, or the scrape that found it reset. For
    the OTLP push (exporters/otlp_push.py), which reads it from its own thread."""

    families: tuple[NormalizedFamily, ...]
    time: float  # unix seconds of the scrape
    starts: Mapping[SeriesKey, float]  # unix seconds


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    target: str  # URL of the engine's metrics page
    engine: str = AUTO  # a mapping table name, or auto (detected on every scrape)
    interval_seconds: float = 5.0
    timeout_seconds: float = 3.0
    max_bytes: int = DEFAULT_MAX_BYTES
    extra_labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            url = httpx.URL(self.target)
        except httpx.InvalidURL as exc:
            raise ValueError(f"target {self.target!r}: not a URL ({exc})") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"target {self.target!r}: give an http:// or https:// URL")
        engines = (AUTO, *load_tables())
        if self.engine not in engines:
            raise ValueError(f"engine {self.engine!r}: expected one of {list(engines)}")
        for name, value in (("interval", self.interval_seconds),
                            ("timeout", self.timeout_seconds), ("max_bytes", self.max_bytes)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        check_extra_labels(self.extra_labels)


class NormalizedCollector(Collector):
    """Serves the last normalized page at scrape time; nothing before the first good one."""

    def __init__(self) -> None:
        self._metrics: tuple[Metric, ...] = ()

    def update(self, page: NormalizedPage | None) -> None:
        # One reference swap: a concurrent collect() sees the old page or the new, never a mix.
        self._metrics = () if page is None else tuple(_to_metrics(page))

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def _to_metrics(page: NormalizedPage) -> Iterable[Metric]:
    for family in page.families:
        metric = Metric(family.name, family.help, family.type.value)
        for sample in family.samples:
            metric.add_sample(sample.name, sample.labels, sample.value)
        yield metric


class BridgeHealth:
    """The bridge's own series for one target, every child created up front."""

    def __init__(self, registry: CollectorRegistry, target: str) -> None:
        self.up = Gauge("inferwatch_bridge_up",
                        "1 if the last scrape of the target gave a normalized page, else 0",
                        ["target"], registry=registry).labels(target)
        errors = Counter("inferwatch_bridge_scrape_errors",
                         "Scrapes of the target that gave no usable page, by reason",
                         ["target", "reason"], registry=registry)
        self.errors = {reason: errors.labels(target, reason) for reason in SCRAPE_ERROR_REASONS}
        self.duration = Gauge("inferwatch_bridge_scrape_duration_seconds",
                              "Wall time of the last scrape: fetch, parse and normalize",
                              ["target"], registry=registry).labels(target)
        self.problems = Counter("inferwatch_bridge_page_problems",
                                "Lines skipped, values refused and counter resets seen on the "
                                "target's pages", ["target"], registry=registry).labels(target)
        self.last_success = Gauge("inferwatch_bridge_last_success_timestamp_seconds",
                                  "Unix time of the last scrape that gave a normalized page",
                                  ["target"], registry=registry).labels(target)


class ProblemLog:
    """One warning per page problem, naming target and line, within a budget: a problem seen
    again is not logged again in the same window, and past ``max_lines`` per window the rest
    is only counted (one line says so), so a broken page scraped every 5 s cannot flood."""

    def __init__(self, target: str, window_seconds: float = 600.0, max_lines: int = 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._target = target
        self._window = window_seconds
        self._max_lines = max_lines
        self._clock = clock
        self._window_start = clock()
        self._seen: set[PageProblem] = set()
        self._logged = 0
        self._unlogged = 0

    def report(self, problems: Iterable[PageProblem]) -> None:
        now = self._clock()
        if now - self._window_start >= self._window:
            if self._unlogged:
                logger.warning("target %s: %d more page problems were not logged in the last "
                               "%.0f s", self._target, self._unlogged, self._window)
            self._window_start, self._seen, self._logged, self._unlogged = now, set(), 0, 0
        for problem in problems:
            if problem in self._seen:
                continue
            self._seen.add(problem)
            if self._logged < self._max_lines:
                self._logged += 1
                logger.warning("target %s line %d: %s", self._target, *problem)
                if self._logged == self._max_lines:
                    logger.warning("target %s: log limit of %d problems reached; more are "
                                   "counted in inferwatch_bridge_page_problems_total only",
                                   self._target, self._max_lines)
            else:
                self._unlogged += 1


class Bridge:
    """Scrapes one target into a NormalizedCollector and BridgeHealth on ``registry``."""

    def __init__(self, config: BridgeConfig, registry: CollectorRegistry, client: httpx.Client,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._client = client
        self._clock = clock
        self._collector = NormalizedCollector()
        registry.register(self._collector)
        self._health = BridgeHealth(registry, config.target)
        self._problem_log = ProblemLog(config.target)
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._starts: dict[SeriesKey, float] = {}
        self._reset_series: set[SeriesKey] = set()  # found reset by the last scrape
        # Swapped whole after each scrape (None after a failed one): readers in other
        # threads see one scrape's page or the next, never a mix.
        self.snapshot: Snapshot | None = None
        self._last_error: str | None = None
        self._last_unmapped: list[str] = []

    def run(self, stop: threading.Event) -> None:
        """Scrape every interval until ``stop`` is set."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.scrape_once()
            except Exception:  # a bug must not end the exporter; the next scrape may work
                logger.exception("target %s: scrape failed unexpectedly", self.config.target)
            stop.wait(max(0.0, self.config.interval_seconds - (time.monotonic() - started)))

    def scrape_once(self) -> bool:
        """One scrape; True if it gave a normalized page."""
        started = time.monotonic()
        try:
            page = self._scrape()
        except ScrapeError as exc:
            self._fail(exc)
            return False
        finally:
            self._health.duration.set(time.monotonic() - started)
        now = self._clock()
        self._collector.update(page)
        self.snapshot = Snapshot(page.families, now, self._series_starts(page, now))
        self._health.up.set(1)
        self._health.last_success.set(now)
        if self._last_error is not None:
            logger.info("target %s: scraping again", self.config.target)
            self._last_error = None
        return True

    def _scrape(self) -> NormalizedPage:
        config = self.config
        text = fetch_page(self._client, config.target, config.timeout_seconds, config.max_bytes)
        parsed = parse_page(text, config.target, config.max_bytes)
        self._count_problems(parsed.problems, parsed.num_problems)
        require_samples(parsed, config.target)
        page = normalize_engines(parsed, engines_for(parsed, config.engine), config.extra_labels)
        self._count_problems(page.problems, len(page.problems))
        resets = self._counter_resets(page)
        self._count_problems(resets, len(resets))
        if page.unmapped != self._last_unmapped:
            logger.info("target %s: %s metrics not mapped onto the schema: %s", config.target,
                        "+".join(page.engines), ", ".join(page.unmapped) or "none")
            self._last_unmapped = page.unmapped
        return page

    def _fail(self, exc: ScrapeError) -> None:
        self._health.errors[exc.reason].inc()
        self._health.up.set(0)
        # Drop the last good series instead of serving them again: they vanish from our page,
        # so Prometheus' staleness handling marks them stale at its next scrape rather than
        # recording old values as fresh readings of a target that is down.
        self._collector.update(None)
        self.snapshot = None
        message = f"{exc.reason}: {exc}"
        if message != self._last_error:  # log changes, not every failed scrape of a dead target
            logger.warning("target %s: scrape failed (%s)", self.config.target, message)
            self._last_error = message

    def _count_problems(self, problems: list[PageProblem], count: int) -> None:
        if count:
            self._health.problems.inc(count)
            self._problem_log.report(problems)

    def _counter_resets(self, page: NormalizedPage) -> list[PageProblem]:
        """Counters (and histogram buckets and counts) lower than at the last scrape. They
        are passed through, since rate() handles resets, but reported."""
        current: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        resets: list[PageProblem] = []
        self._reset_series = set()
        for family in page.families:
            if family.type is MetricType.GAUGE:
                continue
            for sample in family.samples:
                if sample.name.endswith("_sum"):  # may fall: observations can be negative
                    continue
                key = (sample.name, tuple(sorted(sample.labels.items())))
                current[key] = sample.value
                before = self._counters.get(key)
                if before is not None and sample.value < before:
                    self._reset_series.add(series_key(family.name, sample.labels))
                    resets.append(PageProblem(sample.line, (
                        f"counter {sample.source} ({sample.name}) went backwards from "
                        f"{before:g} to {sample.value:g}: a reset? passed through")))
        self._counters = current
        return resets

    def _series_starts(self, page: NormalizedPage, now: float) -> dict[SeriesKey, float]:
        """Each counter and histogram series' start: kept from the last scrape, or ``now``
        for a series new to the bridge or found reset (by ``_counter_resets``)."""
        starts: dict[SeriesKey, float] = {}
        for family in page.families:
            if family.type is MetricType.GAUGE:
                continue
            for sample in family.samples:
                key = series_key(family.name, sample.labels)
                if key not in starts:
                    before = self._starts.get(key)
                    starts[key] = (now if before is None or key in self._reset_series
                                   else before)
        self._starts = starts
        return starts


def series_key(family: str, labels: Mapping[str, str]) -> SeriesKey:
    return family, tuple(sorted((k, v) for k, v in labels.items() if k != "le"))


class _MetricsServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scraper must not keep the process alive


class _MetricsServer6(_MetricsServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # no stderr line per scrape


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> tuple[WSGIServer, str]:
    """Serve ``registry`` on http://host:port/metrics in a daemon thread (port 0: any free
    port); the server (shutdown() and server_close() it) and its URL."""
    server_class = _MetricsServer6 if ":" in host else _MetricsServer
    server: WSGIServer = make_server(host, port, make_wsgi_app(registry), server_class,
                                     _QuietHandler)
    # A short poll so that shutdown() returns at once (the default waits up to 0.5 s).
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     name="inferwatch-bridge-http", daemon=True).start()
    bound_host, bound_port = server.socket.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return server, f"http://{shown}:{bound_port}"
