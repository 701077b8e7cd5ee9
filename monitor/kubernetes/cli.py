"""`inferwatch kubernetes`: prometheus-operator objects for kube-prometheus-stack, generated
into deploy/kubernetes/ (the monitor's kustomize base, deploy/kubernetes/monitor/, is written
by hand and mounts the SLO files copied here).

    inferwatch kubernetes                     # deploy/kubernetes/engines/<engine>-*.yaml,
                                              #   inferwatch-slo-rules.yaml,
                                              #   inferwatch-anomaly-rules.yaml, monitor/slos/
    inferwatch kubernetes --check             # CI: are the checked-in files current?
    inferwatch kubernetes --release prom      # the label your Prometheus selects: release=prom

Exit status 2: SLO specs or options unusable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from monitor.kubernetes.generate import DEFAULT_RELEASE, generated_files

DEFAULT_DIR: Final = "deploy/kubernetes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slos", default="alerts/slos",
                   help="an SLO spec file or a directory of them (as `inferwatch rules "
                        "generate`)")
    p.add_argument("--out", default=DEFAULT_DIR, help="the output directory")
    p.add_argument("--release", default=DEFAULT_RELEASE,
                   help="the `release` label on every object: kube-prometheus-stack's "
                        "Prometheus selects monitors and rules by its Helm release name")
    p.add_argument("--interval", default="1m", help="the SLO rule groups' evaluation interval")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 with a diff if the files are not current")


def run(args: argparse.Namespace) -> int:
    from exporters.adapters.table import AdapterError
    from exporters.promconfig.plan import PromConfigError
    from monitor.generated import check_generated, write_generated
    from monitor.slo.durations import parse_duration
    from monitor.slo.loaders import SloFileError, load_slos
    from monitor.slo.windows import check_short_windows

    try:
        interval = parse_duration(args.interval)
        slos = load_slos(args.slos)
        check_short_windows(slos, interval, "rule evaluation interval (--interval)")
        files = generated_files(slos, Path(args.slos), release=args.release,
                                interval_seconds=interval)
    except (SloFileError, AdapterError, PromConfigError, OSError, ValueError) as exc:
        print(f"inferwatch kubernetes: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.check:
        return check_generated(out, files, "inferwatch kubernetes")
    write_generated(out, files)
    return 0
