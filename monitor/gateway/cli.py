"""`inferwatch gateway`: flags -> GatewayConfig -> the proxy app on uvicorn."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
from functools import partial
import sys
from typing import Final

import uvicorn
from sqlalchemy.exc import SQLAlchemyError
from prometheus_client import CollectorRegistry, disable_created_metrics

from exporters.sockets import bind_socket
from monitor.gateway.config import GatewayConfig
from monitor.gateway.judge import SloConfigError, load_slo_classes
from monitor.gateway.proxy import Gateway
from monitor.gateway.store_sink import StoreSink
from monitor.store import Store, open_store
from monitor.store.request_events import write_request_events

log = logging.getLogger(__name__)

SALT_ENV: Final = "INFERWATCH_GATEWAY_SALT"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", required=True,
                   help="base URL of the OpenAI-compatible engine, e.g. http://127.0.0.1:8000")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on")
    p.add_argument("--port", type=int, default=8100, help="0 picks a free port")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds the upstream may stay silent (before answering, between "
                        "chunks) before the client gets a 504")
    p.add_argument("--max-tenants", type=int, default=20,
                   help="tenants with their own label value (most requests); the rest 'other'")
    p.add_argument("--tenant-header", default=None,
                   help="take the tenant from this header instead of the API key's hash")
    p.add_argument("--slo-classes", default=None,
                   help="YAML file of SLO classes (default: monitor/gateway/slo_classes.yaml)")
    p.add_argument("--store", default=None, metavar="URL",
                   help="also keep every request as an event in this store (sqlite:///path or "
                        "postgresql+psycopg://...), for exact percentiles and goodput")


def config_from_args(args: argparse.Namespace) -> GatewayConfig:
    salt = os.environ.get(SALT_ENV)
    if not salt:
        # Tenant hashes then change on every restart (new series): fine to try, not to run.
        log.warning("%s not set: API keys are hashed with a random salt for this process",
                    SALT_ENV)
        salt = secrets.token_hex(16)
    return GatewayConfig(upstream=args.upstream, tenant_salt=salt.encode(),
                         timeout_seconds=args.timeout, max_tenants=args.max_tenants,
                         tenant_header=args.tenant_header,
                         slo_classes=load_slo_classes(args.slo_classes))


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except (ValueError, SloConfigError) as exc:
        print(f"inferwatch gateway: {exc}", file=sys.stderr)
        return 2
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    try:
        store = _open_store(args.store)
    except (ValueError, SQLAlchemyError) as exc:
        print(f"inferwatch gateway: cannot open the store: {exc}", file=sys.stderr)
        return 1
    sink = None if store is None else StoreSink(
        partial(write_request_events, store.engine), registry)
    gateway = Gateway(config, registry, sinks=[] if sink is None else [sink])
    try:
        return _serve(args, gateway, sink)
    finally:
        if store is not None:
            store.close()


def _open_store(url: str | None) -> Store | None:
    if url is None:
        return None
    store = open_store(url)
    store.migrate()
    return store


def _serve(args: argparse.Namespace, gateway: Gateway, sink: StoreSink | None) -> int:
    config = gateway.config
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"inferwatch gateway: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    print(f"gateway: http://{host}:{port} -> {config.upstream} (its own /metrics at "
          f"http://{host}:{port}/metrics, OTLP/HTTP traces at http://{host}:{port}/v1/traces)",
          flush=True)
    uv = uvicorn.Server(uvicorn.Config(gateway, log_level="warning", access_log=False))
    if sink is not None:
        sink.start()
    try:
        uv.run(sockets=[sock])
    finally:
        if sink is not None:
            sink.close()
    return 0
