"""``inferwatch bench run`` and ``inferwatch bench sweep``: load an OpenAI-compatible endpoint.

    inferwatch bench run --url http://localhost:8000 --model tiny --rate 4 --duration 60 \\
        --slo-ttft-ms 200 --slo-tpot-ms 50 --output-dir out/
    inferwatch bench sweep --url http://localhost:8000 --model tiny --start-rate 1 \\
        --step-duration 30 --slo-ttft-ms 200 --slo-tpot-ms 50 --plot out/sweep.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from monitor.collect.config import ConfigError
from monitor.loadgen.capacity import CapacityInputs, plan
from monitor.loadgen.metrics import (
    LatencySlo,
    RunSummary,
    summarize,
    write_records,
    write_summary,
)
from monitor.loadgen.runner import Endpoint, Limits, Progress, check_endpoint, run_load
from monitor.loadgen.sweep import SweepOptions, SweepPoint, SweepResult, sweep
from monitor.loadgen.workload import Arrival, LengthDist, WorkloadError, WorkloadSpec, load_prompts
from monitor.progress import ProgressBar, add_progress_argument, bar_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench_command", required=True)
    run_p = sub.add_parser("run", help="one load run at a rate or concurrency")
    _common(run_p)
    run_p.add_argument("--rate", type=_rate, default=math.inf,
                       help="requests/s (open loop); inf with --max-concurrency: closed loop")
    limit = run_p.add_mutually_exclusive_group(required=True)
    limit.add_argument("--duration", type=float, help="seconds of measured load")
    limit.add_argument("--num-requests", type=int, help="measured requests")
    run_p.set_defaults(bench_run=_run)

    sweep_p = sub.add_parser("sweep", help="rates from low to saturation; max QPS under an SLO")
    _common(sweep_p)
    sweep_p.add_argument("--rates", help="comma-separated ascending rates (default: geometric "
                         "from --start-rate by --growth)")
    sweep_p.add_argument("--start-rate", type=float, default=1.0)
    sweep_p.add_argument("--growth", type=float, default=2.0)
    sweep_p.add_argument("--max-rate", type=float, default=1000.0)
    sweep_p.add_argument("--step-duration", type=float, default=60.0,
                         help="seconds of measured load per rate")
    sweep_p.add_argument("--attainment", type=float, default=0.99,
                         help="fraction of requests that must meet the SLO (goodput)")
    sweep_p.add_argument("--refine", type=int, default=2,
                         help="midpoint runs to narrow the SLO bracket")
    sweep_p.add_argument("--knee-metric", default="ttft_p99")
    sweep_p.add_argument("--plot", help="PNG of the throughput-latency curve "
                         "(default: sweep.png in --output-dir)")
    sweep_p.set_defaults(bench_run=_sweep)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="base URL of the OpenAI-compatible server")
    p.add_argument("--model", required=True)
    add_client_arguments(p)
    add_workload_arguments(p)
    p.add_argument("--slo-ttft-ms", type=float)
    p.add_argument("--slo-tpot-ms", type=float)
    p.add_argument("--slo-e2e-ms", type=float)
    add_record_arguments(p)
    add_progress_argument(p)
    cap = p.add_argument_group("capacity planning")
    cap.add_argument("--peak-qps", type=float, help="plan replicas for this peak")
    cap.add_argument("--peak-input-len", type=float, help="mean prompt tokens at peak")
    cap.add_argument("--peak-output-len", type=float, help="mean output tokens at peak")
    cap.add_argument("--target-utilization", type=float, default=0.7)
    cap.add_argument("--redundancy", type=int, default=1, help="N+R spare replicas")
    cap.add_argument("--prefill-weight", type=float, default=0.1,
                     help="cost of a prompt token relative to an output token")
    cap.add_argument("--gpus-per-replica", type=int, default=1)
    cap.add_argument("--gpu-hour-price", type=float, help="price of one GPU-hour")


def add_client_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api", choices=("completions", "chat"), default="completions")
    p.add_argument("--api-key", default=None)
    p.add_argument("--timeout", type=float, default=300.0, help="per-request seconds")
    p.add_argument("--no-ignore-eos", action="store_true",
                   help="do not send ignore_eos (servers that reject the vLLM extension)")


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arrival", choices=[a.value for a in Arrival], default="poisson")
    p.add_argument("--burstiness", type=float, default=1.0,
                   help="gamma shape: 1 = Poisson, < 1 burstier")
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--warmup", type=float, default=0.0, help="seconds of load not measured")
    p.add_argument("--warmup-requests", type=int, default=0)
    p.add_argument("--input-len", default="lognormal:256,0.6",
                   help="fixed:N, uniform:LO-HI or lognormal:MEAN[,SIGMA] (tokens)")
    p.add_argument("--output-len", default="lognormal:128,0.6")
    p.add_argument("--chars-per-token", type=float, default=4.0,
                   help="for synthetic prompts; 1 for byte-level tokenizers (reference tiny)")
    p.add_argument("--prompts", help="JSONL of prompts ({\"prompt\"} or {\"messages\"})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--percentiles", default="50,90,95,99")


def add_record_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output-dir", help="write per-request JSONL and the summary JSON here")
    p.add_argument("--store", help="database URL to record the run in (or --config)")
    p.add_argument("--config", help="inferwatch.yaml: record the run in its store")
    p.add_argument("--name", default="", help="a name for the run in the store")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no step lines")


def _rate(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("rate must be > 0 (or inf)")
    return value


def run(args: argparse.Namespace) -> int:
    try:
        code: int = args.bench_run(args)
        return code
    except (WorkloadError, ValueError, ConfigError) as exc:
        print(f"inferwatch bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def endpoint_of(args: argparse.Namespace, url: str | None = None,
                model: str | None = None) -> Endpoint:
    return Endpoint(url or args.url, model or args.model, chat=args.api == "chat",
                    api_key=args.api_key, timeout_seconds=args.timeout,
                    ignore_eos=not args.no_ignore_eos)


def workload_of(args: argparse.Namespace) -> WorkloadSpec:
    return WorkloadSpec(
        input_len=LengthDist.parse(args.input_len, "--input-len"),
        output_len=LengthDist.parse(args.output_len, "--output-len"),
        prompts=load_prompts(args.prompts) if args.prompts else None,
        chat=args.api == "chat", chars_per_token=args.chars_per_token,
        arrival=Arrival(args.arrival), burstiness=args.burstiness, seed=args.seed)


def slo_of(args: argparse.Namespace) -> LatencySlo | None:
    values = (args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms)
    if all(v is None for v in values):
        return None
    return LatencySlo(*(None if v is None else v / 1000 for v in values))


def percentiles_of(args: argparse.Namespace) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in args.percentiles.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--percentiles: {args.percentiles!r} is not a list of numbers") \
            from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise ValueError("--percentiles must be numbers in [0, 100]")
    return values


def describe(args: argparse.Namespace) -> dict[str, Any]:
    """The run's options as recorded with its result (the API key left out)."""
    return {k: v for k, v in vars(args).items()
            if k not in ("api_key", "bench_run", "run") and not callable(v)}


