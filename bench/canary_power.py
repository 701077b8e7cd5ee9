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

Autocorrelated load (issue 17): ``--arrival onoff`` draws arrivals from a two-state
Markov-modulated Poisson process (bursts at rate x (1 + depth), lulls at rate x (1 - depth),
each lasting an exponential time of mean ``--burst-seconds``, so the mean rate is kept), and
``--prefix-share`` makes that share of the prompts start with the current burst's shared
prefix of ``--prefix-tokens`` tokens (one of ``--prefix-groups``), so the servers' prefix
caches warm and cool together with the load. Both sides still get the same requests at the
same moments.

``--methods`` judges the same trials with each way of handling the per-request samples'
dependence (``cluster-bootstrap``, the default since issue 17; ``design-effect``, issue 21's;
``independent``, samples taken as independent), side by side; ``--load FILE`` does it on
phases saved earlier, without servers.

Time compression: ``--interval`` real seconds stand for one 10-second interval (default 2 s,
5x), at ``--rate`` requests/s per side, so a trial holds the samples of a 10-minute canary
taking rate/5 requests/s. Targets (issue 7): A/A false-fail rate <= 1%, and a canary slowed
10% in p99 TTFT fails >= 95% of the time.

    python -m bench.canary_power                       # about 20 minutes on 2 cores
    python -m bench.canary_power --aa-seconds 120 --ab-seconds 120 --trials 50   # a smoke run
    python -m bench.canary_power --arrival onoff --prefix-share 0.7 --save phases_onoff.json
    python -m bench.canary_power --load phases_onoff.json \
        --methods cluster-bootstrap,design-effect,independent
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import math
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from monitor.canary.config import load_judge_config
from monitor.canary.judge import JudgeConfig, Outcome, hodges_lehmann, judge
from monitor.canary.run import run_both
from monitor.canary.samples import IntervalData, clusters, combine, lengths, split_intervals
from monitor.demo import reference_server
from monitor.loadgen.runner import Endpoint, Limits, RequestRecord, RunResult, run_paired
from monitor.loadgen.workload import LengthDist, RequestSpec, WorkloadSpec, synthetic_prompt

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


@dataclass(frozen=True, slots=True)
class BurstyLoad:
    """On/off (Markov-modulated Poisson) arrivals and shared prompt prefixes: see the module
    docstring. ``depth`` 0 and ``prefix_share`` 0 is the plain Poisson workload."""

    depth: float = 0.0
    burst_seconds: float = 5.0
    prefix_share: float = 0.0
    prefix_tokens: int = 64
    prefix_groups: int = 4

    @property
    def plain(self) -> bool:
        return self.depth == 0.0 and self.prefix_share == 0.0

    def describe(self) -> str:
        if self.plain:
            return "Poisson arrivals, no shared prefixes"
        return (f"on/off arrivals (rate x {1 + self.depth:g} / x {1 - self.depth:g}, phases of "
                f"{self.burst_seconds:g} s on average), {self.prefix_share:.0%} of prompts "
                f"with one of {self.prefix_groups} shared {self.prefix_tokens}-token prefixes")


def bursty_stream(workload: WorkloadSpec, rate: float, load: BurstyLoad
                  ) -> Iterator[RequestSpec]:
    """Endless requests at a mean of ``rate``/s: while the process is in a burst, arrivals at
    rate x (1 + depth), in a lull at rate x (1 - depth), each phase exponential with mean
    ``burst_seconds``; each phase picks a prefix that ``prefix_share`` of its prompts begin
    with."""
    if not 0.0 <= load.depth < 1.0:
        raise ValueError(f"--burst-depth must be in [0, 1), not {load.depth}")
    if not 0.0 <= load.prefix_share <= 1.0:
        raise ValueError(f"--prefix-share must be in [0, 1], not {load.prefix_share}")
    rng = np.random.default_rng([workload.seed, 17])
    prefixes = [synthetic_prompt(rng, load.prefix_tokens, workload.chars_per_token)
                for _ in range(load.prefix_groups)]
    now, burst = 0.0, True
    while True:
        phase_end = now + float(rng.exponential(load.burst_seconds))
        phase_rate = rate * (1 + load.depth if burst else 1 - load.depth)
        prefix = prefixes[int(rng.integers(0, len(prefixes)))]
        while phase_rate > 0:
            now += float(rng.exponential(1.0 / phase_rate))
            if now >= phase_end:
                break
            tail = int(workload.input_len.sample(rng, 1)[0])
            shared = rng.random() < load.prefix_share
            text = synthetic_prompt(rng, tail, workload.chars_per_token)
            tokens = tail + (load.prefix_tokens if shared else 0)
            yield RequestSpec(now, (prefix + text) if shared else text,
                              int(workload.output_len.sample(rng, 1)[0]), None, tokens)
        now, burst = phase_end, not burst


