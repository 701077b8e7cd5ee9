"""`inferwatch requests`: exact percentiles and goodput of the request events in a store,
without the service (the same figures as GET /api/v1/requests/summary)."""

from __future__ import annotations

import argparse
import sys
import time

from sqlalchemy.exc import SQLAlchemyError

from monitor.store.db import open_store
from monitor.store.request_events import RequestFilter, read_request_events
from monitor.store.request_sli import (
    GROUPS,
    GoodputCriteria,
    RequestSummary,
    summarize_by,
    summarize_requests,
)
from monitor.timeparse import parse_timestamp


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, metavar="URL",
                   help="sqlite:///path or postgresql+psycopg://... (as `gateway --store`)")
    p.add_argument("--start", default=None, help="unix seconds or ISO 8601 (default: end - 1h)")
    p.add_argument("--end", default=None, help="unix seconds or ISO 8601 (default: now)")
    for label in GROUPS:
        p.add_argument(f"--{label.replace('_', '-')}", dest=label, default=None,
                       help=f"only this {label}")
    p.add_argument("--group-by", choices=GROUPS, default=None)
    for name in ("ttft", "tpot", "e2e"):
        p.add_argument(f"--{name}-ms", type=float, default=None,
                       help=f"good only with {name.upper()} at most this (any value)")


def _line(name: str, s: RequestSummary) -> str:
    ratio = "-" if s.goodput_ratio is None else f"{s.goodput_ratio:.4f}"
    latency = "  ".join(f"{metric} " + " ".join(f"{k}={v * 1000:.1f}ms" for k, v in ps.items())
                        for metric, ps in s.latency.items())
    return f"{name}: {s.num_requests} requests, {s.num_good} good ({ratio})  {latency}"


def run(args: argparse.Namespace) -> int:
    try:
        end = time.time() if args.end is None else parse_timestamp(args.end)
        start = end - 3600 if args.start is None else parse_timestamp(args.start)
        millis = (args.ttft_ms, args.tpot_ms, args.e2e_ms)
        criteria = None if all(ms is None for ms in millis) else GoodputCriteria(
            *(None if ms is None else ms / 1000 for ms in millis))
        store = open_store(args.store)
    except ValueError as exc:
        print(f"inferwatch requests: {exc}", file=sys.stderr)
        return 2
    try:
        rows = read_request_events(store.engine, RequestFilter(
            start, end, model=args.model, tenant=args.tenant, slo_class=args.slo_class))
    except SQLAlchemyError as exc:
        print(f"inferwatch requests: cannot read the store: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    total = summarize_requests(rows, criteria)
    print(_line("all", total))
    if args.group_by is not None:
        for key, summary in summarize_by(rows, args.group_by, criteria).items():
            print(_line(f"{args.group_by}={key}", summary))
    return 0