def counts(p: Progress) -> str:
    """A run's requests as shown after its bar."""
    return f"sent {p.sent} done {p.done} in flight {p.in_flight} failed {p.failed}"


def store_url(args: argparse.Namespace) -> str | None:
    """The database of --store, else of --config's inferwatch.yaml, else None."""
    if args.store is None and args.config:
        from monitor.collect.config import load_config
        return load_config(args.config).store.url
    url: str | None = args.store
    return url


@contextlib.contextmanager
def recorded(args: argparse.Namespace, kind: str, config: dict[str, Any]) -> Iterator[
        dict[str, Any]]:
    """Record the run in the store when one is configured: ``running`` now, the result
    (put into the yielded dict under "result") or the error at the end."""
    url = store_url(args)
    holder: dict[str, Any] = {"result": None, "artifacts": {}}
    if url is None:
        yield holder
        return
    from monitor.store import open_store
    from monitor.store.runs import finish_run, start_run
    store = open_store(url)
    try:
        store.migrate()
        run_id = start_run(store.engine, kind, args.name or kind, config)
        holder["id"] = run_id
        try:
            yield holder
        except BaseException as exc:
            finish_run(store.engine, run_id, None, error=f"{type(exc).__name__}: {exc}")
            raise
        finish_run(store.engine, run_id, holder["result"], artifacts=holder["artifacts"])
        print(f"recorded as {kind} {run_id} in the store", file=sys.stderr)
    finally:
        store.close()


def capacity_of(args: argparse.Namespace, max_qps: float | None,
                summary: RunSummary) -> dict[str, Any] | None:
    if args.peak_qps is None:
        return None
    if max_qps is None or max_qps <= 0:
        print("capacity plan: no measured capacity to plan from", file=sys.stderr)
        return None
    inputs = CapacityInputs(
        replica_max_qps=max_qps,
        measured_input_tokens=summary.mean_prompt_tokens or 0.0,
        measured_output_tokens=summary.mean_output_tokens or 0.0,
        peak_qps=args.peak_qps, peak_input_tokens=args.peak_input_len,
        peak_output_tokens=args.peak_output_len,
        target_utilization=args.target_utilization, redundancy=args.redundancy,
        prefill_weight=args.prefill_weight, gpus_per_replica=args.gpus_per_replica,
        gpu_hour_price=args.gpu_hour_price)
    result = plan(inputs)
    print(result.format(inputs))
    return {"inputs": {k: getattr(inputs, k) for k in inputs.__dataclass_fields__},
            "plan": result.to_json()}


