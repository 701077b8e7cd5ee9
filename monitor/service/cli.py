"""`inferwatch serve`: the monitor service (collector, SLO and anomaly evaluation, alerting,
and the HTTP API) until SIGINT or SIGTERM; SIGHUP reloads the config and SLO files."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from monitor.collect.config import ConfigError, ConfigWatcher
from monitor.service.reload import SloFiles
from monitor.service.process import MonitorService, ServeSettings
from monitor.slo.loaders import SloFileError
from monitor.store import open_store, shown_url
from monitor.store.db import SchemaTooNew

logger = logging.getLogger(__name__)
TOKEN_ENV = "INFERWATCH_API_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="inferwatch.yaml", help="targets, SLOs, store (YAML)")
    p.add_argument("--store", default=None, help="database URL; overrides store.url")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (loopback by default; others need --token)")
    p.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    p.add_argument("--token", default=None,
                   help=f"bearer token for changes (default: ${TOKEN_ENV}); none: read-only")


def run(args: argparse.Namespace) -> int:
    try:
        settings = ServeSettings(args.host, args.port, args.token or os.environ.get(TOKEN_ENV))
        watcher = ConfigWatcher(args.config)
        slo_files = SloFiles()  # remembers what it parsed: a reload parses only edited files
        slos = slo_files.load(watcher.config, Path(args.config).parent)
    except (ConfigError, SloFileError, OSError, ValueError) as exc:
        print(f"inferwatch serve: {exc}", file=sys.stderr)
        return 2
    url = args.store or watcher.config.store.url
    try:
        store = open_store(url)
        store.migrate()
    except SchemaTooNew as exc:
        print(f"inferwatch serve: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # any driver or migration error: say which store, then stop
        print(f"inferwatch serve: cannot open the store {shown_url(url)}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    service = MonitorService(watcher, slos, store, settings, slo_files)
    try:
        sock = service.bind()
    except OSError as exc:
        print(f"inferwatch serve: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        store.close()
        return 2
    service.recorder.start()
    print(f"inferwatch serve: {len(watcher.config.targets)} targets, {len(slos)} SLOs, store "
          f"{shown_url(url)}", flush=True)
    try:
        asyncio.run(_serve(service, sock))
    except KeyboardInterrupt:
        pass
    finally:
        service.recorder.stop()
        store.close()
        sock.close()
        print(f"inferwatch serve: stopped; {service.recorder.writer.num_dropped} snapshots "
              "dropped", flush=True)
    return 0


async def _serve(service: MonitorService, sock: socket.socket) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, service.reload_in_background, "SIGHUP")

    def listening(url: str) -> None:
        print(f"inferwatch serve: listening on {url} (docs: {url}/docs)", flush=True)

    await service.run(stop, sock, listening)
