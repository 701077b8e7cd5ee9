"""Continuous vs static batching on the same workload, side by side in one run.

Poisson arrivals, lognormal prompt and output lengths (ignore_eos, so output length is
controlled), the same engine, weights, KV pool and max batch size; only the scheduler
differs. Prints output tokens/s and E2E latency for each, and their ratios.

    python bench/batching.py                       # the recorded run
    python bench/batching.py --rates 2,6 --num-requests 100   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import torch

from bench.workload import RunResult, drive, make_workload
from reference_server.config import EngineConfig
from reference_server.server import build_engine


def run_mode(batching: str, args: argparse.Namespace, rate: float) -> RunResult:
    engine, _ = build_engine(EngineConfig(
        model=args.model, batching=batching, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, num_kv_blocks=args.num_kv_blocks,
        static_batch_timeout_seconds=args.static_batch_timeout, seed=args.seed))
    warm = make_workload(8, 0.0, seed=99, output_mean=8, prompt_mean=32)
    drive(engine, warm)
    workload = make_workload(args.num_requests, rate, seed=args.seed,
                             prompt_mean=args.prompt_mean, output_mean=args.output_mean,
                             sigma=args.sigma)
    return drive(engine, workload)


def row(mode: str, rate: float, r: RunResult) -> str:
    return (f"{rate:>6g} {mode:>10} {r.output_tokens_per_second:>9.1f} "
            f"{r.percentile('ttft', 50):>9.2f} {r.percentile('ttft', 99):>9.2f} "
            f"{r.percentile('e2e', 50):>9.2f} {r.percentile('e2e', 99):>9.2f} "
            f"{r.mean_batch_size:>7.1f} {r.wall_seconds:>7.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--rates", default="2,4,8", help="Poisson arrival rates, requests/s")
    p.add_argument("--num-requests", type=int, default=200)
    p.add_argument("--prompt-mean", type=float, default=256)
    p.add_argument("--output-mean", type=float, default=128)
    p.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of both lengths")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--num-kv-blocks", type=int, default=4096)
    p.add_argument("--static-batch-timeout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); model {args.model}; {args.num_requests} "
          f"requests per run; prompt mean {args.prompt_mean:g}, output mean "
          f"{args.output_mean:g} tokens (lognormal sigma {args.sigma:g}); max_num_seqs "
          f"{args.max_num_seqs}; static batch timeout {args.static_batch_timeout:g} s")
    print(f"{'rate':>6} {'batching':>10} {'out tok/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} "
          f"{'E2E p50':>9} {'E2E p99':>9} {'batch':>7} {'wall s':>7}   (latencies in s)")
    results = []
    for rate in (float(x) for x in args.rates.split(",")):
        cont = run_mode("continuous", args, rate)
        print(row("continuous", rate, cont), flush=True)
        static = run_mode("static", args, rate)
        print(row("static", rate, static), flush=True)
        tput = cont.output_tokens_per_second / static.output_tokens_per_second
        e2e = static.percentile("e2e", 99) / cont.percentile("e2e", 99)
        print(f"{'':>6} {'ratio':>10}   continuous/static tokens/s = {tput:.2f}x; "
              f"static/continuous p99 E2E = {e2e:.2f}x", flush=True)
        results.append({"rate": rate, "throughput_ratio": tput, "p99_e2e_ratio": e2e,
                        **{f"{m}_{k}": v for m, r in (("continuous", cont), ("static", static))
                           for k, v in (("tokens_per_s", r.output_tokens_per_second),
                                        ("e2e_p99_s", r.percentile("e2e", 99)),
                                        ("ttft_p99_s", r.percentile("ttft", 99)),
                                        ("mean_batch", r.mean_batch_size))}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
