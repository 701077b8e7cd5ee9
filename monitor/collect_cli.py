"""`inferwatch collect`: scrape the targets of inferwatch.yaml into the store until stopped.

The collector and store of the monitor without the API (that is `inferwatch serve`, to come):
edits of the config file are applied without a restart; Ctrl-C or SIGTERM stops it after
writing what is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from monitor.collector import Collector, follow_config
from monitor.config import ConfigError, ConfigWatcher
from monitor.recorder import StoreRecorder
from monitor.store import open_store

logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="inferwatch.yaml", help="targets and store (YAML)")
    p.add_argument("--store", default=None, help="database URL; overrides store.url")


def run(args: argparse.Namespace) -> int:
    try:
        watcher = ConfigWatcher(args.config)
    except (ConfigError, OSError) as exc:
        print(f"inferwatch collect: {exc}", file=sys.stderr)
        return 2
    url = args.store or watcher.config.store.url
    store = open_store(url)
    store.migrate()
    recorder = StoreRecorder(store)
    recorder.register_targets(watcher.config)
    recorder.start()
    print(f"collecting {len(watcher.config.targets)} targets from {args.config} into {url}",
          flush=True)
    try:
        asyncio.run(_collect(watcher, recorder))
    except KeyboardInterrupt:
        pass
    finally:
        recorder.stop()
        store.close()
        print(f"stopped; {recorder.writer.num_dropped} snapshots dropped", flush=True)
    return 0


async def _collect(watcher: ConfigWatcher, recorder: StoreRecorder) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    collector = Collector(watcher.config, recorder)
    await asyncio.gather(collector.run(stop),
                         follow_config(watcher, collector, stop,
                                       on_change=recorder.register_targets))
