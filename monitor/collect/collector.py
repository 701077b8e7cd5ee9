"""The built-in scheduler: every target on its own interval, one Snapshot per attempt.

Each target has a source (monitor/collect/sources.py): its /metrics page scraped here, or its
series read from a PromQL API. The collector decides when, the source what: it asks the
source for the window [last attempt, this attempt) and hands the snapshot to the sink (the
recorder). Snapshots of one target tile time: each starts where the previous attempt ended.
A target whose source fails (timeout, refused, HTTP error, page too large, garbage, no known
engine, a query error) gives a DOWN snapshot with the reason; the scrape source forgets its
baseline then, so the next good scrape is FIRST (gauges only, no deltas), since a target that
was away may have restarted. How increases are computed is monitor/collect/deltas.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

import httpx

from monitor.collect.config import ConfigWatcher, MonitorConfig, TargetConfig
from monitor.collect.http import KEEPALIVE_SECONDS, ScrapeSession, use_aiohttp
from monitor.collect.limits import ConfiguredLimits
from monitor.collect.snapshot import Snapshot, TargetState
from monitor.collect.sources import TargetSource, source_for

logger = logging.getLogger(__name__)

Sink = Callable[[Snapshot], None]
HttpClientFactory = Callable[[], httpx.AsyncClient]
# Which HTTP client fetches scraped pages: aiohttp (monitor/collect/http.py), or each target's
# httpx client (the path before it, kept for proxies from the environment); "auto": aiohttp
# unless the environment sets a proxy.
ScrapeClient = Literal["auto", "aiohttp", "httpx"]


def default_http_client(ssl_context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """A target's httpx client (PromQL queries; scrapes when the environment sets a proxy).
    No pool limit of its own (the collector's semaphore bounds concurrency, and a pool
    wait would read as a target timeout); redirects are not followed, as Prometheus does not.
    ``ssl_context``: one to share between clients (httpx builds one per client otherwise,
    about 20 ms of CPU each)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None,
                          keepalive_expiry=KEEPALIVE_SECONDS)
    return httpx.AsyncClient(limits=limits, follow_redirects=False,
                             verify=True if ssl_context is None else ssl_context)


def shared_tls_clients() -> HttpClientFactory:
    """default_http_client's clients, all with one TLS context (httpx's default one, built at
    the first client)."""
    context: list[ssl.SSLContext] = []

    def factory() -> httpx.AsyncClient:
        if not context:
            context.append(httpx.create_ssl_context())
        return default_http_client(context[0])
    return factory


class TargetClient:
    """One target's own httpx client, made at its first request. Per target, not shared: an
    httpx pool scans its connections on every request, so one client for N targets costs
    O(N) per scrape (7 ms of CPU a scrape at 100 targets fetched at once, against 0.6 ms with
    one client each: bench/collector_cpu.py)."""

    def __init__(self, factory: HttpClientFactory) -> None:
        self._factory = factory
        self._client: httpx.AsyncClient | None = None

    def __call__(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self._factory()
        return self._client

    def take(self) -> httpx.AsyncClient | None:
        """The client, if one was made, now no longer this target's (to close it)."""
        client, self._client = self._client, None
        return client


@dataclass(slots=True, eq=False)
class _Target:
    """What the collector remembers about one target between scrapes."""

    config: TargetConfig
    http: TargetClient = field(repr=False)
    source: TargetSource = field(repr=False)
    limits: ConfiguredLimits = field(repr=False)  # batch limits the engine may not export
    last_attempt: float | None = None  # clock time of the last scrape, the next one's start
    next_due: float | None = None  # clock time scrape_once scrapes it next
    busy: bool = False  # a scrape is queued or in flight: a second one is skipped, not piled
    last_state: TargetState | None = None
    last_error: str | None = None
    removed: bool = False  # by a config edit: its client is closed once no scrape uses it


class Collector:
    """Scrapes the targets of a MonitorConfig and hands every Snapshot to ``sink``."""

    def __init__(self, config: MonitorConfig, sink: Sink, *,
                 http_client_factory: HttpClientFactory | None = None,
                 scrape_client: ScrapeClient = "auto",
                 clock: Callable[[], float] = time.time) -> None:
        self._sink = sink
        self._client_factory = http_client_factory or shared_tls_clients()
        # One aiohttp session for every scraped target (None: their httpx clients fetch).
        self._scrape_session = ScrapeSession() if scrape_client == "aiohttp" or (
            scrape_client == "auto" and use_aiohttp()) else None
        self._retired: list[httpx.AsyncClient] = []  # of removed targets, closed at aclose
        self._closing: set[asyncio.Task[None]] = set()
        self._clock = clock
        self._config = config
        self._semaphore = asyncio.Semaphore(config.max_concurrent_scrapes)
        self._targets = {target.name: self._new_target(target) for target in config.targets}
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
                state.removed = True
                if not state.busy:
                    self._close_client(state)
        for name, target in wanted.items():
            if name not in self._targets:
                self._targets[name] = self._new_target(target)
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
        for state in self._targets.values():
            client = state.http.take()
            if client is not None:
                self._retired.append(client)
        retired, self._retired = self._retired, []
        for client in retired:
            await client.aclose()
        await asyncio.gather(*self._closing, return_exceptions=True)
        if self._scrape_session is not None:
            await self._scrape_session.aclose()

    def _close_client(self, state: _Target) -> None:
        """Close a removed target's client: now in the background, or at aclose."""
        client = state.http.take()
        if client is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._retired.append(client)
            return
        task = loop.create_task(client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

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
            if state.removed:
                self._close_client(state)
        if self._targets.get(state.config.name) is not state:
            return None
        state.last_attempt, state.last_state = started, snapshot.state
        try:
            self._sink(snapshot)
        except Exception:  # the next snapshot may be stored; scraping goes on
            logger.exception("target %s: the snapshot sink failed", state.config.name)
        return snapshot

    async def _snapshot(self, state: _Target, started: float) -> Snapshot:
        """The target's window [last attempt, now) from its source; DOWN when it fails."""
        name = state.config.name
        try:
            snapshot = state.limits.apply(
                await state.source.snapshot(state.last_attempt, started))
        except Exception as exc:  # a bug must not stop the collector; the next scrape may work
            logger.exception("target %s: scrape failed unexpectedly", name)
            state.source.reset()
            start = started if state.last_attempt is None else state.last_attempt
            snapshot = Snapshot(name, start, started, TargetState.DOWN, f"internal: {exc!r}")
        if snapshot.state is TargetState.DOWN:
            error = snapshot.error or "down"
            if error != state.last_error:  # log changes, not every scrape of a dead target
                logger.warning("target %s: down (%s)", name, error)
                state.last_error = error
        elif state.last_error is not None:
            logger.info("target %s: answering again", name)
            state.last_error = None
        return snapshot

    def _new_target(self, config: TargetConfig) -> _Target:
        http = TargetClient(self._client_factory)
        fetch = None if self._scrape_session is None else self._scrape_session.fetch
        source = source_for(config, http, lambda: self._config.max_body_bytes, fetch)
        limits = ConfiguredLimits(config.name, config.max_num_seqs,
                                  config.max_num_batched_tokens)
        return _Target(config, http, source, limits)


def next_slot(slot: float, interval: float, now: float) -> float:
    """The first slot after ``now`` on the grid slot + k * interval, k >= 1."""
    missed = max(0, math.floor((now - slot) / interval))
    return slot + (missed + 1) * interval


def _spread(name: str, interval: float) -> float:
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * interval


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
