"""Pieces the end-to-end benchmarks share: a SQLite store in a work directory, and the
collector scraping one target (a reference server, a live engine) into it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

from monitor.collect.collector import Collector
from monitor.collect.config import parse_config
from monitor.collect.recorder import StoreRecorder
from monitor.store import Store, open_store


@contextlib.contextmanager
def sqlite_store(path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{path}")
    store.migrate()
    try:
        yield store
    finally:
        store.close()


@contextlib.asynccontextmanager
async def collecting(store: Store, target: str, base_url: str, scrape_interval: float,
                     source: str, options: Mapping[str, str | int | float] | None = None
                     ) -> AsyncIterator[asyncio.Event]:
    """Scrape ``base_url``/metrics as ``target`` into ``store`` until the block exits; yields
    the stop event (others may run until it is set too). ``options``: more fields of the
    target (e.g. ``engine``, ``max_num_seqs``)."""
    extra = "".join(f", {key}: {value}" for key, value in (options or {}).items())
    config = parse_config(
        f"targets: [{{name: {target}, url: '{base_url}/metrics', "
        f"scrape_interval_seconds: {scrape_interval}, "
        f"scrape_timeout_seconds: {scrape_interval * 0.8}{extra}}}]\n", source)
    recorder = StoreRecorder(store, flush_seconds=0.5)
    recorder.register_targets(config)
    recorder.start()
    stop = asyncio.Event()
    collector = Collector(config, recorder)
    task = asyncio.create_task(collector.run(stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await collector.aclose()  # its scrape session and connections
        recorder.stop()
