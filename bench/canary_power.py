"""Statistical quality of ``inferwatch canary``: false fails on A/A, power on a slowed canary.

Two reference servers (baseline and canary, one thread each) get identical open-loop load,
as ``inferwatch canary live`` sends it, in two phases: A/A (both clean) and A/B (the canary
slowed by the ``slowdown`` fault, 1.06 by default: every engine step takes 6% longer, which
with queueing raised the p99 TTFT per interval by 11% here; the run reports the effect it
got, and ``--calibrate`` searches the factor for ``--target-effect`` instead).
Each phase's records are cut into intervals.

A trial is one 10-minute comparison: 60 intervals of both sides judged with the packaged
judge configuration, exactly as the CLI does (samples.combine -> judge, per-request
samples clustered by interval). Trials are drawn
two ways:

* real: consecutive disjoint windows of each phase (few, but nothing resampled);
* bootstrap: moving-block resamples of the phase's intervals (blocks of ``--block``
  consecutive intervals keep the autocorrelation of load and queueing), the same interval
  indices on both sides because both sides saw the same arrivals. This is what gives enough
  trials to measure a 1% rate; it treats the phase as representative of any 10 minutes of
  those two servers.

Time compression: ``--interval`` real seconds stand for one 10-second interval (default 2 s,
5x), at ``--rate`` requests/s per side, so a trial holds the samples of a 10-minute canary
taking rate/5 requests/s. Targets (issue 7): A/A false-fail rate <= 1%, and a canary slowed
10% in p99 TTFT fails >= 95% of the time.

    python -m bench.canary_power                       # about 20 minutes on 2 cores
    python -m bench.canary_power --aa-seconds 120 --ab-seconds 120 --trials 50   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from monitor.canary.config import load_judge_config
from monitor.canary.judge import JudgeConfig, Outcome, hodges_lehmann, judge
from monitor.canary.run import run_both
from monitor.canary.samples import IntervalData, clusters, combine, split_intervals
from monitor.demo import reference_server
from monitor.loadgen.runner import Endpoint, Limits, RunResult
from monitor.loadgen.workload import LengthDist, WorkloadSpec

TOKEN = "canary-power-token"
SERVER_ARGS = ["--model", "tiny", "--num-threads", "1", "--enable-fault-injection",
               "--admin-token", TOKEN]


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    baseline: list[IntervalData]
    canary: list[IntervalData]


def _phase(name: str, base: RunResult, can: RunResult, interval: float) -> Phase:
    b = split_intervals(base.measured, base.measure_start, interval)
    c = split_intervals(can.measured, can.measure_start, interval)
    n = min(len(b), len(c))
    return Phase(name, b[:n], c[:n])


async def _load(urls: tuple[str, str], workload: WorkloadSpec, rate: float, seconds: float,
                warmup: float) -> tuple[RunResult, RunResult]:
    limits = Limits(duration_seconds=seconds, warmup_seconds=warmup, drain_seconds=30.0)
    return await run_both(Endpoint(urls[0], "tiny"), Endpoint(urls[1], "tiny"), workload,
                          rate, limits)


async def _fault(url: str, slowdown: float | None) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10.0) as admin:
        if slowdown is None:
            (await admin.delete("/admin/faults")).raise_for_status()
        else:
            (await admin.post("/admin/faults", json={
                "kind": "slowdown", "value": slowdown,
                "duration_seconds": 86400})).raise_for_status()


def p99_effect(phase: Phase) -> float:
    """Canary/baseline ratio of per-interval p99 TTFT: HL shift over the baseline median."""
    b = [d.values["ttft_p99"] for d in phase.baseline if not math.isnan(d.values["ttft_p99"])]
    c = [d.values["ttft_p99"] for d in phase.canary if not math.isnan(d.values["ttft_p99"])]
    if not b or not c:
        return math.nan
    shift, _, _ = hodges_lehmann(b, c)
    return 1.0 + shift / float(np.median(b))


def pooled_p99_ratio(phase: Phase, metric: str = "ttft") -> float:
    b = [x for d in phase.baseline for x in d.per_request[metric]]
    c = [x for d in phase.canary for x in d.per_request[metric]]
    return float(np.percentile(c, 99) / np.percentile(b, 99)) if b and c else math.nan


def trial(phase: Phase, indices: Sequence[int], config: JudgeConfig) -> tuple[Outcome, list[str]]:
    b, c = [phase.baseline[i] for i in indices], [phase.canary[i] for i in indices]
    judgement = judge(combine(b), combine(c), config, (clusters(b), clusters(c)))
    flagged = [r.name for r in judgement.results if r.verdict.value in ("high", "low")]
    return judgement.outcome, flagged


def real_windows(n: int, length: int) -> list[list[int]]:
    return [list(range(s, s + length)) for s in range(0, n - length + 1, length)]


def block_bootstrap(n: int, length: int, block: int, rng: np.random.Generator) -> list[int]:
    block = min(block, n)
    picks: list[int] = []
    while len(picks) < length:
        s = int(rng.integers(0, n - block + 1))
        picks.extend(range(s, s + block))
    return picks[:length]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def evaluate(phase: Phase, config: JudgeConfig, length: int, block: int, trials: int,
             seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    n = len(phase.baseline)
    result: dict[str, Any] = {"intervals": n}
    for kind, windows in (("real", real_windows(n, length)),
                          ("bootstrap", [block_bootstrap(n, length, block, rng)
                                         for _ in range(trials)])):
        outcomes: Counter[str] = Counter()
        flagged: Counter[str] = Counter()
        for indices in windows:
            outcome, names = trial(phase, indices, config)
            outcomes[outcome.value] += 1
            flagged.update(names)
        fails = outcomes.get("fail", 0)
        low, high = wilson(fails, len(windows))
        result[kind] = {"trials": len(windows), "outcomes": dict(outcomes),
                        "fail_rate": fails / len(windows) if windows else math.nan,
                        "fail_rate_ci95": [low, high], "flagged_metrics": dict(flagged)}
    return result


async def calibrate(urls: tuple[str, str], workload: WorkloadSpec, rate: float,
                    interval: float, target: float, seconds: float,
                    log: Any) -> tuple[float, list[dict[str, float]]]:
    """The slowdown factor whose per-interval p99 TTFT effect is closest to ``target``:
    two measured factors, then a linear interpolation checked once."""
    tried: list[dict[str, float]] = []

    async def measure(factor: float) -> float:
        await _fault(urls[1], factor)
        base, can = await _load(urls, workload, rate, seconds, 3.0)
        await _fault(urls[1], None)
        effect = p99_effect(_phase("calibration", base, can, interval))
        tried.append({"slowdown": factor, "ttft_p99_effect": effect})
        log(f"calibration: slowdown {factor:.3f} -> p99 TTFT effect {effect:.3f}")
        return effect

    a, b = 1.03, 1.10
    ea, eb = await measure(a), await measure(b)
    factor = a + (target - ea) * (b - a) / (eb - ea) if eb != ea else b
    factor = min(max(factor, 1.005), 1.5)
    await measure(factor)
    best = min(tried, key=lambda t: abs(t["ttft_p99_effect"] - target))
    return best["slowdown"], tried


def save_phases(path: Path, phases: Sequence[Phase], meta: dict[str, Any]) -> None:
    def side(data: list[IntervalData]) -> list[dict[str, Any]]:
        return [{"per_request": d.per_request,
                 "values": {k: (None if math.isnan(v) else v) for k, v in d.values.items()}}
                for d in data]
    path.write_text(json.dumps({"meta": meta, "phases": [
        {"name": p.name, "baseline": side(p.baseline), "canary": side(p.canary)}
        for p in phases]}))


def load_phases(path: Path) -> tuple[list[Phase], dict[str, Any]]:
    document = json.loads(path.read_text())

    def side(rows: list[dict[str, Any]]) -> list[IntervalData]:
        return [IntervalData(r["per_request"], {k: (math.nan if v is None else v)
                                                for k, v in r["values"].items()}) for r in rows]
    return ([Phase(p["name"], side(p["baseline"]), side(p["canary"]))
             for p in document["phases"]], document["meta"])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    config = load_judge_config(args.judge)
    if args.gate:
        config = dataclasses.replace(config, gate=args.gate)
    if args.load:  # judge recorded phases again (another judge configuration)
        (aa, ab), meta = load_phases(Path(args.load))
        return _report(args, config, aa, ab, meta["slowdown"], meta["calibration"], 0.0)
    workload = WorkloadSpec(input_len=LengthDist.parse(args.input_len),
                            output_len=LengthDist.parse(args.output_len),
                            chars_per_token=1.0, seed=args.seed)
    began = time.time()

    def log(text: str) -> None:
        print(f"[{time.time() - began:6.0f} s] {text}", flush=True)

    # One core each where there are two or more: otherwise the OS's placement of the two
    # servers, not the servers, decides which is faster for a while.
    cores = sorted(os.sched_getaffinity(0))
    pins = ({cores[0]}, {cores[1]}) if len(cores) >= 2 and not args.no_pin else (None, None)
    with reference_server(SERVER_ARGS, 120, pins[0]) as base_url, \
            reference_server(SERVER_ARGS, 120, pins[1]) as canary_url:
        urls = (base_url, canary_url)
        if args.calibrate:
            slowdown, tried = await calibrate(urls, workload, args.rate, args.interval,
                                              args.target_effect, args.calibration_seconds, log)
        else:
            slowdown, tried = args.slowdown, []
        log(f"A/A phase: {args.aa_seconds:g} s at {args.rate:g} req/s per side")
        aa = _phase("aa", *await _load(urls, workload, args.rate, args.aa_seconds, 5.0),
                    args.interval)
        log(f"A/B phase: canary slowed by {slowdown:.3f}, {args.ab_seconds:g} s")
        await _fault(canary_url, slowdown)
        ab = _phase("ab", *await _load(urls, workload, args.rate, args.ab_seconds, 5.0),
                    args.interval)
        await _fault(canary_url, None)
    if args.save:
        save_phases(Path(args.save), (aa, ab), {"slowdown": slowdown, "calibration": tried})
    log("judging trials")
    return _report(args, config, aa, ab, slowdown, tried, began)


def _report(args: argparse.Namespace, config: JudgeConfig, aa: Phase, ab: Phase,
            slowdown: float, tried: list[dict[str, float]], began: float) -> dict[str, Any]:
    report: dict[str, Any] = {
        "gate": config.gate,
        "machine": "see docs/benchmarks.md",
        "rate_per_side": args.rate, "interval_seconds": args.interval,
        "compression": 10.0 / args.interval, "trial_intervals": args.trial_intervals,
        "block": args.block, "slowdown": slowdown, "calibration": tried,
        "aa_ttft_p99_effect": p99_effect(aa), "ab_ttft_p99_effect": p99_effect(ab),
        "aa_pooled_ttft_p99_ratio": pooled_p99_ratio(aa),
        "ab_pooled_ttft_p99_ratio": pooled_p99_ratio(ab),
        "aa": evaluate(aa, config, args.trial_intervals, args.block, args.trials, args.seed),
        "ab": evaluate(ab, config, args.trial_intervals, args.block, args.trials, args.seed + 1),
        "wall_seconds": time.time() - began if began else None,
    }
    return report


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"per side {r['rate_per_side']:g} req/s, intervals of {r['interval_seconds']:g} s "
        f"standing for 10 s ({r['compression']:g}x), trials of {r['trial_intervals']} "
        f"intervals (= 10 minutes), blocks of {r['block']}, judge gate {r['gate']}",
        f"canary slowdown factor {r['slowdown']:.3f}: per-interval p99 TTFT effect "
        f"A/B {r['ab_ttft_p99_effect']:.3f} (A/A {r['aa_ttft_p99_effect']:.3f}); pooled p99 "
        f"TTFT ratio A/B {r['ab_pooled_ttft_p99_ratio']:.3f} (A/A "
        f"{r['aa_pooled_ttft_p99_ratio']:.3f})",
    ]
    for phase, label, goal in (("aa", "A/A false-fail rate", "<= 1%"),
                               ("ab", "slowed canary fail rate (power)", ">= 95%")):
        for kind in ("real", "bootstrap"):
            d = r[phase][kind]
            lo, hi = d["fail_rate_ci95"]
            lines.append(f"{label} [{kind}, {d['trials']} trials]: {d['fail_rate']:.1%} "
                         f"(95% CI {lo:.1%}..{hi:.1%}; target {goal}); outcomes "
                         f"{d['outcomes']}; metrics flagged {d['flagged_metrics']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=8.0, help="requests/s per side")
    p.add_argument("--interval", type=float, default=2.0,
                   help="real seconds standing for one 10-s interval")
    p.add_argument("--trial-intervals", type=int, default=60)
    p.add_argument("--block", type=int, default=6)
    p.add_argument("--aa-seconds", type=float, default=480.0)
    p.add_argument("--ab-seconds", type=float, default=360.0)
    p.add_argument("--calibration-seconds", type=float, default=40.0)
    p.add_argument("--slowdown", type=float, default=1.06,
                   help="the canary's slowdown fault factor (here 1.05 gave a per-interval "
                   "p99 TTFT effect of 1.06 to 1.09, 1.06 gave 1.11, 1.08 gave 1.14)")
    p.add_argument("--calibrate", action="store_true",
                   help="search the factor for --target-effect first (noisy: p99 over short "
                   "runs)")
    p.add_argument("--target-effect", type=float, default=1.10)
    p.add_argument("--trials", type=int, default=500, help="bootstrap trials per phase")
    p.add_argument("--input-len", default="uniform:50-150")
    p.add_argument("--output-len", default="fixed:32")
    p.add_argument("--judge", help="judge configuration (default: the packaged one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-pin", action="store_true", help="do not pin each server to a core")
    p.add_argument("--save", default="bench/out/canary_power_phases.json",
                   help="keep the phases' interval samples here")
    p.add_argument("--load", help="judge the phases saved by --save again, without servers")
    p.add_argument("--gate", choices=("interval", "estimate"),
                   help="override the judge configuration's gate")
    p.add_argument("--out", default="bench/out/canary_power.json")
    args = p.parse_args(argv)
    report = asyncio.run(main_async(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(format_report(report))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
