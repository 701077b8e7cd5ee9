"""The built-in scraper: every target on its own interval, one Snapshot per scrape.

Per target the collector keeps the cumulative values of its last good scrape and turns the
next scrape into increases over [last attempt, this attempt):

- counters, each histogram bucket, _sum and _count: ``now - before``, or ``now`` when the
  value went down (a restart reset it: Prometheus' rate() reads it the same way) or the series
  is new since the last scrape (it started from 0 in between);
- a histogram whose bounds changed, or any of whose buckets or count went down, restarts as a
  whole: its delta is its current content (per-bucket reset detection could mix a reset bucket
  with a non-reset neighbour and give negative bucket counts);
- gauges: the reading, as ``GaugeStats.of(value)``.

A target that does not answer (timeout, refused, HTTP error, page too large, garbage, no known
engine) gives a DOWN snapshot with the reason and no values, and forgets its baseline: the
next good scrape is FIRST (gauges only, no deltas), since a target that was away may have
restarted. Snapshots of one target tile time: each starts where the previous attempt ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

import httpx

from exporters.fetch import ScrapeError, fetch_page_async
from monitor.config import ConfigWatcher, MonitorConfig, TargetConfig
from monitor.promql_source import PromQLError, PromQLSource
from monitor.scrape import CumulativeHistogram, Reading, normalize_text, read_page
from monitor.snapshot import GaugeStats, HistogramDelta, SeriesKey, Snapshot, TargetState

logger = logging.getLogger(__name__)

Sink = Callable[[Snapshot], None]
HttpClientFactory = Callable[[], httpx.AsyncClient]


def default_http_client() -> httpx.AsyncClient:
    """No pool limit of its own (the collector's semaphore bounds concurrency, and a pool
    wait would read as a target timeout); redirects are not followed, as Prometheus does not."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncClient(limits=limits, follow_redirects=False)


@dataclass(slots=True, eq=False)
class _Target:
    """What the collector remembers about one target between scrapes."""

    config: TargetConfig
    previous: Reading | None = None  # last good scrape; None: the next one is FIRST
    last_attempt: float | None = None  # clock time of the last scrape, the next one's start
    next_due: float | None = None  # clock time scrape_once scrapes it next
    busy: bool = False  # a scrape is queued or in flight: a second one is skipped, not piled
    last_state: TargetState | None = None
    last_error: str | None = None