def _run(args: argparse.Namespace) -> int:
    endpoint, workload = endpoint_of(args), workload_of(args)
    slo, percentiles = slo_of(args), percentiles_of(args)
    if math.isinf(args.rate) and args.max_concurrency is None:
        raise ValueError("an infinite --rate needs --max-concurrency (a closed loop of N users)")
    limits = Limits(duration_seconds=args.duration, num_requests=args.num_requests,
                    warmup_seconds=args.warmup, warmup_requests=args.warmup_requests,
                    max_concurrency=args.max_concurrency)
    by_time = args.duration is not None
    bar = bar_for(args, args.duration + args.warmup if by_time
                  else args.num_requests + args.warmup_requests, "load",
                  unit="s" if by_time else "req")

    def show(p: Progress, elapsed: float) -> None:
        bar.update_to(elapsed if by_time else p.done, counts(p))

    asyncio.run(check_endpoint(endpoint))
    with recorded(args, "run", describe(args)) as holder:
        with bar:
            result = asyncio.run(run_load(endpoint, workload.stream(args.rate), limits,
                                          rate=args.rate, on_progress=show))
        summary = summarize(result, percentiles, slo)
        print(summary.format())
        capacity = capacity_of(args, summary.request_throughput if slo is None
                               else summary.goodput, summary)
        document = summary.to_json() | {"capacity": capacity}
        holder["result"] = document
        if args.output_dir:
            out = Path(args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            write_records(result, out / "requests.jsonl")
            write_summary(summary, out / "summary.json", {"capacity": capacity})
            holder["artifacts"] = {"requests": str(out / "requests.jsonl"),
                                   "summary": str(out / "summary.json")}
            print(f"wrote {out / 'requests.jsonl'} and {out / 'summary.json'}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    endpoint, workload = endpoint_of(args), workload_of(args)
    slo = slo_of(args)
    if slo is None:
        raise ValueError("a sweep needs an SLO: --slo-ttft-ms, --slo-tpot-ms or --slo-e2e-ms")
    rates = tuple(float(x) for x in args.rates.split(",")) if args.rates else None
    options = SweepOptions(
        slo=slo, attainment_target=args.attainment, rates=rates, start_rate=args.start_rate,
        growth=args.growth, max_rate=args.max_rate, step_seconds=args.step_duration,
        warmup_seconds=args.warmup, refine_steps=args.refine,
        max_concurrency=args.max_concurrency, percentiles=percentiles_of(args),
        knee_metric=args.knee_metric)
    steps = SweepBars(args, options.step_seconds + options.warmup_seconds)
    asyncio.run(check_endpoint(endpoint))
    with recorded(args, "sweep", describe(args)) as holder:
        with steps:
            result = asyncio.run(sweep(endpoint, workload, options, progress=steps.line,
                                       step_progress=steps.show))
        print(result.format())
        document: dict[str, Any] = result.to_json()
        best = _point_near(result, result.max_rate_under_slo)
        if best is not None:
            document["capacity"] = capacity_of(args, result.max_rate_under_slo, best.summary)
        out = Path(args.output_dir) if args.output_dir else None
        plot_path = Path(args.plot) if args.plot else (out / "sweep.png" if out else None)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "sweep.json").write_text(json.dumps(document, indent=2) + "\n")
            holder["artifacts"]["sweep"] = str(out / "sweep.json")
        if plot_path is not None:
            from monitor.loadgen.plot import plot_sweep
            plot_sweep(result, plot_path, title=f"{args.model} at {args.url}")
            holder["artifacts"]["plot"] = str(plot_path)
            print(f"wrote {plot_path}")
        holder["result"] = document
    return 0


class SweepBars:
    """One bar per step of a sweep (seconds of its load, its requests after the bar), and a
    line per finished step (on stderr, unless --quiet)."""

    def __init__(self, args: argparse.Namespace, step_seconds: float) -> None:
        self.args, self.step_seconds = args, step_seconds
        self.num_steps = 0
        self.rate: float | None = None
        self.bar = ProgressBar(None, "", enabled=False)

    def show(self, rate: float, elapsed: float, p: Progress) -> None:
        if rate != self.rate:
            self.bar.close()
            self.rate, self.num_steps = rate, self.num_steps + 1
            self.bar = bar_for(self.args, self.step_seconds,
                               f"step {self.num_steps} at {rate:.3g} req/s", unit="s")
        self.bar.update_to(elapsed, counts(p))

    def line(self, text: str) -> None:
        self.bar.close()
        self.rate = None
        if not self.args.quiet:
            print(text, file=sys.stderr, flush=True)

    def __enter__(self) -> SweepBars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


def _point_near(result: SweepResult, rate: float | None) -> SweepPoint | None:
    """The measured step closest below ``rate`` (its token mix stands for the capacity's)."""
    if rate is None:
        return None
    below = [p for p in result.sorted_points() if p.rate <= rate + 1e-9] or \
        result.sorted_points()
    return below[-1] if below else None