@dataclass(frozen=True, slots=True)
class SimServer:
    """A continuous-batching engine in discrete steps, for ``--simulate``: every step emits
    a token for each running request and prefills the newly admitted ones; a step takes
    ``base + per_running * running + per_prefill_token * uncached prompt tokens`` times
    the slowdown, times lognormal noise. A prompt's shared prefix is cached (the last
    ``cache`` prefixes used). Each server also has slow episodes of its own (a neighbour,
    a GC: steps ``episode_factor`` longer for an exponential time of mean ``episode_seconds``,
    starting at ``episodes_per_minute``): what makes requests of one interval dependent and
    is not shared with the other side."""

    base: float = 0.006
    per_running: float = 0.0008
    per_prefill_token: float = 0.00004
    noise: float = 0.05
    max_running: int = 64
    cache: int = 2
    episodes_per_minute: float = 1.0
    episode_seconds: float = 4.0
    episode_factor: float = 1.5


def simulate_side(requests: Sequence[RequestSpec], prefixes: Sequence[str], prefix_tokens: int,
                  slowdown: float, rng: np.random.Generator,
                  server: SimServer = SimServer()) -> list[RequestRecord]:
    """The records ``requests`` would get from one ``SimServer`` slowed by ``slowdown``."""
    records = [RequestRecord(i, spec, intended_at=spec.arrival_seconds,
                             sent_at=spec.arrival_seconds, status=200,
                             prompt_tokens=spec.input_tokens, usage_reported=True)
               for i, spec in enumerate(requests)]
    cached: list[str] = []
    running: list[list[Any]] = []   # [record, tokens left]
    t, nxt = 0.0, 0
    gap = 60.0 / server.episodes_per_minute if server.episodes_per_minute > 0 else math.inf
    episode_end, next_episode = 0.0, float(rng.exponential(gap))
    while nxt < len(records) or running:
        if not running and nxt < len(records) and records[nxt].intended_at > t:
            t = records[nxt].intended_at
        prefill = 0
        admitted: list[list[Any]] = []
        while (nxt < len(records) and records[nxt].intended_at <= t
               and len(running) + len(admitted) < server.max_running):
            r = records[nxt]
            head = r.spec.prompt[:len(prefixes[0])] if prefixes else ""
            tokens = r.spec.input_tokens or 0
            if head in prefixes:
                if head in cached:
                    tokens -= prefix_tokens
                    cached.remove(head)
                cached.append(head)
                del cached[:-server.cache]
            prefill += max(tokens, 1)
            admitted.append([r, r.spec.max_tokens])
            nxt += 1
        if t >= next_episode:
            episode_end = t + float(rng.exponential(server.episode_seconds))
            next_episode = episode_end + float(rng.exponential(gap))
        step = (server.base + server.per_running * (len(running) + len(admitted))
                + server.per_prefill_token * prefill) * slowdown
        step *= float(rng.lognormal(0.0, server.noise))
        if t < episode_end:
            step *= server.episode_factor
        t += step
        for entry in running + admitted:
            record = entry[0]
            record.chunk_times.append(t)
            entry[1] -= 1
            if entry[1] <= 0:
                record.finished_at = t
                record.num_output_tokens = len(record.chunk_times)
        running = [e for e in running + admitted if e[1] > 0]
    return records


def simulate_phase(name: str, workload: WorkloadSpec, rate: float, seconds: float,
                   load: BurstyLoad, slowdown: float, interval: float, seed: int,
                   server: SimServer = SimServer()) -> Phase:
    """Both sides of a phase from two ``SimServer``s given the same requests."""
    rng = np.random.default_rng([workload.seed, 17])
    prefixes = [synthetic_prompt(rng, load.prefix_tokens, workload.chars_per_token)
                for _ in range(load.prefix_groups)]
    requests = list(itertools.takewhile(lambda r: r.arrival_seconds < seconds,
                                        bursty_stream(workload, rate, load)))
    sides = []
    for k, factor in enumerate((1.0, slowdown)):
        records = simulate_side(requests, prefixes if load.prefix_share else [],
                                load.prefix_tokens, factor, np.random.default_rng([seed, k]),
                                server)
        sides.append(split_intervals(records, 0.0, interval))
    n = min(len(sides[0]), len(sides[1]))
    return Phase(name, sides[0][:n], sides[1][:n])


