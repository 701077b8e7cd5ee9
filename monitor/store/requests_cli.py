"""`inferwatch requests`: exact percentiles and goodput of the request events in a store,
without the service (the same figures as GET /api/v1/requests/summary)."""

from __future__ import annotations

import argparse
import sys
import time

from sqlalchemy.exc import SQLAlchemyError

from monitor.loadgen.capacity import DEFAULT_PREFILL_WEIGHT
from monitor.store.db import open_store
from monitor.store.request_cost import CostAttribution, CostModel, CostShare, attribute_cost
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
    cost = p.add_argument_group(
        "cost per group (--group-by, default tenant): the engine's device-seconds split by "
        "each request's output + prefill weight x prompt tokens")
    cost.add_argument("--devices", type=float, default=None, metavar="N",
                      help="the engine held N devices over the window (wall time x N)")
    cost.add_argument("--device-seconds", type=float, default=None, metavar="S",
                      help="or the engine's busy device-seconds over the window, measured")
    cost.add_argument("--gpu-hour-price", type=float, default=None, metavar="PRICE",
                      help="price per device-hour, as in `bench capacity` (default: no money)")
    cost.add_argument("--prefill-weight", type=float, default=DEFAULT_PREFILL_WEIGHT,
                      help="a prompt token's work in output tokens (default: %(default)s)")
    cost.add_argument("--max-groups", type=int, default=None, metavar="N",
                      help="the N groups with the most work, the rest as 'other'")


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
        cost_model = _cost_model(args, start, end)
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
    if cost_model is not None:
        by = args.group_by or "tenant"
        try:
            found = attribute_cost(rows, by, cost_model, args.max_groups)
        except ValueError as exc:
            print(f"inferwatch requests: {exc}", file=sys.stderr)
            return 2
        print("\n".join(_cost_lines(by, cost_model, found)))
    return 0


def _cost_model(args: argparse.Namespace, start: float, end: float) -> CostModel | None:
    if args.device_seconds is not None:
        return CostModel(args.device_seconds, args.gpu_hour_price, args.prefill_weight)
    if args.devices is not None:
        return CostModel.from_wall_time(start, end, args.devices, args.gpu_hour_price,
                                        args.prefill_weight)
    if args.gpu_hour_price is not None or args.max_groups is not None:
        raise ValueError("cost needs --devices N or --device-seconds S")
    return None


def _cost_lines(by: str, model: CostModel, found: CostAttribution) -> list[str]:
    price = "no price" if model.device_hour_price is None \
        else f"{model.device_hour_price:g} per device-hour"
    lines = [f"cost by {by}: {model.device_seconds:.1f} device-seconds, {price}, "
             f"prefill weight {model.prefill_weight:g}"]
    lines += [_cost_line(f"{by}={key}", share, model) for key, share in found.groups.items()]
    groups = found.groups.values()
    summed = CostShare(sum(g.num_requests for g in groups), sum(g.prompt_tokens for g in groups),
                       sum(g.output_tokens for g in groups), sum(g.work for g in groups),
                       sum(g.device_seconds for g in groups),
                       None if model.device_hour_price is None
                       else sum(g.cost or 0.0 for g in groups))
    lines += [_cost_line(f"sum over {by}", summed, model),
              _cost_line("total", found.total, model)]
    if found.unattributed_device_seconds:
        lines.append(f"unattributed (no tokens in the window): "
                     f"{found.unattributed_device_seconds:.1f} device-seconds")
    return lines


def _cost_line(name: str, share: CostShare, model: CostModel) -> str:
    part = share.device_seconds / model.device_seconds if model.device_seconds else 0.0
    cost = "" if share.cost is None else f", cost {share.cost:.6g}"
    return (f"{name}: {share.num_requests} requests, {share.prompt_tokens} prompt + "
            f"{share.output_tokens} output tokens, {share.device_seconds:.2f} device-s "
            f"({part:.1%}){cost}")