class Collector:
    """Scrapes the targets of a MonitorConfig and hands every Snapshot to ``sink``."""

    def __init__(self, config: MonitorConfig, sink: Sink, *,
                 http_client_factory: HttpClientFactory = default_http_client,
                 clock: Callable[[], float] = time.time) -> None:
        self._sink = sink
        self._client_factory = http_client_factory
        self._client: httpx.AsyncClient | None = None
        self._clock = clock
        self._config = config
        self._semaphore = asyncio.Semaphore(config.max_concurrent_scrapes)
        self._targets = {target.name: _Target(target) for target in config.targets}
        self._tasks: dict[str, asyncio.Task[None]] | None = None  # while run() runs

    @property
    def config(self) -> MonitorConfig:
        return self._config

    def last_state(self, name: str) -> TargetState | None:
        """The state of the target's last scrape; None before its first."""
        return self._targets[name].last_state

    def apply_config(self, new: MonitorConfig) -> None:
        """Take a new config without a restart: removed targets stop, added ones start, changed
        ones start over (FIRST next), unchanged ones keep their baseline and schedule."""
        if new.max_concurrent_scrapes != self._config.max_concurrent_scrapes:
            # Scrapes holding the old semaphore finish under it; new ones queue on this one.
            self._semaphore = asyncio.Semaphore(new.max_concurrent_scrapes)
        wanted = {target.name: target for target in new.targets}
        for name, state in list(self._targets.items()):
            if wanted.get(name) != state.config:
                del self._targets[name]
                self._stop_task(name)
        for name, target in wanted.items():
            if name not in self._targets:
                self._targets[name] = _Target(target)
                self._start_task(self._targets[name])
        self._config = new

    async def scrape_once(self) -> list[Snapshot]:
        """Scrape every target that is due (never scraped, or its interval has passed since
        its last slot) concurrently, within max_concurrent_scrapes; their snapshots."""
        now = self._clock()
        due = [state for state in self._targets.values() if not state.busy
               and (state.next_due is None or state.next_due <= now)]
        for state in due:
            interval = state.config.scrape_interval_seconds
            state.next_due = now + interval if state.next_due is None else next_slot(
                state.next_due, interval, now)
            state.busy = True
        results = await asyncio.gather(*(self._scrape(state) for state in due))
        return [snapshot for snapshot in results if snapshot is not None]

    async def run(self, stop: asyncio.Event) -> None:
        """Scrape every target on its own schedule until ``stop`` is set."""
        tasks: dict[str, asyncio.Task[None]] = {}
        self._tasks = tasks  # apply_config starts and stops tasks in it from now on
        for state in self._targets.values():
            self._start_task(state)
        try:
            await stop.wait()
        finally:
            self._tasks = None
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Collector:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def _start_task(self, state: _Target) -> None:
        if self._tasks is not None:
            name = state.config.name
            self._tasks[name] = asyncio.create_task(self._every_interval(state),
                                                    name=f"scrape {name}")

    def _stop_task(self, name: str) -> None:
        if self._tasks is not None and name in self._tasks:
            self._tasks.pop(name).cancel()

    async def _every_interval(self, state: _Target) -> None:
        """Scrape on the grid first + k * interval of the loop's monotonic clock (no drift);
        a scrape that overruns skips the slots it missed. The first slot is spread over the
        interval by a hash of the name, so that targets do not all start at once."""
        loop = asyncio.get_running_loop()
        interval = state.config.scrape_interval_seconds
        slot = loop.time() + _spread(state.config.name, interval)
        while True:
            await asyncio.sleep(max(0.0, slot - loop.time()))
            if not state.busy:
                state.busy = True
                await self._scrape(state)
            slot = next_slot(slot, interval, loop.time())

    async def _scrape(self, state: _Target) -> Snapshot | None:
        """One scrape of a target marked busy; its snapshot, also given to the sink (None if
        the target was removed or changed meanwhile: its result describes an old config)."""
        try:
            async with self._semaphore:
                started = self._clock()
                snapshot = await self._snapshot(state, started)
        finally:
            state.busy = False
        if self._targets.get(state.config.name) is not state:
            return None
        state.last_attempt, state.last_state = started, snapshot.state
        try:
            self._sink(snapshot)
        except Exception:  # the next snapshot may be stored; scraping goes on
            logger.exception("target %s: the snapshot sink failed", state.config.name)
        return snapshot

    async def _snapshot(self, state: _Target, started: float) -> Snapshot:
        target, max_bytes = state.config, self._config.max_body_bytes
        start = started if state.last_attempt is None else state.last_attempt
        if target.promql_selector is not None:
            return await self._promql_snapshot(state, start, started)
        try:
            text = await fetch_page_async(self._http(), target.url, target.scrape_timeout_seconds,
                                    max_bytes)
            # In a thread: parsing a large page must not stall the event loop, where it would
            # make the other targets' fetches overrun their timeouts.
            reading = await asyncio.to_thread(_read, text, target, max_bytes)
        except ScrapeError as exc:
            return self._down(state, start, started, f"{exc.reason}: {exc}")
        except Exception as exc:  # a bug must not stop the collector; the next scrape may work
            logger.exception("target %s: scrape failed unexpectedly", target.name)
            return self._down(state, start, started, f"internal: {exc!r}")
        if state.last_error is not None:
            logger.info("target %s: answering again", target.name)
            state.last_error = None
        snapshot = build_snapshot(target.name, state.previous, reading, start, started)
        state.previous = reading
        return snapshot

    async def _promql_snapshot(self, state: _Target, start: float, started: float) -> Snapshot:
        """The window from a PromQL API, lagging ``promql_delay_seconds`` behind now."""
        target = state.config
        assert target.promql_selector is not None
        delay = target.promql_delay_seconds
        if state.last_attempt is None:  # no window yet: the next one starts here
            return Snapshot(target.name, started - delay, started - delay, TargetState.FIRST)
        source = PromQLSource(target.url, self._http(), target.scrape_timeout_seconds,
                              target.promql_selector)
        try:
            snapshot = await source.snapshot(target.name, start - delay, started - delay)
        except PromQLError as exc:  # an invalid selector: the config's fault, say so each time
            return self._down(state, start - delay, started - delay, f"promql: {exc}")
        if snapshot.state is TargetState.DOWN:
            return self._down(state, start - delay, started - delay, snapshot.error or "down")
        return snapshot

    def _down(self, state: _Target, start: float, end: float, error: str) -> Snapshot:
        state.previous = None
        if error != state.last_error:  # log changes, not every scrape of a dead target
            logger.warning("target %s: down (%s)", state.config.name, error)
            state.last_error = error
        return Snapshot(state.config.name, start, end, TargetState.DOWN, error)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client


