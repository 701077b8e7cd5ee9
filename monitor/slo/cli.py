"""``inferwatch slo propose``: an SLO file from what a sweep measured (``inferwatch slo
report``, an SLO's HTML report from the store, is monitor/slo/report_cli.py; ``inferwatch slo
buckets``, an engine's bucket flag from SLO files, monitor/slo/buckets_cli.py).

    inferwatch slo propose --sweep out/sweep --out alerts/slos/chat.yaml
    inferwatch slo propose --run-id nightly --config inferwatch.yaml --peak-qps 40 --out chat.yaml

``--run-id`` takes a stored sweep's id, or a name given with ``bench sweep --name`` (the latest
finished sweep of that name). Exit status 2 when the sweep cannot be read or found nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from monitor.generated import write_output
from monitor.collect.config import ConfigError
from monitor.slo import buckets_cli, report_cli
from monitor.slo.propose import ProposeError, ProposeOptions, SweepSource, propose, slo_name


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="slo_action", required=True)
    prop = actions.add_parser("propose", help="an SLO file and a capacity note from a sweep")
    source = prop.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", help="a sweep's output directory, or its sweep.json")
    source.add_argument("--run-id", help="a sweep in the store: its id, or its --name")
    prop.add_argument("--store", help="database URL of the store (or --config)")
    prop.add_argument("--config", help="inferwatch.yaml: read its store")
    prop.add_argument("--out", required=True, help="the SLO file to write ('-': stdout)")
    prop.add_argument("--name", help="SLO name prefix (default: the run's name, or the model)")
    prop.add_argument("--objective", type=float,
                      help="latency SLO objective (default: the sweep's attainment target)")
    prop.add_argument("--availability-objective", type=float, default=0.999)
    prop.add_argument("--window", default="30d", help="the SLOs' rolling period")
    prop.add_argument("--engine", default=None,
                      help="the engine the SLOs will read (vllm, sglang, tgi, triton, ...): "
                           "thresholds are raised to its next bucket edge and the SLOs name it "
                           "(default: the inferwatch schema's buckets)")
    prop.add_argument("--headroom", type=float, default=0.7,
                      help="plan replicas for this fraction of the measured capacity")
    prop.add_argument("--peak-qps", type=float, help="replicas needed for this peak")
    prop.add_argument("--redundancy", type=int, default=1, help="N+R spare replicas")
    report_cli.add_parser(actions)
    buckets_cli.add_parser(actions)


def run(args: argparse.Namespace) -> int:
    if args.slo_action == "report":
        return report_cli.run(args)
    if args.slo_action == "buckets":
        return buckets_cli.run(args)
    try:
        document, source, default_name = _read_sweep(args)
        options = ProposeOptions(
            name=slo_name(args.name or default_name), objective=args.objective,
            availability_objective=args.availability_objective, window=args.window,
            target_utilization=args.headroom, peak_qps=args.peak_qps,
            redundancy=args.redundancy, engine=args.engine)
        text = propose(document, source, options)
    except (ProposeError, ConfigError, OSError, ValueError) as exc:
        print(f"inferwatch slo propose: {exc}", file=sys.stderr)
        return 2
    write_output(args.out, text)
    return 0


def _read_sweep(args: argparse.Namespace) -> tuple[dict[str, Any], SweepSource, str]:
    """The sweep's JSON, where it came from, and a default name for its SLOs."""
    if args.sweep is not None:
        path = Path(args.sweep)
        path = path / "sweep.json" if path.is_dir() else path
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ProposeError(f"{path}: not a sweep's JSON ({exc})") from None
        return document, SweepSource(f"the sweep in {path}"), "inference"
    return _stored_sweep(args)


def _stored_sweep(args: argparse.Namespace) -> tuple[dict[str, Any], SweepSource, str]:
    from monitor.loadgen.cli import store_url
    from monitor.store import open_store
    from monitor.store.runs import find_sweep
    url = store_url(args)
    if url is None:
        raise ProposeError("--run-id needs --store URL or --config inferwatch.yaml")
    store = open_store(url)
    try:
        row = find_sweep(store.engine, args.run_id)
    finally:
        store.close()
    if row is None or row.result is None:
        raise ProposeError(f"no finished sweep {args.run_id!r} in the store")
    model, target = row.config.get("model", "?"), row.config.get("url", "?")
    source = SweepSource(f"sweep {row.id} ({row.name}) of {model} at {target}", row.id)
    return row.result, source, row.name if row.name != "sweep" else str(model)
