"""``inferwatch slo buckets``: the engine flag that makes every latency SLO threshold a bucket
edge, so the SLIs are counts, not bounds (issue 21; ``monitor.slo.engine_buckets``).

    inferwatch slo buckets --engine vllm alerts/slos/*.yaml
    inferwatch slo buckets --engine vllm --page metrics.prom alerts/slos/
    inferwatch slo buckets --engine vllm --json alerts/slos/inference.yaml

Prints the flag (stdout) and what it adds per family (stderr). Exit status 2 when an SLO file
or the page cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monitor.slo.engine_buckets import ENGINES, describe, page_edges, plan_vllm
from monitor.slo.loaders import SloFileError, load_slos
from monitor.slo.spec import Slo


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "buckets", help="the engine's histogram-bucket flag that puts every latency SLO "
                        "threshold on a bucket edge")
    p.add_argument("--engine", required=True, choices=ENGINES)
    p.add_argument("--page", help="a recorded /metrics page of the engine: merge into the "
                                  "edges it shows instead of the engine's defaults")
    p.add_argument("--json", action="store_true", help="print only the flag's JSON value")
    p.add_argument("files", nargs="+", help="SLO files or directories")


def run(args: argparse.Namespace) -> int:
    try:
        slos = _read_slos(args.files)
        current = None
        if args.page is not None:
            current = page_edges(Path(args.page).read_text(encoding="utf-8"), args.page)
    except (SloFileError, OSError) as exc:
        print(f"inferwatch slo buckets: {exc}", file=sys.stderr)
        return 2
    plan = plan_vllm(slos, current)
    for line in describe(plan):
        print(f"# {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(plan.overrides))
    elif plan.families:
        print(plan.flag())
    return 0


def _read_slos(files: list[str]) -> list[Slo]:
    slos: list[Slo] = []
    for file in files:
        slos += load_slos(file)
    return slos