def _read(text: str, target: TargetConfig, max_bytes: int) -> Reading:
    return read_page(normalize_text(text, target, max_bytes))


def next_slot(slot: float, interval: float, now: float) -> float:
    """The first slot after ``now`` on the grid slot + k * interval, k >= 1."""
    missed = max(0, math.floor((now - slot) / interval))
    return slot + (missed + 1) * interval


def _spread(name: str, interval: float) -> float:
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * interval


def build_snapshot(target: str, previous: Reading | None, current: Reading, start: float,
                   end: float) -> Snapshot:
    """The snapshot of ``current`` against the previous good reading (FIRST if none)."""
    gauges = {key: GaugeStats.of(value) for key, value in current.gauges.items()}
    if previous is None:
        return Snapshot(target, start, end, TargetState.FIRST, None, {}, gauges, {})
    histograms = {key: histogram_delta(previous.histograms.get(key), histogram)
                  for key, histogram in current.histograms.items()}
    return Snapshot(target, start, end, TargetState.UP, None,
                    counter_increases(previous.counters, current.counters), gauges, histograms)


def counter_increases(previous: Mapping[SeriesKey, float],
                      current: Mapping[SeriesKey, float]) -> dict[SeriesKey, float]:
    """Increase per series with rate()'s reset rule; a new series counts from 0."""
    increases: dict[SeriesKey, float] = {}
    for key, value in current.items():
        before = previous.get(key)
        increases[key] = value if before is None or value < before else value - before
    return increases


def histogram_delta(previous: CumulativeHistogram | None,
                    current: CumulativeHistogram) -> HistogramDelta:
    """The observations between two readings of one histogram series, per bucket."""
    if previous is None or _restarted(previous, current):
        base_cumulative, base_sum, base_count = (0.0,) * len(current.cumulative), 0.0, 0.0
    else:
        base_cumulative, base_sum, base_count = previous.cumulative, previous.sum, previous.count
    counts: list[float] = []
    below = 0.0
    for now, before in zip(current.cumulative, base_cumulative):
        # The running maximum (as histogram_quantile's monotonic fix) keeps a bucket count of
        # a page with non-monotonic buckets at 0 instead of negative.
        cumulative = max(now - before, below)
        counts.append(cumulative - below)
        below = cumulative
    return HistogramDelta(current.bounds, tuple(counts), current.sum - base_sum,
                          current.count - base_count)


def _restarted(previous: CumulativeHistogram, current: CumulativeHistogram) -> bool:
    return (previous.bounds != current.bounds or current.count < previous.count
            or any(now < before for now, before in zip(current.cumulative, previous.cumulative)))


async def follow_config(watcher: ConfigWatcher, collector: Collector, stop: asyncio.Event,
                        poll_seconds: float = 5.0,
                        on_change: Callable[[MonitorConfig], None] | None = None) -> None:
    """Apply every good edit of the watched file to the collector until ``stop`` is set."""
    while not stop.is_set():
        new = watcher.poll()
        if new is not None:
            collector.apply_config(new)
            if on_change is not None:
                on_change(new)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), poll_seconds)
