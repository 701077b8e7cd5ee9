"""``inferwatch slo report``: an SLO's compliance report as the self-contained HTML page the
API serves at /api/v1/slos/{name}/report?format=html, written from the store without a running
monitor (a nightly job, a page to mail).

    inferwatch slo report chat-ttft --config inferwatch.yaml --out chat-ttft.html \\
        --ui-url https://monitor.example:8080

``--ui-url`` links the SLO's page of the monitor's web UI (BASE/ui/slos/NAME); without it the
page has no such link, since it cannot know where a UI runs. Exit status 2 when the config,
the SLO or the range cannot be used.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from monitor.generated import write_output
from monitor.collect.config import ConfigError, load_config
from monitor.service.reload import SloFiles
from monitor.slo.loaders import SloFileError
from monitor.slo.report import build_report
from monitor.slo.source import StoreSliSource
from monitor.store import open_store
from monitor.timeparse import parse_timestamp


def add_parser(actions: Any) -> None:
    """The ``report`` action under ``inferwatch slo`` (``actions``: its subparsers)."""
    p: argparse.ArgumentParser = actions.add_parser(
        "report", help="an SLO's compliance report as an HTML page, from the store")
    p.add_argument("name", help="the SLO")
    p.add_argument("--config", default="inferwatch.yaml",
                   help="inferwatch.yaml: its SLO files and store")
    p.add_argument("--store", help="database URL of the store (default: the config's)")
    p.add_argument("--start", help="unix seconds or ISO 8601 (default: end minus the period)")
    p.add_argument("--end", help="unix seconds or ISO 8601 (default: now)")
    p.add_argument("--step", type=float, help="seconds per step, whole minutes "
                                              "(default: as the API chooses)")
    p.add_argument("--out", required=True, help="the HTML file to write ('-': stdout)")
    p.add_argument("--ui-url", help="base URL of the monitor's web UI: link BASE/ui/slos/NAME")


def run(args: argparse.Namespace) -> int:
    try:
        page = _render(args)
    except (ConfigError, SloFileError, OSError, ValueError) as exc:
        print(f"inferwatch slo report: {exc}", file=sys.stderr)
        return 2
    write_output(args.out, page)
    return 0


def _render(args: argparse.Namespace) -> str:
    config = load_config(args.config)
    slos = SloFiles().load(config, Path(args.config).parent)
    slo = next((s for s in slos if s.name == args.name), None)
    if slo is None:
        raise ValueError(f"no SLO {args.name!r} in {args.config}'s SLO files (there are: "
                         f"{', '.join(s.name for s in slos) or 'none'})")
    now = time.time()
    end = parse_timestamp(args.end) if args.end else now
    start = parse_timestamp(args.start) if args.start else end - slo.window.nominal_seconds
    store = open_store(args.store or config.store.url)
    try:
        # As the API does: minutes count once their scrapes are stored (the settle time).
        report = build_report(slo, StoreSliSource(store), start, end, args.step,
                              now=now - config.settle_seconds)
    finally:
        store.close()
    # Imported here, as in the API: it brings matplotlib.
    from monitor.slo.report_html import render_html
    return render_html(report, ui_url=args.ui_url)
