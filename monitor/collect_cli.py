"""`inferwatch collect`: scrape the targets of inferwatch.yaml into the store until stopped,
and evaluate its SLOs and anomalies, alerting through Alertmanager.

The collector, store and alerting of the monitor without the API (that is `inferwatch serve`,
monitor/serve_cli.py): edits of the targets are applied without a restart, SIGHUP reloads the
config and its SLO files as `serve` does (monitor/reload.py); Ctrl-C or SIGTERM stops it after
writing what is queued.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from monitor.alerting.book import AlertBook
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from monitor.anomaly.monitor import AnomalyMonitor
from monitor.anomaly.params import AnomalyParams
from monitor.collector import Collector, follow_config
from monitor.config import ConfigError, ConfigWatcher, MonitorConfig
from monitor.headroom.monitor import HeadroomMonitor
from monitor.recorder import StoreRecorder
from monitor.reload import LiveConfig, SloFiles
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.loaders import SloFileError
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store, open_store

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
    live = LiveConfig(watcher, alerting_loop(watcher.config, store, slos,
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


def load_config_slos(config: MonitorConfig, base: Path) -> list[Slo]:
    """The SLOs of every file or directory the config lists (relative to its own folder)."""
    return SloFiles().load(config, base)


def alerting_loop(config: MonitorConfig, store: Store, slos: list[Slo],
                  current: Callable[[], MonitorConfig] | None = None) -> AlertingLoop:
    """The evaluation loop; ``current`` gives the config in force (edits of the targets'
    capacity apply live), else ``config`` stays."""
    settings = config.alerting
    evaluator = SloEvaluator(slos, StoreSliSource(store), settle_seconds=settings.settle_seconds)
    anomalies = (AnomalyMonitor(store, AnomalyParams(step_seconds=config.anomaly.step_seconds),
                                settle_seconds=settings.settle_seconds,
                                history_seconds=config.anomaly.history_seconds)
                 if config.anomaly.enabled else None)
    book = AlertBook(store, resend_seconds=settings.resend_seconds)
    delivery = (AlertDelivery(settings.alertmanager_urls) if settings.alertmanager_urls
                else None)
    return AlertingLoop(evaluator, book, delivery,
                        interval_seconds=settings.evaluation_interval_seconds,
                        external_url=settings.external_url, anomalies=anomalies,
                        headroom=HeadroomMonitor(store, current or (lambda: config)))


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
