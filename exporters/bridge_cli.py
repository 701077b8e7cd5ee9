"""`inferwatch bridge`: command-line flags -> BridgeConfig -> Bridge, served over HTTP."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

import httpx
from prometheus_client import CollectorRegistry, disable_created_metrics

from exporters.adapters import load_tables
from exporters.bridge import Bridge, BridgeConfig, serve_metrics
from exporters.fetch import AUTO
from exporters.exposition import DEFAULT_MAX_BYTES
from exporters.otlp_config import (
    OtlpMetricsConfig,
    add_otlp_metrics_arguments,
    otlp_headers,
    otlp_metrics_config,
)
from exporters.otlp_push import OtlpMetricsPush, resource_attributes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default=AUTO, choices=(AUTO, *load_tables()),
                   help="mapping table of the target's engine; auto detects it on every scrape")
    p.add_argument("--target", required=True,
                   help="URL of the engine's metrics page, e.g. http://127.0.0.1:8000/metrics")
    p.add_argument("--port", type=int, required=True,
                   help="port of the bridge's own /metrics; 0 picks a free one")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between scrapes")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds one scrape may take")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help="largest page accepted; a larger one fails the scrape")
    p.add_argument("--label", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="labels added to every normalized series (e.g. model=NAME for engines "
                        "whose metrics carry no model); repeatable")
    add_otlp_metrics_arguments(
        p, "the normalized page (gen_ai.server.* histograms, counters, gauges) pushed over "
        "OTLP/HTTP protobuf as well as served on /metrics; cumulative temporality",
        temporalities=("cumulative",))


def config_from_args(args: argparse.Namespace) -> BridgeConfig:
    labels: dict[str, str] = {}
    for item in args.label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--label {item!r}: expected KEY=VALUE")
        labels[key] = value
    return BridgeConfig(target=args.target, engine=args.engine, interval_seconds=args.interval,
                        timeout_seconds=args.timeout, max_bytes=args.max_bytes,
                        extra_labels=labels)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        otlp = otlp_metrics_config(args, os.environ)
        if otlp is not None and otlp.temporality != "cumulative":
            raise ValueError(f"OTLP temporality {otlp.temporality!r}: the bridge pushes "
                             "cumulative only (it forwards the engine's cumulative counts)")
        resource = resource_attributes(config.target, os.environ)
        headers = otlp_headers(os.environ)
    except ValueError as exc:
        print(f"inferwatch bridge: {exc}", file=sys.stderr)
        return 2
    # No *_created series for our own counters. Process-wide, so set here at the entry point.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    stop = threading.Event()
    # trust_env off: a scrape goes straight to the target, never through an env proxy.
    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        bridge = Bridge(config, registry, client)
        push = None if otlp is None else OtlpMetricsPush(otlp, bridge, registry, resource,
                                                            headers)
        try:
            server, url = serve_metrics(registry, args.host, args.port)
        except OSError as exc:
            print(f"inferwatch bridge: cannot listen on {args.host}:{args.port}: {exc}",
                  file=sys.stderr)
            return 1
        print(f"bridge: {config.target} (engine {config.engine}) every "
              f"{config.interval_seconds:g} s", flush=True)
        _print_push(otlp)
        print(f"listening on {url}", flush=True)
        if push is not None:
            push.start()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            bridge.run(stop)
        except KeyboardInterrupt:
            pass
        finally:
            if push is not None:
                push.close()  # a last push, bounded by its timeout
            server.shutdown()
            server.server_close()
    return 0


def _print_push(otlp: OtlpMetricsConfig | None) -> None:
    if otlp is not None:
        print(f"bridge: OTLP metrics pushed to {otlp.endpoint} every "
              f"{otlp.interval_seconds:g} s (cumulative)", flush=True)


if __name__ == "__main__":  # until `inferwatch bridge` is wired: python -m exporters.bridge_cli
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per scrape otherwise
    parser = argparse.ArgumentParser(prog="inferwatch bridge", description=__doc__)
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
