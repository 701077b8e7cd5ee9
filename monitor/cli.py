"""The `inferwatch` command: a thin layer over the modules, one subcommand each.

Only the chosen subcommand's module is imported, so the monitor's commands run where the
reference server's extra (torch, safetensors, tokenizers) is not installed; the commands that
need it say so and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

Runner = Callable[[argparse.Namespace], int]

# The modules that `pip install inferwatch[server]` adds (pyproject.toml's "server" extra).
SERVER_EXTRA: Final = "server"
SERVER_MODULES: Final = ("torch", "safetensors", "tokenizers")


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    module: str  # has add_arguments(parser) and run(args) -> exit code
    help: str
    extra: str | None = None  # the install extra it needs beyond the monitor's dependencies


COMMANDS: Final[tuple[Command, ...]] = (
    Command("reference-server", "reference_server.cli",
            "run the reference continuous-batching server", extra=SERVER_EXTRA),
    Command("bridge", "exporters.bridge_cli",
            "serve an engine's /metrics in the inferwatch schema"),
    Command("scrape-config", "exporters.promconfig.cli",
            "Prometheus/vmagent scrape job (metric_relabel_configs) and recording rules that "
            "normalize an engine's /metrics without a bridge"),
    Command("kubernetes", "monitor.kubernetes.cli",
            "prometheus-operator objects (PrometheusRule, PodMonitor, ServiceMonitor) for "
            "kube-prometheus-stack, from the mapping tables and the SLO specs"),
    Command("collect", "monitor.collect.cli",
            "scrape the targets of inferwatch.yaml into the store"),
    Command("doctor", "monitor.collect.doctor",
            "an engine's /metrics page against its mapping table: version, mapped, not "
            "mapped, ignored, undecided and missing metrics (exit 1 if any undecided or "
            "missing)"),
    Command("serve", "monitor.service.cli",
            "the monitor service: collector, SLO evaluation, alerting and the HTTP API"),
    Command("demo", "monitor.demo",
            "the whole stack on this machine: reference server, monitor, Prometheus, "
            "Alertmanager, a load that rises and falls and a fault", extra=SERVER_EXTRA),
    Command("silence", "monitor.alerting.silence_cli",
            "maintenance windows: Alertmanager silences"),
    Command("rules", "monitor.slo.rules_cli",
            "Prometheus SLO rules and their promtool tests; anomaly rules (rules anomaly)"),
    Command("slo", "monitor.slo.cli",
            "SLO files from measurements (propose); an SLO's HTML report from the store"),
    Command("dashboards", "monitor.dashboards.cli",
            "Grafana dashboards from the metric schema: generate, push"),
    Command("anomaly", "monitor.anomaly.cli", "anomaly detectors over a timestamp,value CSV"),
    Command("bench", "monitor.loadgen.cli",
            "load runs and rate sweeps against an OpenAI endpoint"),
    Command("canary", "monitor.canary.cli",
            "judge a canary against its baseline (Mann-Whitney)"),
    Command("gateway", "monitor.gateway.cli",
            "an OpenAI-compatible streaming proxy that measures and judges every request "
            "(TTFT, ITL, outcome by model, tenant, SLO class) on its own /metrics; also takes "
            "vLLM's OTLP request spans on /v1/traces"),
    Command("requests", "monitor.store.requests_cli",
            "exact latency percentiles and goodput of the request events the gateway stored "
            "(--store), over any window, per tenant, class or model, against any thresholds"),
    Command("export", "monitor.export_cli",
            "the API's SLOs, SLO history, targets, series, alerts or runs as CSV or Parquet"),
)


def chosen_command(argv: Sequence[str]) -> Command | None:
    """The subcommand named in ``argv`` (the first word that is not an option or the value of
    --log-level), or None (``--help``, nothing, or an unknown word argparse will refuse)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return next((c for c in COMMANDS if c.name == word), None)
    return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a finder that refuses it
        return False


def missing_modules(command: Command) -> list[str]:
    """The modules of the command's install extra that cannot be imported here."""
    if command.extra != SERVER_EXTRA:
        return []
    return [name for name in SERVER_MODULES if not _importable(name)]


def _build_parser(chosen: Command | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inferwatch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        if command == chosen:  # only this one's module is imported
            module = importlib.import_module(command.module)
            module.add_arguments(p)
            p.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_command(argv)
    if chosen is not None and (missing := missing_modules(chosen)):
        print(f"inferwatch {chosen.name}: {', '.join(missing)} not installed; "
              f"install inferwatch[{chosen.extra}] (pip install 'inferwatch[{chosen.extra}]')",
              file=sys.stderr)
        return 2
    args = _build_parser(chosen).parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    runner: Runner = args.run
    return runner(args)


if __name__ == "__main__":
    raise SystemExit(main())