async def _load(urls: tuple[str, str], workload: WorkloadSpec, rate: float, seconds: float,
                warmup: float, bursty: BurstyLoad | None = None) -> tuple[RunResult, RunResult]:
    limits = Limits(duration_seconds=seconds, warmup_seconds=warmup, drain_seconds=30.0)
    base, can = (Endpoint(urls[0], "tiny"), Endpoint(urls[1], "tiny"))
    if bursty is None or bursty.plain:
        return await run_both(base, can, workload, rate, limits)
    b, c = await run_paired((base, can), bursty_stream(workload, rate, bursty), limits,
                            rate=rate, seed=workload.seed)
    return b, c


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
    judgement = judge(combine(b), combine(c), config, (clusters(b), clusters(c)),
                      (lengths(b), lengths(c)))
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
                 "values": {k: (None if math.isnan(v) else v) for k, v in d.values.items()},
                 "lengths": {k: [[None if math.isnan(x) else x for x in row] for row in rows]
                             for k, rows in d.lengths.items()}}
                for d in data]
    path.write_text(json.dumps({"meta": meta, "phases": [
        {"name": p.name, "baseline": side(p.baseline), "canary": side(p.canary)}
        for p in phases]}))


def load_phases(path: Path) -> tuple[list[Phase], dict[str, Any]]:
    document = json.loads(path.read_text())

    def side(rows: list[dict[str, Any]]) -> list[IntervalData]:
        return [IntervalData(r["per_request"], {k: (math.nan if v is None else v)
                                                for k, v in r["values"].items()},
                             {k: [[math.nan if x is None else x for x in row] for row in v]
                              for k, v in r.get("lengths", {}).items()}) for r in rows]
    return ([Phase(p["name"], side(p["baseline"]), side(p["canary"]))
             for p in document["phases"]], document["meta"])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    config = load_judge_config(args.judge)
    if args.gate:
        config = dataclasses.replace(config, gate=args.gate)
    if args.load:  # judge recorded phases again (another judge configuration)
        (aa, ab), meta = load_phases(Path(args.load))
        # The recorded run's rate and interval, where it saved them.
        args.rate = meta.get("rate_per_side", args.rate)
        args.interval = meta.get("interval_seconds", args.interval)
        return _report(args, config, aa, ab, meta["slowdown"], meta["calibration"], 0.0,
                       meta.get("load", "Poisson arrivals, no shared prefixes"))
    workload = WorkloadSpec(input_len=LengthDist.parse(args.input_len),
                            output_len=LengthDist.parse(args.output_len),
                            chars_per_token=1.0, seed=args.seed)
    bursty = BurstyLoad(args.burst_depth if args.arrival == "onoff" else 0.0,
                        args.burst_seconds, args.prefix_share, args.prefix_tokens,
                        args.prefix_groups)
    began = time.time()
    if args.simulate:
        server = SimServer(episodes_per_minute=args.sim_episodes)
        aa = simulate_phase("aa", workload, args.rate, args.aa_seconds, bursty, 1.0,
                            args.interval, args.seed, server)
        ab = simulate_phase("ab", workload, args.rate, args.ab_seconds, bursty, args.slowdown,
                            args.interval, args.seed + 1, server)
        episodes = (f"slow episodes of their own {args.sim_episodes:g}/min (x"
                    f"{server.episode_factor:g}, {server.episode_seconds:g} s mean)"
                    if args.sim_episodes > 0 else "no slow episodes of their own")
        what = (f"simulated servers (bench.canary_power.SimServer, {episodes}), "
                f"{bursty.describe()}")
        if args.save:
            Path(args.save).parent.mkdir(parents=True, exist_ok=True)
            save_phases(Path(args.save), (aa, ab), {
                "slowdown": args.slowdown, "calibration": [], "load": what,
                "rate_per_side": args.rate, "interval_seconds": args.interval})
        return _report(args, config, aa, ab, args.slowdown, [], began, what)

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
        log(f"A/A phase: {args.aa_seconds:g} s at {args.rate:g} req/s per side, "
            f"{bursty.describe()}")
        aa = _phase("aa", *await _load(urls, workload, args.rate, args.aa_seconds, 5.0,
                                       bursty), args.interval)
        log(f"A/B phase: canary slowed by {slowdown:.3f}, {args.ab_seconds:g} s")
        await _fault(canary_url, slowdown)
        ab = _phase("ab", *await _load(urls, workload, args.rate, args.ab_seconds, 5.0,
                                       bursty), args.interval)
        await _fault(canary_url, None)
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        save_phases(Path(args.save), (aa, ab), {
            "slowdown": slowdown, "calibration": tried, "load": bursty.describe(),
            "rate_per_side": args.rate, "interval_seconds": args.interval})
    log("judging trials")
    return _report(args, config, aa, ab, slowdown, tried, began, bursty.describe())


