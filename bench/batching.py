"""Continuous vs static batching on the same workload, side by side in one run.

Poisson arrivals, lognormal prompt and output lengths (ignore_eos, so output length is
controlled), the same engine, weights, KV pool and max batch size; only the scheduler
differs. Prints output tokens/s and TTFT/E2E latency for each, and their ratios.

Two workloads with the mean lengths of the datasets the vLLM paper used: "alpaca" (short:
19 prompt / 58 output tokens) and "sharegpt" (long: 161 / 338). Arrival rates are fractions
of the capacity that continuous batching reaches offline (all requests queued at t=0) on
this machine, so that the comparison means the same on a laptop and on a GPU.

    python -m bench.batching                                  # the recorded run
    python -m bench.batching --workloads alpaca --duration 10   # quicker
    python -m bench.batching --rates 20,40                    # fixed rates instead
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from dataclasses import dataclass
from typing import Any

import torch

from bench.cpu_meter import BUSY_WARNING_CORES, OtherCpuMeter
from bench.workload import RunResult, drive, make_workload
from reference_server.config import BatchingMode, EngineConfig
from reference_server.server import build_engine


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    prompt_mean: float
    output_mean: float


# Mean lengths reported for the two datasets in the vLLM (PagedAttention) paper, section 6.1.
WORKLOADS = {"alpaca": WorkloadShape(19.31, 58.45), "sharegpt": WorkloadShape(161.31, 337.99)}


def run_mode(batching: BatchingMode, args: argparse.Namespace, shape: WorkloadShape,
             rate: float) -> tuple[RunResult, float | None]:
    engine, _ = build_engine(EngineConfig(
        model=args.model, batching=batching, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, num_kv_blocks=args.num_kv_blocks,
        static_batch_timeout_seconds=args.static_batch_timeout, seed=args.seed))
    drive(engine, make_workload(8, 0.0, seed=99, output_mean=8, prompt_mean=32))  # warm-up
    num_requests = args.num_requests if rate <= 0 else max(50, round(rate * args.duration))
    workload = make_workload(num_requests, rate, seed=args.seed,
                             prompt_mean=shape.prompt_mean, output_mean=shape.output_mean,
                             sigma=args.sigma)
    meter = OtherCpuMeter()
    result = drive(engine, workload)
    return result, meter.cores()


def row(rate: float, mode: str, r: RunResult, others: float | None) -> str:
    busy = "   n/a" if others is None else f"{others:6.2f}"
    warn = "  <- other load" if others is not None and others > BUSY_WARNING_CORES else ""
    return (f"{rate:>7.2f} {mode:>10} {r.output_tokens_per_second:>9.1f} "
            f"{r.percentile('ttft', 50):>8.3f} {r.percentile('ttft', 99):>8.3f} "
            f"{r.percentile('e2e', 50):>8.2f} {r.percentile('e2e', 99):>8.2f} "
            f"{r.mean_batch_size:>6.1f} {r.wall_seconds:>7.1f} {busy}{warn}")


def compare_at(rate: float, args: argparse.Namespace, shape: WorkloadShape) -> dict[str, Any]:
    cont, cont_busy = run_mode("continuous", args, shape, rate)
    print(row(rate, "continuous", cont, cont_busy), flush=True)
    static, static_busy = run_mode("static", args, shape, rate)
    print(row(rate, "static", static, static_busy), flush=True)
    tput = cont.output_tokens_per_second / static.output_tokens_per_second
    e2e = static.percentile("e2e", 99) / cont.percentile("e2e", 99)
    print(f"{'':>7} {'ratio':>10}   continuous/static tokens/s = {tput:.2f}x; "
          f"static/continuous p99 E2E = {e2e:.2f}x", flush=True)
    out: dict[str, Any] = {"rate": rate, "throughput_ratio": tput, "p99_e2e_ratio": e2e}
    for mode, r, busy in (("continuous", cont, cont_busy), ("static", static, static_busy)):
        out[mode] = {"tokens_per_s": r.output_tokens_per_second,
                     "ttft_p99_s": r.percentile("ttft", 99), "e2e_p99_s": r.percentile("e2e", 99),
                     "mean_batch": r.mean_batch_size, "other_cores": busy}
    return out


def run_workload(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    shape = WORKLOADS[name]
    print(f"\n== {name}: prompt mean {shape.prompt_mean:g}, output mean {shape.output_mean:g} "
          f"tokens (lognormal sigma {args.sigma:g}); {args.duration:g} s of arrivals per run")
    if args.rates:
        rates = [float(x) for x in args.rates.split(",")]
    else:
        offline, _ = run_mode("continuous", args, shape, 0.0)
        capacity = args.num_requests / offline.wall_seconds
        print(f"offline capacity of continuous batching ({args.num_requests} requests queued "
              f"at t=0): {capacity:.2f} requests/s "
              f"({offline.output_tokens_per_second:.0f} output tokens/s, mean batch "
              f"{offline.mean_batch_size:.1f}); rates below are {args.load} of it")
        rates = [capacity * float(x) for x in args.load.split(",")]
    print(f"{'rate/s':>7} {'batching':>10} {'out tok/s':>9} {'TTFT p50':>8} {'TTFT p99':>8} "
          f"{'E2E p50':>8} {'E2E p99':>8} {'batch':>6} {'wall s':>7} {'others':>6}")
    return [compare_at(rate, args, shape) for rate in rates]


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--workloads", default="alpaca,sharegpt", help=f"of {sorted(WORKLOADS)}")
    p.add_argument("--load", default="0.5,1.0,1.5",
                   help="arrival rates as fractions of continuous batching's offline capacity")
    p.add_argument("--rates", default=None, help="fixed Poisson arrival rates, requests/s")
    p.add_argument("--num-requests", type=int, default=200,
                   help="requests of the offline capacity run")
    p.add_argument("--duration", type=float, default=30.0,
                   help="seconds of Poisson arrivals per run (at least 50 requests)")
    p.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of both lengths")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--num-kv-blocks", type=int, default=8192)
    p.add_argument("--static-batch-timeout", type=float, default=0.1,
                   help="how long static batching waits to fill a batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); model {args.model}; max_num_seqs "
          f"{args.max_num_seqs}; static batch timeout {args.static_batch_timeout:g} s; "
          "latencies in seconds; 'others' = CPU cores other processes used meanwhile")
    results = {name: run_workload(name, args) for name in args.workloads.split(",")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
