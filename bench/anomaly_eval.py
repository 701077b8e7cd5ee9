"""Anomaly detectors on labelled synthetic series: NAB scores, precision/recall per anomaly
window, detection delay, and false alerts per day on clean data.

    python -m bench.anomaly_eval [--days 14] [--per-kind 4] [--seed 0] [--json out.json]

The corpus (bench/anomaly_synthetic.py) is one-minute series shaped like serving metrics
(tokens/s following a daily and weekly load cycle with unlabelled traffic surges, and p99
latency), with level shifts, spikes, slow drifts and variance changes at known times. Each
series is scored as a stream by ``monitor.anomaly.series.SeriesScorer``: the same detectors
and the one parameter set the monitor uses, given the offered load with the throughput series
(latency does not scale with the load, so it is scored on its own).

Detectors reported side by side, NAB-scored on the same windows (NAB: 10% of the series
around the anomalies, sigmoid-weighted early detection, the first 15% probationary):
- inferwatch alerts: the rows where an alert starts (what would be sent);
- inferwatch scores: its anomaly score with NAB's optimized threshold (NAB's own protocol);
- inferwatch without load: the same, blind to the offered load;
- random: uniform scores, NAB-optimized threshold (NAB's random baseline);
- null: never detects (0 by NAB's normalization).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.anomaly_synthetic import KINDS, LabelledSeries, clean_corpus, corpus, nab_windows
from monitor.anomaly import nab
from monitor.anomaly.detectors import Direction
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import SeriesScorer

MINUTES_PER_DAY = 1440


@dataclass(frozen=True, slots=True)
class Scored:
    series: LabelledSeries
    scores: npt.NDArray[np.float64]
    starts: npt.NDArray[np.bool_]   # an alert starts on the row


@dataclass(frozen=True, slots=True)
class KindResult:
    kind: str
    windows: int
    recall: float
    precision: float
    median_delay_minutes: float


@dataclass(frozen=True, slots=True)
class Report:
    series: int
    rows: int
    nab: dict[str, dict[str, float]]          # detector -> profile -> normalized score
    kinds: list[KindResult]
    overall_recall: float
    overall_precision: float
    false_alerts_per_day: float               # clean corpus, whole series
    false_alerts_per_day_without_load: float
    clean_days: float
    seconds_per_1000_points: float


def score(series: LabelledSeries, params: AnomalyParams, use_load: bool = True) -> Scored:
    scorer = SeriesScorer(params, Direction.BOTH)
    load = (series.load if use_load and series.load is not None
            and series.metric == "throughput" else None)
    scores = np.zeros(len(series.values))
    starts = np.zeros(len(series.values), dtype=bool)
    for k, (t, v) in enumerate(zip(series.timestamps, series.values, strict=True)):
        point = scorer.update(float(t), float(v), float(load[k]) if load is not None else math.nan)
        scores[k], starts[k] = point.score, point.started
    return Scored(series, scores, starts)


def nab_scores(scored: Sequence[Scored], random_seed: int) -> dict[str, dict[str, float]]:
    labelled = [(s, nab_windows(s.series)) for s in scored]
    out: dict[str, dict[str, float]] = {}
    for name, profile in nab.PROFILES.items():
        row = out.setdefault(name, {})
        row["inferwatch alerts"] = nab.normalized(
            [nab.score_series(s.starts, w, profile) for s, w in labelled])
        row["inferwatch scores (NAB threshold)"] = nab.optimize_threshold(
            [(s.scores, w) for s, w in labelled], profile)[1]
        row["random (NAB threshold)"] = nab.optimize_threshold(
            [(nab.random_scores(len(s.scores), seed=random_seed + k), w)
             for k, (s, w) in enumerate(labelled)], profile)[1]
        row["null"] = nab.normalized(
            [nab.score_series(np.zeros(len(s.scores), dtype=bool), w, profile)
             for s, w in labelled])
    return out


def window_results(scored: Sequence[Scored]) -> tuple[list[KindResult], float, float]:
    per_kind: dict[str, list[nab.WindowMetrics]] = {}
    for s in scored:
        if not s.series.anomalies:
            continue
        windows = nab_windows(s.series)
        # Delay from the first labelled start inside each (possibly merged) window.
        firsts = [min((a.start_index for a in s.series.anomalies
                       if w.start <= a.start_index <= w.end), default=w.anomaly)
                  for w in windows]
        metrics = nab.window_metrics(s.starts, windows, n=len(s.starts), anomaly_starts=firsts)
        per_kind.setdefault(s.series.anomalies[0].kind, []).append(metrics)
    results = [_kind_result(kind, per_kind.get(kind, [])) for kind in KINDS]
    every = [m for ms in per_kind.values() for m in ms]
    total = _kind_result("all", every)
    return results, total.recall, total.precision


def _kind_result(kind: str, metrics: Sequence[nab.WindowMetrics]) -> KindResult:
    windows = sum(m.windows for m in metrics)
    detected = sum(m.detected for m in metrics)
    alerts = sum(m.alerts for m in metrics)
    true_alerts = sum(m.true_alerts for m in metrics)
    delays = [d for m in metrics for d in m.delays if d is not None]
    return KindResult(kind, windows, detected / windows if windows else math.nan,
                      true_alerts / alerts if alerts else math.nan,
                      float(np.median(delays)) if delays else math.nan)


def false_alerts_per_day(scored: Sequence[Scored]) -> tuple[float, float]:
    days = sum(len(s.starts) for s in scored) / MINUTES_PER_DAY
    return sum(int(s.starts.sum()) for s in scored) / days, days


def run(*, days: float, per_kind: int, clean: int, seed: int) -> Report:
    params = AnomalyParams()
    labelled = corpus(seed, days, per_kind=per_kind, clean=clean,
                      metrics=("throughput", "latency"))
    started = time.perf_counter()
    scored = [score(s, params) for s in labelled]
    elapsed = time.perf_counter() - started
    rows = sum(len(s.series.values) for s in scored)
    clean_series = clean_corpus(seed, days, size=clean * 2, metrics=("throughput", "latency"))
    clean_scored = [score(s, params) for s in clean_series]
    blind = [score(s, params, use_load=False) for s in clean_series]
    nab_table = nab_scores(scored, seed)
    blind_scored = [score(s, params, use_load=False) for s in labelled]
    for name, profile in nab.PROFILES.items():
        nab_table[name]["inferwatch alerts, load ignored"] = nab.normalized(
            [nab.score_series(s.starts, nab_windows(s.series), profile) for s in blind_scored])
    kinds, recall, precision = window_results(scored)
    fa, clean_days = false_alerts_per_day(clean_scored)
    fa_blind, _ = false_alerts_per_day(blind)
    return Report(len(scored), rows, nab_table, kinds, recall, precision, fa, fa_blind,
                  clean_days, 1e6 * elapsed / rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--per-kind", type=int, default=4, help="series per anomaly kind")
    parser.add_argument("--clean", type=int, default=4, help="clean series in the corpus "
                        "(twice as many in the clean corpus for false alerts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    report = run(days=args.days, per_kind=args.per_kind, clean=args.clean, seed=args.seed)
    print(f"{report.series} labelled series, {report.rows} one-minute points; scoring "
          f"{report.seconds_per_1000_points:.0f} ms per 1000 points (one core)")
    print("\nNAB normalized score (null = 0, perfect = 100)")
    detectors = list(next(iter(report.nab.values())))
    print(f"  {'detector':<36}" + "".join(f"{p:>20}" for p in report.nab))
    for d in detectors:
        print(f"  {d:<36}" + "".join(f"{report.nab[p][d]:>20.1f}" for p in report.nab))
    print("\nper anomaly window (inferwatch alerts)")
    print(f"  {'kind':<16}{'windows':>8}{'recall':>8}{'precision':>10}{'delay (min)':>12}")
    for k in report.kinds:
        print(f"  {k.kind:<16}{k.windows:>8}{k.recall:>8.2f}{k.precision:>10.2f}"
              f"{k.median_delay_minutes:>12.0f}")
    print(f"  {'all':<16}{'':>8}{report.overall_recall:>8.2f}{report.overall_precision:>10.2f}")
    print(f"\nfalse alerts on clean data: {report.false_alerts_per_day:.2f} per day over "
          f"{report.clean_days:.0f} series-days ({report.false_alerts_per_day_without_load:.2f} "
          "per day when the offered load is ignored)")
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2))


if __name__ == "__main__":
    main()
