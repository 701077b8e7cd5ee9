"""`inferwatch gateway`: flags -> GatewayConfig -> the proxy app on uvicorn."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from functools import partial
from typing import TYPE_CHECKING, Final

import uvicorn
from sqlalchemy.exc import SQLAlchemyError
from prometheus_client import CollectorRegistry, disable_created_metrics

from exporters.sockets import bind_socket
from exporters.otlp_config import add_otlp_metrics_arguments
from exporters.otlp_config import otlp_metrics_config as otlp_metrics_config
from monitor.gateway.config import GatewayConfig
from monitor.gateway.judge import SloConfigError, load_slo_classes
from monitor.gateway.proxy import Gateway
from monitor.gateway.store_sink import StoreSink
from monitor.store import Store, open_store
from monitor.store.request_events import write_request_events

if TYPE_CHECKING:
    from monitor.gateway.otlp_metrics import OtlpMetricsExport

log = logging.getLogger(__name__)

SALT_ENV: Final = "INFERWATCH_GATEWAY_SALT"
_FD_CEILING: Final = 1 << 20
_FD_WARN_BELOW: Final = 4096


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
    add_otlp_metrics_arguments(
        p, "the gen_ai.server.* histograms and token/request counters, pushed over OTLP/HTTP "
        "protobuf as well as served on /metrics (needs the otlp extra)")

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
                         slo_classes=load_slo_classes(args.slo_classes),
                         otlp_metrics=otlp_metrics_config(args, os.environ))


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
    try:
        otlp = _otlp_export(config, registry)
    except ImportError as exc:
        log.debug("OTLP metrics push unavailable: %s", exc)
        print("inferwatch gateway: the OTLP metrics push needs opentelemetry-sdk and "
              "opentelemetry-exporter-otlp-proto-http; install inferwatch[otlp] "
              "(pip install 'inferwatch[otlp]')", file=sys.stderr)
        if store is not None:
            store.close()
        return 2
    gateway = Gateway(config, registry, sinks=[] if sink is None else [sink],
                      mirrors=[] if otlp is None else [otlp])
    try:
        return _serve(args, gateway, sink)
    finally:
        if otlp is not None:
            otlp.close()  # a last push, bounded by its timeout
        if store is not None:
            store.close()


def _otlp_export(config: GatewayConfig, registry: CollectorRegistry
                 ) -> OtlpMetricsExport | None:
    if config.otlp_metrics is None:
        return None
    from monitor.gateway.otlp_metrics import OtlpMetricsExport  # the optional extra

    return OtlpMetricsExport(config.otlp_metrics, registry, config.upstream)


def _open_store(url: str | None) -> Store | None:
    if url is None:
        return None
    store = open_store(url)
    store.migrate()
    return store


def _raise_fd_limit() -> None:
    """Each stream holds two sockets (client, upstream): lift the soft file limit to the
    hard one, as a default soft limit of 1024 would cap the gateway near 500 streams."""
    try:
        import resource
    except ImportError:  # not on this platform: its own limits apply
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _FD_CEILING if hard == resource.RLIM_INFINITY else min(hard, _FD_CEILING)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the open-file limit from %d: %s", soft, exc)
    if soft != resource.RLIM_INFINITY and soft < _FD_WARN_BELOW:
        log.warning("open-file limit %d: the gateway holds at most ~%d streams at once",
                    soft, soft // 2 - 20)


def _serve(args: argparse.Namespace, gateway: Gateway, sink: StoreSink | None) -> int:
    config = gateway.config
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"inferwatch gateway: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return 1
    _raise_fd_limit()
    host, port = sock.getsockname()[:2]
    print(f"gateway: http://{host}:{port} -> {config.upstream} (its own /metrics at "
          f"http://{host}:{port}/metrics, OTLP/HTTP traces at http://{host}:{port}/v1/traces)",
          flush=True)
    if (otlp := config.otlp_metrics) is not None:
        print(f"gateway: OTLP metrics pushed to {otlp.endpoint} every "
              f"{otlp.interval_seconds:g} s ({otlp.temporality})", flush=True)
    uv = uvicorn.Server(uvicorn.Config(gateway, log_level="warning", access_log=False))
    if sink is not None:
        sink.start()
    try:
        uv.run(sockets=[sock])
    finally:
        if sink is not None:
            sink.close()
    return 0
