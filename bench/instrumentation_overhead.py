"""Metrics on vs off: the reference server's engine, built twice from the same EngineConfig but
enable_metrics (PrometheusEngineMetrics vs NullEngineMetrics), same seeded weights, serves the
same workloads; prints the output tokens/s ratio on/off. Target: at least 0.99.

Two workloads from bench.workload: offline (every request at t=0, throughput-bound) and Poisson
arrivals at half the offline request rate. Under Poisson load tokens/s follows the arrival rate
whatever the engine costs, so the engine's busy time per output token (the summed wall time of
its step() calls) is compared as well.

Each round runs the workload once on each of three engines: ON, OFF, and a second metrics-off
engine OFF-B, in an order that rotates through all six permutations, so drift and bursts of
load from other processes fall on every side. ON/OFF is the overhead; OFF-B/OFF should be 1 and
shows how finely this machine can resolve a ratio at all (on a shared 2-core box, a few %). One
full round per workload is run first and discarded (the first full-size run of an engine is
slow). Ratios are medians over rounds of the per-round ratio; the CPU cores other processes
kept busy are printed per round. Torch runs on one thread by default, so that a neighbour on
the other core does not stall every parallel region.

A cleaner figure, free of run-to-run noise: record_step's own cost (timeit, on a typical step
of the offline run) divided by the median engine step time, and the whole run's predicted
overhead from record_step and record_request costs times their counts.

    python -m bench.instrumentation_overhead
    python -m bench.instrumentation_overhead --rounds 6 --json bench/out/overhead.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from prometheus_client import CollectorRegistry

from bench.cpu_meter import BUSY_WARNING_CORES, OtherCpuMeter
from bench.workload import BenchRequest, drive, make_workload
from exporters.instrumentation import PrometheusEngineMetrics, RequestStats, StepStats
from reference_server.config import EngineConfig
from reference_server.engine import LLMEngine
from reference_server.outputs import RequestOutput
from reference_server.server import build_engine

TARGET_RATIO = 0.99


@dataclass(slots=True)
class Run:
    metrics_on: bool
    wall_seconds: float
    tokens_per_second: float
    busy_seconds: float  # summed step() wall time
    num_output_tokens: int
    num_steps: int
    mean_batch_size: float
    median_step_seconds: float
    other_cpu_cores: float | None

    @property
    def busy_seconds_per_token(self) -> float:
        return self.busy_seconds / self.num_output_tokens


def build(args: argparse.Namespace, metrics_on: bool) -> LLMEngine:
    engine, _ = build_engine(EngineConfig(
        model=args.model, seed=args.seed, enable_metrics=metrics_on,
        num_threads=args.threads or None, max_num_seqs=args.max_num_seqs))
    drive(engine, make_workload(8, 0.0, seed=99, prompt_mean=32, output_mean=8))  # warm-up
    return engine


def time_steps(engine: LLMEngine) -> list[float]:
    """Wrap engine.step (on the instance) to record each call's wall time."""
    step = engine.step
    times: list[float] = []

    def timed() -> list[RequestOutput]:
        started = time.perf_counter()
        outputs = step()
        times.append(time.perf_counter() - started)
        return outputs

    setattr(engine, "step", timed)  # noqa: B010 - mypy refuses assigning to a method
    return times


def run_once(engine: LLMEngine, step_times: list[float], metrics_on: bool,
             workload: Sequence[BenchRequest]) -> Run:
    step_times.clear()
    meter = OtherCpuMeter()
    result = drive(engine, workload)
    return Run(metrics_on, result.wall_seconds, result.output_tokens_per_second, sum(step_times),
               result.num_output_tokens, result.num_steps, result.mean_batch_size,
               statistics.median(step_times), meter.cores())


ARMS = ("ON", "OFF", "OFF-B")  # OFF-B: a second metrics-off engine, the A/A control
ORDERS = tuple(itertools.permutations(ARMS))

Engines = dict[str, tuple[LLMEngine, list[float]]]
Round = dict[str, Run]


def run_rounds(engines: Engines, workload: Sequence[BenchRequest], rounds: int) -> list[Round]:
    """One discarded warm-up round, then ``rounds`` rounds in rotating order."""
    results: list[Round] = []
    for i in range(-1, rounds):
        order = ORDERS[i % len(ORDERS)]
        runs = {arm: run_once(*engines[arm], arm == "ON", workload) for arm in order}
        if i >= 0:
            results.append(runs)
    return results


