"""Evaluation tick cost of 1,000 SLOs over 30 days of 1-minute data, against 1-day SLOs.

    python -m bench.slo_eval [--slos 1000] [--ticks 240]

The evaluator must be incremental: a tick costs the same whatever the window length. Two
evaluators of N availability SLOs each (one with 30-day periods, one with 1-day periods) are
warmed up on 30 days of per-minute synthetic data (each SLO its own series: Poisson traffic,
rare error bursts) and then ticked every 15 s of simulated time, interleaved, so both see the
same machine. Printed: mean and p99 tick time of each, their ratio (target: 30d / 1d <= 1.5),
the first tick (which loads the history), and the cores other processes used meanwhile.

The source is in memory (``SyntheticSource``), so this measures the evaluator itself; the
store's own read cost per tick is that of one-minute range queries, independent of the window.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench.cpu_meter import OtherCpuMeter
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.source import Step, StepArrays
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slos", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=240, help="15-second ticks per evaluator")
    args = parser.parse_args()

    source = SyntheticSource(args.slos)
    evaluators = {period: SloEvaluator(slos(args.slos, period), source, settle_seconds=30)
                  for period in ("30d", "1d")}
    first: dict[str, float] = {}
    for period, evaluator in evaluators.items():
        started = time.perf_counter()
        evaluator.tick(T_END)
        first[period] = time.perf_counter() - started

    meter = OtherCpuMeter()
    times: dict[str, list[float]] = {p: [] for p in evaluators}
    for k in range(1, args.ticks + 1):
        now = T_END + 15 * k
        for period in (("30d", "1d") if k % 2 else ("1d", "30d")):
            started = time.perf_counter()
            evaluators[period].tick(now)
            times[period].append(time.perf_counter() - started)
    others = meter.cores()

    def p99(values: list[float]) -> float:
        return float(np.percentile(values, 99))

    print(f"{args.slos} availability SLOs each, 30 days of 1-minute history, "
          f"{args.ticks} ticks of 15 s (a new minute every 4th tick)")
    print(f"{'period':>6} {'first tick (load)':>18} {'mean tick':>10} {'p99 tick':>10}")
    for period in evaluators:
        print(f"{period:>6} {first[period]:>17.2f}s {statistics.mean(times[period]) * 1e3:>8.1f}ms"
              f" {p99(times[period]) * 1e3:>8.1f}ms")
    ratio = statistics.mean(times["30d"]) / statistics.mean(times["1d"])
    print(f"tick time 30d / 1d: {ratio:.3f} (target <= 1.5: {'PASS' if ratio <= 1.5 else 'FAIL'})")
    print(f"others (cores used by other processes): "
          f"{'n/a' if others is None else f'{others:.2f}'}")


if __name__ == "__main__":
    main()
