"""`inferwatch export WHAT ...`: one of the API's lists or series as a CSV or Parquet file,
through ``monitor.client`` (imported when it runs: `--help` works without pandas).

    inferwatch export slo-history chat-ttft --start 2026-11-20T00:00:00Z --step 3600 \
        --url http://127.0.0.1:8080 --out ttft.csv
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # pandas is imported by run(): `inferwatch export --help` works without it
    import pandas as pd

    from monitor.client import Client

URL_ENV: Final = "INFERWATCH_URL"
PARQUET_ENGINES: Final = ("pyarrow", "fastparquet")


def _ranged(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start", default=None, help="unix seconds or ISO 8601")
    p.add_argument("--end", default=None, help="unix seconds or ISO 8601; default: now")
    p.add_argument("--step", type=float, default=None, help="seconds per row")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=os.environ.get(URL_ENV, "http://127.0.0.1:8080"),
                   help=f"the monitor's API (default: ${URL_ENV} or http://127.0.0.1:8080)")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv")
    p.add_argument("--out", required=True, help="the file to write; '-' for stdout (CSV)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    what.add_parser("slos", help="every SLO now")
    history = what.add_parser("slo-history", help="an SLO's report per step")
    history.add_argument("name")
    _ranged(history)
    what.add_parser("targets", help="the targets and their last scrape")
    series = what.add_parser("series", help="a derived metric of a target per step")
    series.add_argument("target")
    series.add_argument("metric", help="tokens_per_second, error_ratio, ttft_p99_seconds, ...")
    _ranged(series)
    alerts = what.add_parser("alerts", help="the alert book")
    alerts.add_argument("--state", choices=("pending", "firing", "resolved"), default=None)
    alert_history = what.add_parser("alert-history",
                                    help="every change of an alert's state, newest first")
    alert_history.add_argument("--slo", default=None, help="only this SLO's alerts")
    alert_history.add_argument("--alertname", default=None)
    alert_history.add_argument("--start", default=None, help="unix seconds or ISO 8601")
    alert_history.add_argument("--end", default=None, help="unix seconds or ISO 8601")
    runs = what.add_parser("runs", help="sweeps or canaries, one row per run")
    runs.add_argument("kind", choices=("sweep", "canary"))
    sweep = what.add_parser("sweep", help="a sweep's steps, one row per rate")
    sweep.add_argument("run_id")
    canary = what.add_parser("canary", help="a canary's judgement, one row per metric")
    canary.add_argument("run_id")


def read(client: Client, args: argparse.Namespace) -> pd.DataFrame:
    match args.what:
        case "slos":
            return client.slos()
        case "slo-history":
            return client.slo_history(args.name, args.start, args.end, args.step)
        case "targets":
            return client.targets()
        case "series":
            return client.series(args.target, args.metric, args.start, args.end, args.step)
        case "alerts":
            return client.alerts(args.state)
        case "alert-history":
            return client.alert_history(args.slo, args.alertname, args.start, args.end)
        case "runs":
            return client.runs(args.kind)
        case "sweep":
            return client.sweep(args.run_id)
        case "canary":
            return client.canary(args.run_id)
    raise ValueError(f"unknown export {args.what!r}")


def parquet_engine() -> str | None:
    return next((name for name in PARQUET_ENGINES if importlib.util.find_spec(name)), None)


def write(data: pd.DataFrame, out: str, fmt: str) -> None:
    if fmt == "csv":
        data.to_csv(sys.stdout if out == "-" else out, index=False)
    else:
        data.to_parquet(out, index=False, engine=parquet_engine())


def run(args: argparse.Namespace) -> int:
    if args.format == "parquet" and parquet_engine() is None:
        print("inferwatch export: Parquet needs pyarrow or fastparquet, and neither is "
              "installed: pip install pyarrow (or write --format csv)", file=sys.stderr)
        return 2
    if args.format == "parquet" and args.out == "-":
        print("inferwatch export: Parquet needs a file: give --out FILE", file=sys.stderr)
        return 2
    try:
        from monitor.client import Client, ClientError
    except ImportError as exc:
        print(f"inferwatch export: {exc.name or exc} not installed: pip install pandas",
              file=sys.stderr)
        return 2
    try:
        with Client(args.url, timeout=args.timeout) as client:
            data = read(client, args)
        write(data, args.out, args.format)
    except (ClientError, ValueError, OSError) as exc:
        print(f"inferwatch export: {exc}", file=sys.stderr)
        return 2
    if args.out != "-":
        print(f"inferwatch export: {len(data)} rows of {args.what} to {args.out}",
              file=sys.stderr)
    return 0