# --- record_* costs measured directly ----------------------------------------------------------

def typical_step(batch_size: int) -> StepStats:
    """A decode step of batch_size sequences, each emitting a non-first token."""
    return StepStats(
        num_running=batch_size, num_waiting=2, num_swapped=0, batch_size=batch_size,
        num_prefill_tokens=0, num_decode_tokens=batch_size, num_cached_prompt_tokens=0,
        num_preemptions=0, kv_blocks_used=120, kv_blocks_total=4096,
        schedule_seconds=1.2e-4, run_seconds=1.3e-3, postprocess_seconds=9e-5,
        inter_token_latencies=[0.0015] * batch_size, num_generation_tokens=batch_size)


FINISHED = RequestStats(
    finish_reason="length", error_type=None, num_prompt_tokens=128, num_generation_tokens=64,
    queue_seconds=0.01, ttft_seconds=0.05, prefill_seconds=0.04, decode_seconds=0.3,
    e2e_seconds=0.35)


def best_seconds(call: Callable[[], object], number: int = 2000, repeat: int = 7) -> float:
    """Per-call time, the minimum over repeats (the least disturbed by other processes)."""
    return min(timeit.repeat(call, number=number, repeat=repeat)) / number


def record_costs(batch_size: int) -> dict[str, float]:
    metrics = PrometheusEngineMetrics(
        CollectorRegistry(), "tiny", max_num_seqs=64, max_num_batched_tokens=2048,
        kv_block_size=16, kv_cache_bytes=256 * 2**20)
    step = typical_step(batch_size)
    return {
        "record_step_seconds": best_seconds(lambda: metrics.record_step(step)),
        "record_request_seconds": best_seconds(lambda: metrics.record_request(FINISHED)),
        # Paid with metrics off too (the engine builds the stats either way): not in the ratio.
        "build_step_stats_seconds": best_seconds(lambda: typical_step(batch_size)),
    }


# --- reporting ---------------------------------------------------------------------------------

def _others(runs: Sequence[Run]) -> str:
    cores = [r.other_cpu_cores for r in runs if r.other_cpu_cores is not None]
    return "n/a" if not cores else f"{max(cores):.2f}"


def _ratios(rounds: list[Round], key: Callable[[Run], float], arm: str) -> list[float]:
    """Per round, key(arm) / key(OFF): a throughput ratio, 1 = no difference."""
    return [key(r[arm]) / key(r["OFF"]) for r in rounds]


def _throughput(run: Run) -> float:
    return run.tokens_per_second


def _inverse_busy(run: Run) -> float:
    return 1 / run.busy_seconds_per_token


def summarize(name: str, rounds: list[Round]) -> dict[str, Any]:
    print(f"\n{'round':>5} {'order':>14} " + "".join(f"{'tok/s ' + arm:>12}" for arm in ARMS)
          + f" {'ON/OFF':>7} {'OFF-B/OFF':>9} {'others':>7}")
    for i, r in enumerate(rounds):
        order = ",".join(ORDERS[i % len(ORDERS)])
        cells = "".join(f"{r[arm].tokens_per_second:>12.0f}" for arm in ARMS)
        print(f"{i:>5} {order:>14} {cells} "
              f"{_throughput(r['ON']) / _throughput(r['OFF']):>7.4f} "
              f"{_throughput(r['OFF-B']) / _throughput(r['OFF']):>9.4f} "
              f"{_others(list(r.values())):>7}")
    summary: dict[str, Any] = {"rounds": [{a: asdict(run) for a, run in r.items()} for r in rounds]}
    for label, key in (("tokens/s", _throughput), ("1 / busy time per token", _inverse_busy)):
        on, control = _ratios(rounds, key, "ON"), _ratios(rounds, key, "OFF-B")
        ratio = statistics.median(on)
        verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
        print(f"{name}, {label}: ON/OFF median {ratio:.4f} (rounds {min(on):.4f}..{max(on):.4f})"
              f"  {verdict} vs {TARGET_RATIO};  A/A OFF-B/OFF median "
              f"{statistics.median(control):.4f} (rounds {min(control):.4f}..{max(control):.4f})")
        summary[label] = {"ratio": ratio, "round_ratios": on, "verdict": verdict,
                          "control_ratio": statistics.median(control),
                          "control_round_ratios": control}
    return summary


