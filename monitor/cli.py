"""The `inferwatch` command: a thin layer over the modules, one subcommand each."""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Callable, Sequence

Runner = Callable[[argparse.Namespace], int]


# name, module (with add_arguments(parser) and run(args) -> exit code), help
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("reference-server", "reference_server.cli",
     "run the reference continuous-batching server"),
    ("bridge", "exporters.bridge_cli", "serve an engine's /metrics in the inferwatch schema"),
    ("collect", "monitor.collect_cli", "scrape the targets of inferwatch.yaml into the store"),
    ("serve", "monitor.serve_cli",
     "the monitor service: collector, SLO evaluation, alerting and the HTTP API"),
    ("demo", "monitor.demo",
     "the whole stack on this machine: reference server, monitor, Prometheus, Alertmanager, "
     "a load that rises and falls and a fault"),
    ("silence", "monitor.alerting.silence_cli", "maintenance windows: Alertmanager silences"),
    ("rules", "monitor.slo.rules_cli", "Prometheus SLO rules and their promtool tests"),
    ("slo", "monitor.slo.cli", "SLO files from measurements: propose one from a sweep"),
    ("dashboards", "monitor.dashboards.cli",
     "Grafana dashboards from the metric schema: generate, push"),
    ("anomaly", "monitor.anomaly.cli", "anomaly detectors over a timestamp,value CSV"),
    ("bench", "monitor.loadgen.cli", "load runs and rate sweeps against an OpenAI endpoint"),
    ("canary", "monitor.canary.cli", "judge a canary against its baseline (Mann-Whitney)"),
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inferwatch", description=__doc__)
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module_name, help_text in _COMMANDS:
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
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
