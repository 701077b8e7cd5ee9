"""`inferwatch dashboards`: Grafana dashboards generated from the metric schema, and pushed.

    inferwatch dashboards generate                 # -> dashboards/inferwatch-*.json
    inferwatch dashboards generate --check         # CI: is the checked-in JSON current?
    inferwatch dashboards push --url http://grafana:3000 --token $GRAFANA_TOKEN

The JSON is generated from monitor/dashboards/panels.yaml, exporters/schema.py and the SLO
specs (the same ones as the rule file), checked in and reviewed like code; `--check` exits 1
with a diff when it differs. Exit status 2: inputs unusable, or Grafana unreachable or
refusing (the message names the URL or file).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from monitor.generated import check_generated, write_generated

from monitor.dashboards.push import DEFAULT_TIMEOUT_SECONDS

TOKEN_ENV = "GRAFANA_TOKEN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="dashboards_action", required=True)
    gen = actions.add_parser("generate", help="write the dashboards' JSON")
    gen.add_argument("--out", default="dashboards", help="directory for the JSON files")
    gen.add_argument("--slos", default="alerts/slos",
                     help="SLO spec file or directory (for thresholds, budgets, burn rates)")
    gen.add_argument("--engine", default=None,
                     help="the engine the SLOs read: latency thresholds drawn at the edges it "
                          "counts them at (as `rules generate --engine`)")
    gen.add_argument("--page", default=None,
                     help="a /metrics page (file or URL) of the engine, as `rules generate`")
    gen.add_argument("--panels", default=None,
                     help="panel list YAML (default: the packaged panels.yaml)")
    gen.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 with a diff if the files are not current")
    push = actions.add_parser("push", help="save the dashboards into a Grafana folder")
    push.add_argument("--url", required=True, help="Grafana's URL, e.g. http://grafana:3000")
    push.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                      help=f"service account token (default: ${TOKEN_ENV})")
    push.add_argument("--folder", default="inferwatch", help="folder, created if missing")
    push.add_argument("--dir", default="dashboards", help="directory of dashboard JSON files")
    push.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                      help="seconds each request to Grafana may take")


def run(args: argparse.Namespace) -> int:
    if args.dashboards_action == "generate":
        return _generate(args)
    return _push(args)


def _generate(args: argparse.Namespace) -> int:
    from monitor.dashboards.generate import generate_dashboards
    from monitor.dashboards.spec import PanelFileError, load_panels
    from monitor.slo.bind import bind_for
    from monitor.slo.loaders import SloFileError, load_slos

    try:
        slos = bind_for(load_slos(args.slos), args.engine, args.page)
        files = generate_dashboards(load_panels(args.panels), slos)
    except (PanelFileError, SloFileError, OSError, ValueError, KeyError) as exc:
        print(f"inferwatch dashboards generate: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.check:
        return check_generated(out, files, "inferwatch dashboards generate")
    write_generated(out, files)
    return 0


def _push(args: argparse.Namespace) -> int:
    from monitor.dashboards.push import PushError, dashboard_files, push_dashboards

    try:
        files = dashboard_files(Path(args.dir))
        pushed = push_dashboards(args.url, args.token, files, folder=args.folder,
                                 timeout=args.timeout)
    except PushError as exc:
        print(f"inferwatch dashboards push: {exc}", file=sys.stderr)
        return 2
    for title, url in pushed:
        print(f"{title}: {url}")
    return 0
