"""`inferwatch demo` (what `make run` runs): the whole stack on one machine, one command.

Starts the reference server on CPU, the monitor (`inferwatch serve`) with its SQLite store,
Alertmanager and Prometheus when their binaries exist (otherwise a built-in receiver logs the
alerts), and a load that rises and falls; injects a fault a third of the way in; shows tokens/s,
batch utilization, p99 TTFT, each SLO's budget left and the alerts as they fire and resolve.
Ctrl-C stops everything it started. The parts are in ``monitor.stack``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.stack.display import Console
from monitor.stack.faults import KINDS, FaultPlan
from monitor.stack.launch import StackOptions
from monitor.stack.load import LoadShape
from monitor.stack.reference import reference_server
from monitor.stack.session import DemoOptions, run_demo

__all__ = ["add_arguments", "reference_server", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=600.0,
                   help="seconds of load once the stack is up (default 600)")
    p.add_argument("--model", default="tiny", help="the reference server's model")
    p.add_argument("--low-rate", type=float, default=1.0, help="requests/s at start and end")
    p.add_argument("--peak-rate", type=float, default=5.0, help="requests/s mid-run")
    p.add_argument("--fault-kind", default="error_rate", choices=[*KINDS, "none"])
    p.add_argument("--fault-at", type=float, default=None,
                   help="seconds into the load (default: 35%% of --duration)")
    p.add_argument("--fault-duration", type=float, default=None,
                   help="seconds (default: a tenth of --duration, 30 to 60)")
    p.add_argument("--fault-value", type=float, default=None,
                   help="the fault's value (default per kind, e.g. error_rate 0.5)")
    p.add_argument("--no-prometheus", action="store_true", help="do not start Prometheus")
    p.add_argument("--no-alertmanager", action="store_true",
                   help="use the built-in alert receiver even where Alertmanager exists")
    p.add_argument("--seed", type=int, default=0, help="seed of the load's arrivals and lengths")
    p.add_argument("--keep-dir", action="store_true",
                   help="keep the work directory (configs, store, logs) and print its path")
    p.add_argument("--pid-file", type=Path, default=None,
                   help="append each child's pid and name to this file as it starts")
    p.add_argument("--startup-timeout", type=float, default=120.0)
    p.add_argument("--refresh", type=float, default=2.0, help="seconds between refreshes")


def _options(args: argparse.Namespace) -> DemoOptions:
    """The run's options; ValueError naming the flag when they cannot work together."""
    shape = LoadShape(args.low_rate, args.peak_rate, args.duration)
    fault = None
    if args.fault_kind != "none":
        fault = FaultPlan.for_run(args.fault_kind, args.duration, at_seconds=args.fault_at,
                                  duration_seconds=args.fault_duration, value=args.fault_value)
        if fault.at_seconds >= args.duration:
            raise ValueError(f"--fault-at {fault.at_seconds:g} is past the end of the load "
                             f"(--duration {args.duration:g})")
    stack = StackOptions(model=args.model, prometheus=not args.no_prometheus,
                         alertmanager=not args.no_alertmanager,
                         startup_timeout_seconds=args.startup_timeout, pid_file=args.pid_file)
    return DemoOptions(stack, shape, fault, seed=args.seed, keep_dir=args.keep_dir,
                       refresh_seconds=args.refresh)


def run(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
    except ValueError as exc:
        print(f"inferwatch demo: {exc}", file=sys.stderr)
        return 2
    return run_demo(options, Console())
