"""``inferwatch canary``: judge a canary against its baseline.

    inferwatch canary live --baseline-url http://old:8000 --canary-url http://new:8000 \\
        --model tiny --rate 2 --duration 600
    inferwatch canary stored --config inferwatch.yaml --baseline-target old --canary-target new \\
        --start 2026-11-21T10:00:00Z --end 2026-11-21T10:30:00Z

Exit status: 0 when the canary passes, 1 when it fails (or is marginal with
``--fail-on marginal``), 2 on bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from monitor.canary.config import CanaryConfigError, load_judge_config
from monitor.collect.config import ConfigError
from monitor.canary.judge import Judgement, Outcome
from monitor.canary.run import judge_runs, judge_stored, run_both
from monitor.loadgen.cli import (
    add_client_arguments,
    add_record_arguments,
    add_workload_arguments,
    describe,
    endpoint_of,
    recorded,
    store_url,
    workload_of,
)
from monitor.loadgen.metrics import write_records
from monitor.loadgen.runner import Limits, Progress, ProgressCallback, check_endpoint
from monitor.loadgen.workload import WorkloadError
from monitor.progress import add_progress_argument, bar_for
from monitor.timeparse import parse_timestamp


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="canary_command", required=True)
    live = sub.add_parser("live", help="identical load on both endpoints at once, then judge")
    live.add_argument("--baseline-url", required=True)
    live.add_argument("--canary-url", required=True)
    live.add_argument("--model", required=True)
    live.add_argument("--canary-model", help="the canary's model name, if it differs")
    live.add_argument("--rate", type=float, required=True, help="requests/s to each endpoint")
    live.add_argument("--duration", type=float, default=600.0, help="seconds of comparison")
    live.add_argument("--interval", type=float, default=10.0,
                      help="seconds per interval of the per-interval metrics")
    add_client_arguments(live)
    add_workload_arguments(live)
    _judge_arguments(live)
    add_record_arguments(live)
    add_progress_argument(live)
    live.set_defaults(canary_run=_live)

    stored = sub.add_parser("stored", help="compare two targets' stored data over a range")
    stored.add_argument("--baseline-target", required=True)
    stored.add_argument("--canary-target", required=True)
    stored.add_argument("--start", required=True, type=_time,
                        help="unix seconds or ISO 8601")
    stored.add_argument("--end", required=True, type=_time)
    stored.add_argument("--step", type=float, default=60.0, help="seconds per interval")
    _judge_arguments(stored)
    add_record_arguments(stored)
    stored.set_defaults(canary_run=_stored)


def _judge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", help="judge configuration YAML (default: the packaged one)")
    p.add_argument("--fail-on", choices=("fail", "marginal"), default="fail")
    p.add_argument("--json", action="store_true", help="print the judgement as JSON")


def _time(text: str) -> float:
    try:
        return parse_timestamp(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    try:
        code: int = args.canary_run(args)
        return code
    except (CanaryConfigError, WorkloadError, ValueError, ConfigError) as exc:
        print(f"inferwatch canary: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _report(judgement: Judgement, args: argparse.Namespace) -> int:
    print(json.dumps(judgement.to_dict(), indent=2) if args.json else judgement.format())
    bad = {Outcome.FAIL} | ({Outcome.MARGINAL} if args.fail_on == "marginal" else set())
    return 1 if judgement.outcome in bad else 0


def _live(args: argparse.Namespace) -> int:
    config = load_judge_config(args.judge)
    baseline = endpoint_of(args, args.baseline_url, args.model)
    canary = endpoint_of(args, args.canary_url, args.canary_model or args.model)
    workload = workload_of(args)
    limits = Limits(duration_seconds=args.duration, warmup_seconds=args.warmup,
                    warmup_requests=args.warmup_requests,
                    max_concurrency=args.max_concurrency)
    bar = bar_for(args, args.duration + args.warmup, "canary", unit="s")
    state: dict[str, Progress] = {}

    def track(side: str) -> ProgressCallback:
        def update(p: Progress, elapsed: float) -> None:
            state[side] = p
            b, c = state.get("baseline", Progress()), state.get("canary", Progress())
            bar.update_to(elapsed, f"answered: baseline {b.done}/{b.sent} ({b.failed} failed)"
                          f", canary {c.done}/{c.sent} ({c.failed} failed)")
        return update

    for endpoint in (baseline, canary):
        asyncio.run(check_endpoint(endpoint))
    with recorded(args, "canary", describe(args)) as holder:
        with bar:
            base, can = asyncio.run(run_both(baseline, canary, workload, args.rate, limits,
                                             (track("baseline"), track("canary"))))
        comparison = judge_runs(base, can, config, args.interval)
        holder["result"] = comparison.to_json()
        if args.output_dir:
            out = Path(args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            write_records(base, out / "baseline.jsonl")
            write_records(can, out / "canary.jsonl")
            (out / "judgement.json").write_text(json.dumps(comparison.to_json(), indent=2))
            holder["artifacts"] = {name: str(out / f"{name}.jsonl")
                                   for name in ("baseline", "canary")}
            holder["artifacts"]["judgement"] = str(out / "judgement.json")
        return _report(comparison.judgement, args)


def _stored(args: argparse.Namespace) -> int:
    config = load_judge_config(args.judge)
    url = store_url(args)
    if url is None:
        raise ValueError("comparing stored data needs --store URL or --config inferwatch.yaml")
    from monitor.store import open_store
    store = open_store(url)
    try:
        comparison = judge_stored(store, args.baseline_target, args.canary_target,
                                  args.start, args.end, args.step, config)
    finally:
        store.close()
    with recorded(args, "canary", describe(args)) as holder:
        holder["result"] = comparison.to_json()
        if args.output_dir:
            out = Path(args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "judgement.json").write_text(json.dumps(comparison.to_json(), indent=2))
            holder["artifacts"] = {"judgement": str(out / "judgement.json")}
        return _report(comparison.judgement, args)
