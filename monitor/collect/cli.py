"""`inferwatch collect`: scrape the targets of inferwatch.yaml into the store until stopped,
and evaluate its SLOs and anomalies, alerting through Alertmanager.

`inferwatch serve` without the API (monitor/service/process.py runs both): edits of the
targets are applied without a restart, SIGHUP reloads the config and its SLO files as `serve`
does (monitor/service/reload.py); Ctrl-C or SIGTERM stops it after writing what is queued.
It is a replica like `serve`'s, in the same election (monitor/service/leader.py; on a SQLite
file, file_leader.py): of any number of `collect` and `serve` processes on one store, one is
active and alone scrapes, evaluates and sends; the others stand by and take over within a poll.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from monitor.collect.config import ConfigError, ConfigWatcher
from monitor.service.process import MonitorService, ServeSettings
from monitor.service.reload import SloFiles
from monitor.slo.loaders import SloFileError
from monitor.store import open_store, shown_url
from monitor.store.db import SchemaTooNew


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="inferwatch.yaml", help="targets and store (YAML)")
    p.add_argument("--store", default=None, help="database URL; overrides store.url")


def run(args: argparse.Namespace) -> int:
    try:
        watcher = ConfigWatcher(args.config)
        slo_files = SloFiles()  # remembers what it parsed: a reload parses only edited files
        slos = slo_files.load(watcher.config, Path(args.config).parent)
    except (ConfigError, SloFileError, OSError, ValueError) as exc:
        print(f"inferwatch collect: {exc}", file=sys.stderr)
        return 2
    url = args.store or watcher.config.store.url
    try:
        store = open_store(url)
        store.migrate()
    except SchemaTooNew as exc:
        print(f"inferwatch collect: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # any driver or migration error: say which store, then stop
        print(f"inferwatch collect: cannot open the store {shown_url(url)}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    # No API: the settings' listening address is never used.
    service = MonitorService(watcher, slos, store, ServeSettings(), slo_files)
    service.recorder.start()
    banner = (f"collecting {len(watcher.config.targets)} targets from {args.config} into "
              f"{shown_url(url)}; {len(slos)} SLOs; replica {service.replica.replica_id}")
    try:
        asyncio.run(_collect(service, banner))
    except KeyboardInterrupt:
        pass
    finally:
        service.recorder.stop()
        store.close()
        print(f"stopped; {service.recorder.writer.num_dropped} snapshots dropped", flush=True)
    return 0


async def _collect(service: MonitorService, banner: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, service.reload_in_background, "SIGHUP")
    print(banner, flush=True)  # once the signals are ours
    await service.run(stop, None)