def _report(args: argparse.Namespace, config: JudgeConfig, aa: Phase, ab: Phase,
            slowdown: float, tried: list[dict[str, float]], began: float,
            load: str) -> dict[str, Any]:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    judged: dict[str, Any] = {}
    for method in methods:
        cfg = dataclasses.replace(config, method=method)
        started = time.time()
        judged[method] = {
            "aa": evaluate(aa, cfg, args.trial_intervals, args.block, args.trials, args.seed),
            "ab": evaluate(ab, cfg, args.trial_intervals, args.block, args.trials,
                           args.seed + 1),
            "judge_seconds": time.time() - started}
    first = judged[methods[0]]
    report: dict[str, Any] = {
        "gate": config.gate,
        "machine": "see docs/benchmarks.md",
        "load": load,
        "rate_per_side": args.rate, "interval_seconds": args.interval,
        "compression": 10.0 / args.interval, "trial_intervals": args.trial_intervals,
        "block": args.block, "slowdown": slowdown, "calibration": tried,
        "aa_ttft_p99_effect": p99_effect(aa), "ab_ttft_p99_effect": p99_effect(ab),
        "aa_pooled_ttft_p99_ratio": pooled_p99_ratio(aa),
        "ab_pooled_ttft_p99_ratio": pooled_p99_ratio(ab),
        "method": methods[0], "aa": first["aa"], "ab": first["ab"],
        "methods": judged,
        "wall_seconds": time.time() - began if began else None,
    }
    return report


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"load: {r.get('load', 'Poisson arrivals, no shared prefixes')}",
        f"per side {r['rate_per_side']:g} req/s, intervals of {r['interval_seconds']:g} s "
        f"standing for 10 s ({r['compression']:g}x), trials of {r['trial_intervals']} "
        f"intervals (= 10 minutes), blocks of {r['block']}, judge gate {r['gate']}",
        f"canary slowdown factor {r['slowdown']:.3f}: per-interval p99 TTFT effect "
        f"A/B {r['ab_ttft_p99_effect']:.3f} (A/A {r['aa_ttft_p99_effect']:.3f}); pooled p99 "
        f"TTFT ratio A/B {r['ab_pooled_ttft_p99_ratio']:.3f} (A/A "
        f"{r['aa_pooled_ttft_p99_ratio']:.3f})",
    ]
    for method, judged in r.get("methods", {r.get("method", "-"): r}).items():
        lines.append(f"per-request samples judged by {method}"
                     + (f" ({judged['judge_seconds']:.0f} s of judging)"
                        if "judge_seconds" in judged else "") + ":")
        for phase, label, goal in (("aa", "A/A false-fail rate", "<= 1%"),
                                   ("ab", "slowed canary fail rate (power)", ">= 95%")):
            for kind in ("real", "bootstrap"):
                d = judged[phase][kind]
                lo, hi = d["fail_rate_ci95"]
                lines.append(f"  {label} [{kind}, {d['trials']} trials]: {d['fail_rate']:.1%} "
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
    p.add_argument("--methods", default="cluster-bootstrap",
                   help="comma-separated ways of judging the per-request samples' dependence, "
                   "each on the same trials: cluster-bootstrap, design-effect, independent")
    p.add_argument("--arrival", choices=("poisson", "onoff"), default="poisson",
                   help="onoff: Markov-modulated Poisson bursts and lulls (issue 17)")
    p.add_argument("--burst-depth", type=float, default=0.6,
                   help="onoff: bursts at rate x (1 + depth), lulls at rate x (1 - depth)")
    p.add_argument("--burst-seconds", type=float, default=5.0,
                   help="onoff: mean length of a burst or a lull")
    p.add_argument("--prefix-share", type=float, default=0.0,
                   help="share of prompts that start with the current phase's shared prefix")
    p.add_argument("--prefix-tokens", type=int, default=64)
    p.add_argument("--simulate", action="store_true",
                   help="simulated servers (SimServer) instead of two reference servers: "
                   "long phases in seconds, free of the machine's other load")
    p.add_argument("--sim-episodes", type=float, default=1.0,
                   help="--simulate: each server's own slow episodes per minute (0: none)")
    p.add_argument("--prefix-groups", type=int, default=4)
    args = p.parse_args(argv)
    report = asyncio.run(main_async(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(format_report(report))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
