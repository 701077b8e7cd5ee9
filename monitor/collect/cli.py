"""`inferwatch collect`: scrape the targets of inferwatch.yaml into the store until stopped,
and evaluate its SLOs and anomalies, alerting through Alertmanager.

The collector, store and alerting of the monitor without the API (that is `inferwatch serve`,
monitor/service/cli.py): edits of the targets are applied without a restart, SIGHUP reloads
the config and its SLO files as `serve` does (monitor/service/reload.py); Ctrl-C or SIGTERM
stops it after writing what is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from monitor.collect.collector import Collector, follow_config
from monitor.collect.config import ConfigError, ConfigWatcher
from monitor.collect.recorder import StoreRecorder
from monitor.service.evaluation import evaluation_loop
from monitor.service.reload import LiveConfig, SloFiles
from monitor.slo.loaders import SloFileError
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
    slo_files = SloFiles()  # remembers what it parsed: a reload parses only edited files
    try:
        slos = slo_files.load(watcher.config, Path(args.config).parent)
    except (SloFileError, OSError, ValueError) as exc:
        print(f"inferwatch collect: {exc}", file=sys.stderr)
        return 2
    url = args.store or watcher.config.store.url
    store = open_store(url)
    store.migrate()
    recorder = StoreRecorder(store)
    recorder.register_targets(watcher.config)
    recorder.start()
    # Always an alerting loop and an evaluator, even without SLOs: a reload may add some.
    live = LiveConfig(watcher, evaluation_loop(watcher.config, store, slos,
                                             lambda: watcher.config), recorder,
                      slo_files=slo_files)
    banner = (f"collecting {len(watcher.config.targets)} targets from {args.config} into "
              f"{url}; {len(slos)} SLOs")
    try:
        asyncio.run(_collect(live, banner))
    except KeyboardInterrupt:
        pass
    finally:
        recorder.stop()
        store.close()
        print(f"stopped; {recorder.writer.num_dropped} snapshots dropped", flush=True)
    return 0


async def _collect(live: LiveConfig, banner: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, live.reload_in_background, "SIGHUP")
    print(banner, flush=True)  # once the signals are ours
    watcher, recorder = live.watcher, live.recorder
    collector = live.collector = Collector(watcher.config, recorder)
    await asyncio.gather(
        collector.run(stop), live.alerting.run(stop),
        follow_config(watcher, collector, stop, on_change=recorder.register_targets))
