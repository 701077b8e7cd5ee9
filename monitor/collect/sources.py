"""Where a target's snapshots come from: the seam between the scheduler and the data.

A ``TargetSource`` answers one question: what did this target do over [start, end)? The
collector (monitor/collect/collector.py) asks it on the target's interval. Two sources exist:

- ``ScrapeSource``: the embedded scraper. It fetches the target's /metrics page, normalizes it
  to the inferwatch schema (the target's engine table) and turns it into increases against the
  last good reading (monitor/collect/deltas.py). A failed scrape forgets that reading.
- ``PromQLTargetSource``: the target's series read from a Prometheus-compatible API (a target
  with ``promql_selector``), lagging ``promql_delay_seconds`` behind now so the scrape engine
  has written the window (monitor/collect/promql.py does the queries). Its first reading has
  the gauges the scraper's first scrape would have (the last samples then), so the detectors
  downstream (the growth of requests in flight, the first step with data) see the same.

Both return a DOWN snapshot with the reason when the data cannot be had; anything else they
raise is a bug, which the collector turns into a DOWN snapshot too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import httpx

from exporters.fetch import ScrapeError, fetch_page_async
from monitor.collect.config import TargetConfig
from monitor.collect.deltas import build_snapshot
from monitor.collect.http import PageFetch
from monitor.collect.promql import PromQLError, PromQLSource
from monitor.collect.page_plan import PageReader
from monitor.collect.scrape import Reading
from monitor.collect.snapshot import Snapshot, TargetState

HttpClient = Callable[[], httpx.AsyncClient]


def httpx_fetch(http: HttpClient) -> PageFetch:
    """The scrape fetch through the target's httpx client (exporters.fetch.fetch_page_async):
    the path for targets reached through a proxy from the environment (monitor/collect/http.py
    has the aiohttp one, for all others)."""
    async def fetch(url: str, timeout: float, max_bytes: int) -> str:
        return await fetch_page_async(http(), url, timeout, max_bytes)
    return fetch


class TargetSource(Protocol):
    async def snapshot(self, start: float | None, end: float) -> Snapshot:
        """The target over [start, end); ``start`` is None for the first attempt."""

    def reset(self) -> None:
        """Forget what was read so far (after a failure the collector could not attribute)."""


class ScrapeSource:
    """A target's /metrics page, scraped by the monitor itself."""

    def __init__(self, target: TargetConfig, http: HttpClient, max_bytes: Callable[[], int],
                 fetch: PageFetch | None = None) -> None:
        """``fetch``: how the page is fetched (monitor/collect/http.py); None: through the
        target's httpx client ``http``."""
        self.target = target
        self._fetch = fetch or httpx_fetch(http)
        self._max_bytes = max_bytes
        self.previous: Reading | None = None  # last good scrape; None: the next one is FIRST
        self.reader = PageReader(target)  # the page's plan while its shape stays the same

    async def snapshot(self, start: float | None, end: float) -> Snapshot:
        target, max_bytes = self.target, self._max_bytes()
        start = end if start is None else start
        try:
            text = await self._fetch(target.url, target.scrape_timeout_seconds, max_bytes)
            # A page of the last pages' shape is read through its plan at once (a fraction of
            # a millisecond); else in a thread: parsing a large page must not stall the event
            # loop, where it would make the other targets' fetches overrun their timeouts.
            reading = self.reader.read_planned(text, max_bytes)
            if reading is None:
                reading = await asyncio.to_thread(self.reader.read, text, max_bytes)
        except ScrapeError as exc:
            self.previous = None
            return Snapshot(target.name, start, end, TargetState.DOWN, f"{exc.reason}: {exc}")
        snapshot = build_snapshot(target.name, self.previous, reading, start, end)
        self.previous = reading
        return snapshot

    def reset(self) -> None:
        self.previous = None


class PromQLTargetSource:
    """A target's series in a Prometheus-compatible API, picked by its ``promql_selector``."""

    def __init__(self, target: TargetConfig, http: HttpClient) -> None:
        assert target.promql_selector is not None
        self.target = target
        self._http = http

    async def snapshot(self, start: float | None, end: float) -> Snapshot:
        target, delay = self.target, self.target.promql_delay_seconds
        source = PromQLSource(target.url, self._http(), target.scrape_timeout_seconds,
                              target.promql_selector or "")
        if start is None:  # no window yet: the next one starts here
            try:  # with the gauges, as the scraper's first reading has them
                return await source.first(target.name, end - delay)
            except PromQLError:  # without: the next window says what is wrong
                return Snapshot(target.name, end - delay, end - delay, TargetState.FIRST)
        try:
            return await source.snapshot(target.name, start - delay, end - delay)
        except PromQLError as exc:  # an invalid selector: the config's fault, say so each time
            return Snapshot(target.name, start - delay, end - delay, TargetState.DOWN,
                            f"promql: {exc}")

    def reset(self) -> None:
        pass  # each window is read whole from the API: nothing carried between attempts


def source_for(target: TargetConfig, http: HttpClient, max_bytes: Callable[[], int],
               fetch: PageFetch | None = None) -> TargetSource:
    """The source a target's config asks for. ``http``: the target's httpx client (PromQL
    queries); ``fetch``: how a scraped target's page is fetched (None: through ``http``)."""
    if target.promql_selector is not None:
        return PromQLTargetSource(target, http)
    return ScrapeSource(target, http, max_bytes, fetch)

