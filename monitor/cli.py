"""The `inferwatch` command: a thin layer over the modules, one subcommand each."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

Runner = Callable[[argparse.Namespace], int]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inferwatch", description=__doc__)
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    from reference_server import cli as server_cli
    p = sub.add_parser("reference-server", help="run the reference continuous-batching server")
    server_cli.add_arguments(p)
    p.set_defaults(run=server_cli.run)

    from exporters import bridge_cli
    p = sub.add_parser("bridge", help="serve an engine's /metrics in the inferwatch schema")
    bridge_cli.add_arguments(p)
    p.set_defaults(run=bridge_cli.run)

    from monitor import collect_cli
    p = sub.add_parser("collect", help="scrape the targets of inferwatch.yaml into the store")
    collect_cli.add_arguments(p)
    p.set_defaults(run=collect_cli.run)

    from monitor import demo
    p = sub.add_parser("demo", help="start the reference server and show it under load")
    demo.add_arguments(p)
    p.set_defaults(run=demo.run)

    from monitor.alerting import silence_cli
    p = sub.add_parser("silence", help="maintenance windows: Alertmanager silences")
    silence_cli.add_arguments(p)
    p.set_defaults(run=silence_cli.run)

    from monitor.slo import rules_cli
    p = sub.add_parser("rules", help="Prometheus SLO rules and their promtool tests")
    rules_cli.add_arguments(p)
    p.set_defaults(run=rules_cli.run)

    from monitor.anomaly import cli as anomaly_cli
    p = sub.add_parser("anomaly", help="anomaly detectors over a timestamp,value CSV")
    anomaly_cli.add_arguments(p)
    p.set_defaults(run=anomaly_cli.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    runner: Runner = args.run
    return runner(args)


if __name__ == "__main__":
    raise SystemExit(main())