def print_direct(costs: dict[str, float], batch_size: int, offline: list[Round],
                 num_requests: int) -> dict[str, float]:
    off_runs = [r["OFF"] for r in offline]
    median_step = statistics.median(r.median_step_seconds for r in off_runs)
    steps = statistics.median(r.num_steps for r in off_runs)
    busy_off = statistics.median(r.busy_seconds for r in off_runs)
    per_step = costs["record_step_seconds"] / median_step
    added = steps * costs["record_step_seconds"] + num_requests * costs["record_request_seconds"]
    predicted = 1 / (1 + added / busy_off)
    print(f"\nrecord_step ({batch_size} sequences, {batch_size} inter-token latencies): "
          f"{costs['record_step_seconds'] * 1e6:.1f} us; record_request: "
          f"{costs['record_request_seconds'] * 1e6:.1f} us; building StepStats (paid ON and "
          f"OFF): {costs['build_step_stats_seconds'] * 1e6:.1f} us")
    print(f"median engine step (OFF): {median_step * 1e3:.3f} ms -> record_step / step = "
          f"{per_step:.2%}, i.e. ratio {1 / (1 + per_step):.4f}  "
          f"{'PASS' if 1 / (1 + per_step) >= TARGET_RATIO else 'FAIL'}")
    print(f"whole offline run: {steps:.0f} steps x record_step + {num_requests} requests x "
          f"record_request = {added * 1e3:.1f} ms on {busy_off:.2f} s busy -> predicted ratio "
          f"{predicted:.4f}  {'PASS' if predicted >= TARGET_RATIO else 'FAIL'}")
    return {"median_step_seconds": median_step, "record_step_over_step": per_step,
            "predicted_ratio": predicted, **costs}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's "
                        "own choice)")
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=12, help="offline rounds (Poisson: half)")
    parser.add_argument("--offline-requests", type=int, default=48)
    parser.add_argument("--poisson-requests", type=int, default=48)
    parser.add_argument("--prompt-mean", type=float, default=128)
    parser.add_argument("--output-mean", type=float, default=64)
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    engines: Engines = {}
    for arm in ARMS:
        engine = build(args, arm == "ON")
        engines[arm] = (engine, time_steps(engine))
    print(f"Engine {args.model!r}, seed {args.seed}, torch threads {torch.get_num_threads()}, "
          f"max_num_seqs {args.max_num_seqs}; engines ON (metrics), OFF and OFF-B (no metrics)")
    shape = {"prompt_mean": args.prompt_mean, "output_mean": args.output_mean}
    print(f"\n== offline: {args.offline_requests} requests at t=0, lognormal lengths (prompt "
          f"mean {args.prompt_mean:g}, output mean {args.output_mean:g} tokens), "
          f"{args.rounds} rounds")
    offline = run_rounds(engines, make_workload(args.offline_requests, 0.0, seed=args.seed,
                                                **shape), args.rounds)
    offline_summary = summarize("offline", offline)
    rate = 0.5 * args.offline_requests / statistics.median(r["OFF"].wall_seconds for r in offline)
    poisson_rounds = max(1, args.rounds // 2)
    print(f"\n== Poisson: {args.poisson_requests} requests at {rate:.1f} req/s (half the offline "
          f"request rate), {poisson_rounds} rounds: tokens/s follows the arrivals, busy time per "
          "token shows the cost")
    poisson = run_rounds(engines, make_workload(args.poisson_requests, rate, seed=args.seed + 1,
                                                **shape), poisson_rounds)
    poisson_summary = summarize("poisson", poisson)
    batch_size = max(1, round(statistics.median(r["OFF"].mean_batch_size for r in offline)))
    direct = print_direct(record_costs(batch_size), batch_size, offline, args.offline_requests)
    all_runs = [run for r in offline + poisson for run in r.values()]
    others = _others(all_runs)
    print(f"\nCPU cores kept busy by other processes: at most {others} during any run "
          f"({time.perf_counter() - started:.0f} s in all)")
    if others != "n/a" and float(others) > BUSY_WARNING_CORES:
        print(f"WARNING: other processes used more than {BUSY_WARNING_CORES} cores during some "
              "runs: the tokens/s ratios are noisier than the direct figure")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"offline": offline_summary, "poisson": poisson_summary,
                                         "direct": direct, "poisson_rate": rate}, indent=2))


if __name__ == "__main__":
    main()
