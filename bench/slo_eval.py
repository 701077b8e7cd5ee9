"""Evaluation tick cost of 1,000 SLOs over 30 days of 1-minute data, against 1-day SLOs:
the first tick (which loads each SLO's history) and the steady ticks after it.

    python -m bench.slo_eval [--slos 1000] [--ticks 240]                  # in-memory source
    python -m bench.slo_eval --store [--targets 20] [--store-ticks 40]    # and a SQLite store
    python -m bench.slo_eval --store --per-slo ...                        # and the old reads

The evaluator must be incremental: a tick costs the same whatever the window length. Two
evaluators of N SLOs each (one with 30-day periods, one with 1-day periods) load 30 days of
history on their first tick and are then ticked every 15 s of simulated time, interleaved, so
both see the same machine. Printed per source and period: the first tick, mean and p99 tick
time; the targets (first tick < 5 s; tick time 30d / 1d <= 1.5); the cores other processes
used meanwhile.

Sources:
- memory: ``SyntheticSource``, availability SLOs each on its own per-minute series (Poisson
  traffic, rare error bursts): the evaluator's own cost.
- store: ``StoreSliSource`` over a SQLite store filled by the store's writer
  (``bench.slo_store``: --targets targets, hour rows for 30 days, minute rows for the last
  3.5, raw 15-second scrapes after), SLOs of every kind the store serves spread over the
  targets and their pools (availability, TTFT and end-to-end latency, by target or by pool
  label): the product's path, each tick's reads made in bulk (``read_many``). With --per-slo
  also the same SLOs read one SLO at a time (``read`` only, as before bulk reads).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.cpu_meter import OtherCpuMeter
from bench.slo_store import Fill, fill, store_slos, write_raw
from bench.stack import sqlite_store
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import SliSource, Step, StepArrays, StoreSliSource
from monitor.slo.spec import Slo

T_END = 1_790_000_000 // 3600 * 3600  # the simulated "now" the history runs up to
DAYS = 30


class SyntheticSource:
    """Per-minute events generated from each SLO's seed on demand: ~100 requests a minute,
    0.05% errors, and an error burst now and then; no memory for 30 days x 1,000 series."""

    def __init__(self, num_series: int) -> None:
        self.seeds = {i: 1000 + i for i in range(num_series)}

    def read(self, slo: Slo, start: float, end: float, step: float) -> list[Step]:
        return self.read_arrays(slo, start, end, step).steps()

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        seed = self.seeds[int(slo.name.rsplit("-", 1)[1])]
        first, last = int(start // 60) + 1, int(end // 60)
        minutes = np.arange(first, last + 1)
        total = 80 + (minutes * 2654435761 + seed * 97) % 41  # deterministic, cheap
        bad = np.where((minutes + seed) % 5000 < 7, total // 2,
                       ((minutes * 40503 + seed) % 2000 == 0).astype(np.int64))
        per_step = max(int(step // 60), 1)
        firsts = np.arange(0, len(minutes), per_step)
        lasts = np.minimum(firsts + per_step, len(minutes)) - 1
        totals = np.add.reduceat(total, firsts).astype(np.float64)
        goods = totals - np.add.reduceat(bad, firsts)
        ends = np.minimum(minutes[lasts] * 60, end).astype(np.float64)
        return StepArrays(ends, goods, totals, np.ones(len(ends), dtype=np.bool_))


def slos(n: int, period: str) -> list[Slo]:
    return [Slo.model_validate({"name": f"{period}-{i}", "objective": 0.999,
                                "window": period, "sli": {"kind": "availability"}})
            for i in range(n)]


class OneAtATime:
    """A source as the evaluator read it before bulk reads: ``read`` per SLO only."""

    def __init__(self, source: SliSource) -> None:
        self.source = source

    def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
        return self.source.read(slo, start, end, step)


@dataclass
class Timings:
    first: float
    ticks: list[float]

    @property
    def mean(self) -> float:
        return statistics.mean(self.ticks)

    @property
    def p99(self) -> float:
        return float(np.percentile(self.ticks, 99))


def run(evaluators: dict[str, SloEvaluator], first_at: float, ticks: int) -> dict[str, Timings]:
    first: dict[str, float] = {}
    for period, evaluator in evaluators.items():
        started = time.perf_counter()
        evaluator.tick(first_at)
        first[period] = time.perf_counter() - started
    times: dict[str, list[float]] = {p: [] for p in evaluators}
    for k in range(1, ticks + 1):
        now = first_at + 15 * k
        for period in (("30d", "1d") if k % 2 else ("1d", "30d")):
            started = time.perf_counter()
            evaluators[period].tick(now)
            times[period].append(time.perf_counter() - started)
    return {p: Timings(first[p], times[p]) for p in evaluators}


def store_runs(args: argparse.Namespace) -> dict[str, dict[str, Timings]]:
    spec = Fill(args.targets, 30, 3.5)
    with tempfile.TemporaryDirectory() as work, sqlite_store(Path(work) / "slo.db") as store:
        started = time.perf_counter()
        written = fill(store, spec)
        write_raw(store, spec, 15 * (args.store_ticks + 4))
        print(f"store: {args.targets} targets, {written:,} snapshots written "
              f"({time.perf_counter() - started:.0f} s), "
              f"{(Path(work) / 'slo.db').stat().st_size / 1e6:.0f} MB")
        wrappers: dict[str, Callable[[SliSource], SliSource]] = {"store": lambda s: s}
        if args.per_slo:
            wrappers["store per SLO"] = OneAtATime
        results = {}
        for name, wrap in wrappers.items():
            evaluators = {period: SloEvaluator(store_slos(args.slos, period, args.targets),
                                               wrap(StoreSliSource(store)), settle_seconds=30)
                          for period in ("30d", "1d")}
            results[name] = run(evaluators, spec.end + 15, args.store_ticks)
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slos", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=240, help="15-second ticks per evaluator")
    parser.add_argument("--store", action="store_true", help="also over a SQLite store")
    parser.add_argument("--targets", type=int, default=20, help="targets in the store")
    parser.add_argument("--store-ticks", type=int, default=40,
                        help="15-second ticks per evaluator over the store")
    parser.add_argument("--per-slo", action="store_true",
                        help="also read the store one SLO at a time (slow: minutes)")
    args = parser.parse_args()

    meter = OtherCpuMeter()
    source = SyntheticSource(args.slos)
    results = {"memory": run({period: SloEvaluator(slos(args.slos, period), source,
                                                   settle_seconds=30)
                              for period in ("30d", "1d")}, T_END, args.ticks)}
    if args.store:
        results.update(store_runs(args))
    others = meter.cores()

    print(f"{args.slos} SLOs per evaluator, 30 days of history; ticks every 15 s "
          f"(memory: {args.ticks}, store: {args.store_ticks}; a new minute every 4th tick)")
    print(f"{'source':<14} {'period':>6} {'first tick (load)':>18} {'mean tick':>10} "
          f"{'p99 tick':>10}")
    for name, timings in results.items():
        for period, t in timings.items():
            print(f"{name:<14} {period:>6} {t.first:>17.2f}s {t.mean * 1e3:>8.1f}ms "
                  f"{t.p99 * 1e3:>8.1f}ms")
    for name, timings in results.items():
        slowest = max(t.first for t in timings.values())
        ratio = timings["30d"].mean / timings["1d"].mean
        print(f"{name}: first tick < 5 s: {'PASS' if slowest < 5 else 'FAIL'} "
              f"(slowest {slowest:.2f} s); tick time 30d / 1d: {ratio:.3f} "
              f"(target <= 1.5: {'PASS' if ratio <= 1.5 else 'FAIL'})")
    print(f"others (cores used by other processes): "
          f"{'n/a' if others is None else f'{others:.2f}'}")


if __name__ == "__main__":
    main()
